// strata sim and strata plan: argument parsing and output (the work is in tools/sim.c, plan.c).
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "experts/layout.h"
#include "experts/trace.h"
#include "gguf/gguf.h"
#include "tools/plan.h"
#include "tools/sim.h"
#include "util/log.h"

static void sim_usage(FILE *out)
{
    fprintf(out,
            "usage: strata sim TRACE (--slots N | --cache-mib N -m MODEL) [options]\n"
            "       strata sim TRACE (--gpu-slots N | --gpu-cache-mib N -m MODEL) [--slots N | --cache-mib N] [options]\n\n"
            "  --slots N            cache slots per layer\n"
            "  --cache-mib N        a budget, converted to slots with MODEL's size classes\n"
            "  -m, --model FILE     the GGUF the trace came from (for --cache-mib and MiB columns)\n"
            "  --cache-classes on|off  as in strata run (default on)\n"
            "  --chunks on|off      replay prompt chunks as the engine fetched them (default on)\n"
            "  --sweep              table over cache sizes from top-k to all experts, and a plot\n"
            "  --plot FILE          SVG of the sweep (default TRACE.svg)\n"
            "  --gpu-slots N        two tiers: N VRAM slots per layer over the host cache (--slots or\n"
            "                       --cache-mib; default every expert), as the engine's --gpu-cache-mib\n"
            "                       with --gpu-miss copy: misses per tier (host misses: reads from the file)\n"
            "  --gpu-cache-mib N    the same from a VRAM budget (with -m MODEL)\n"
            "  --hot-share F        HOT: share of the slots kept for the hot set (default 0.5)\n"
            "  --hot-from TRACE2    HOT: learn the hot set from TRACE2 (default: TRACE itself, in-sample)\n"
            "  --pin-from TRACE2    every policy around a pinned hot set, as the engine's --pin-from: the\n"
            "                       experts TRACE2 used most, resident from the start, never evicted\n"
            "  --pin-share F        its share of the slots (default 0.25, as the engine)\n"
            "  --decode             count the one-token passes' accesses only (decode; the prompt's chunks\n"
            "                       are replayed first), as the engine's split_hit_rate\n\n"
            "policies: LRU (the engine's), LFU, LRFU, ARC, HOT (LRU around a learned pinned hot set),\n"
            "Belady (the optimum)\n");
}

struct sim_row {
    uint32_t slots;
    struct strata_sim_result r[STRATA_SIM_COUNT];
};

// --decode: a result's counts become its one-token passes' (decode's) own.
static void as_decode(struct strata_sim_result *r)
{
    r->hits = r->decode_hits;
    r->misses = r->decode_misses;
    r->tokens = r->decode_tokens;
}

static double hit_rate(const struct strata_sim_result *r)
{
    return r->hits + r->misses ? (double)r->hits / (double)(r->hits + r->misses) : 1.0;
}

static int write_svg(const char *path, const struct sim_row *rows, int n, uint32_t n_expert)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "strata sim: cannot write %s\n", path);
        return 1;
    }
    static const char *const colors[STRATA_SIM_COUNT] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                                         "#444444"};
    const double W = 640, H = 400, x0 = 60, y0 = 20, pw = 540, ph = 320;
    fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' font-family='sans-serif' "
               "font-size='12'>\n<rect width='100%%' height='100%%' fill='white'/>\n", W, H);
    fprintf(f, "<rect x='%.0f' y='%.0f' width='%.0f' height='%.0f' fill='none' stroke='black'/>\n", x0, y0, pw, ph);
    for (int i = 0; i <= 4; i++)
        fprintf(f, "<text x='%.0f' y='%.0f' text-anchor='end'>%d%%</text>\n", x0 - 5, y0 + ph - ph * i / 4 + 4,
                i * 25);
    fprintf(f, "<text x='%.0f' y='%.0f' text-anchor='middle'>slots per layer (of %u experts)</text>\n",
            x0 + pw / 2, H - 20, n_expert);
    for (int i = 0; i < n; i++)
        fprintf(f, "<text x='%.1f' y='%.0f' text-anchor='middle'>%u</text>\n",
                x0 + pw * rows[i].slots / (double)n_expert, y0 + ph + 15, rows[i].slots);
    for (int p = 0; p < STRATA_SIM_COUNT; p++) {
        fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='2' points='", colors[p]);
        for (int i = 0; i < n; i++)
            fprintf(f, "%.1f,%.1f ", x0 + pw * rows[i].slots / (double)n_expert,
                    y0 + ph - ph * hit_rate(&rows[i].r[p]));
        fprintf(f, "'/>\n<text x='%.0f' y='%.0f' fill='%s'>%s</text>\n", x0 + 10, y0 + 15 + 15.0 * p, colors[p],
                strata_sim_policy_name((enum strata_sim_policy)p));
    }
    fprintf(f, "<text x='%.0f' y='%.0f' text-anchor='middle' transform='rotate(-90 15 %.0f)'>hit rate</text>\n", 15.0,
            y0 + ph / 2, y0 + ph / 2);
    fprintf(f, "</svg>\n");
    return fclose(f) ? 1 : 0;
}

// strata sim --gpu-slots: every policy through VRAM slots over host slots.
static int sim_two_tiers(const struct strata_trace *t, const struct strata_sim_opts *so, uint32_t vram, uint32_t host,
                         bool decode)
{
    if (vram < t->topk || host < t->topk) {
        fprintf(stderr, "strata sim: %u VRAM / %u host slots per layer: below top-k (%u)\n", vram, host, t->topk);
        return STRATA_EARG;
    }
    printf("trace: tokens=%llu, two tiers: %u VRAM slots per layer over %u host slots (%s), the copy path\n",
           (unsigned long long)t->n_tokens, vram, host, host >= t->n_expert ? "every expert" : "bounded");
    printf("%8s %12s %10s %9s %12s %10s %9s %7s\n", "policy", "vram_misses", "/tok", "vram_hit", "host_misses",
           "/tok", "host_hit", "pinned");
    for (int p = 0; p < STRATA_SIM_COUNT; p++) {
        struct strata_sim_result v, h;
        int rc = strata_sim_replay2(t, (enum strata_sim_policy)p, vram, host, so, &v, &h);
        if (rc) return rc;
        if (decode) {
            as_decode(&v);
            as_decode(&h);
        }
        printf("%8s %12llu %10.3f %8.2f%% %12llu %10.3f %8.2f%% %3u/%-3u\n", strata_sim_policy_name(p),
               (unsigned long long)v.misses, (double)v.misses / (double)(v.tokens ? v.tokens : 1), 100 * hit_rate(&v),
               (unsigned long long)h.misses, (double)h.misses / (double)(h.tokens ? h.tokens : 1), 100 * hit_rate(&h),
               v.n_pinned, h.n_pinned);
    }
    return 0;
}

int cli_sim(int argc, char **argv)
{
    static const struct option opts[] = {
        {"slots", required_argument, 0, 's'},     {"cache-mib", required_argument, 0, 'c'},
        {"model", required_argument, 0, 'm'},     {"cache-classes", required_argument, 0, 'C'},
        {"chunks", required_argument, 0, 'k'},    {"sweep", no_argument, 0, 'S'},
        {"plot", required_argument, 0, 'p'},      {"help", no_argument, 0, 'h'},
        {"hot-share", required_argument, 0, 'H'}, {"hot-from", required_argument, 0, 'F'},
        {"pin-from", required_argument, 0, 'P'},  {"pin-share", required_argument, 0, 'Q'},
        {"gpu-slots", required_argument, 0, 'g'}, {"gpu-cache-mib", required_argument, 0, 'G'},
        {"decode", no_argument, 0, 'D'},          {0, 0, 0, 0}};
    int slots = 0, gpu_slots = 0, c;
    uint64_t cache_mib = 0, gpu_mib = 0;
    const char *model = NULL, *plot = NULL, *hot_from = NULL, *pin_from = NULL;
    bool classes = true, chunks = true, sweep = false, decode = false;
    float hot_share = 0.5f, pin_share = 0;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "m:h", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 's': bad = cli_parse_int(optarg, "--slots", 1, 1 << 20, &slots); break;
        case 'c': bad = cli_parse_u64(optarg, "--cache-mib", &cache_mib); break;
        case 'm': model = optarg; break;
        case 'C': classes = strcmp(optarg, "off") != 0; break;
        case 'k': chunks = strcmp(optarg, "off") != 0; break;
        case 'S': sweep = true; break;
        case 'D': decode = true; break;
        case 'p': plot = optarg; break;
        case 'H': bad = cli_parse_float(optarg, "--hot-share", 0.01, 1, &hot_share); break;
        case 'F': hot_from = optarg; break;
        case 'P': pin_from = optarg; break;
        case 'g': bad = cli_parse_int(optarg, "--gpu-slots", 1, 1 << 20, &gpu_slots); break;
        case 'G': bad = cli_parse_u64(optarg, "--gpu-cache-mib", &gpu_mib); break;
        case 'Q': bad = cli_parse_float(optarg, "--pin-share", 0.01, 1, &pin_share); break;
        case 'h': sim_usage(stdout); return 0;
        default:
            fprintf(stderr, "strata sim: bad option '%s' (see strata sim --help)\n", argv[optind - 1]);
            return 2;
        }
        if (bad) return 2;
    }
    if (optind != argc - 1) {
        fprintf(stderr, "strata sim: give one trace file (see strata sim --help)\n");
        return 2;
    }
    const char *trace_path = argv[optind];
    const bool two = gpu_slots || gpu_mib;
    if (!sweep && !slots && !cache_mib && !two) {
        fprintf(stderr, "strata sim: give --slots N, --cache-mib N -m MODEL, --gpu-slots N, or --sweep\n");
        return 2;
    }
    if (two && sweep) {
        fprintf(stderr, "strata sim: --sweep is for one tier (leave out --gpu-slots / --gpu-cache-mib)\n");
        return 2;
    }
    if ((cache_mib || gpu_mib) && !model) {
        fprintf(stderr, "strata sim: --cache-mib needs -m MODEL (its size classes turn MiB into slots)\n");
        return 2;
    }
    struct strata_trace t, train = {0}, pins = {0};
    if (strata_trace_load(&t, trace_path)) return 1;
    if ((hot_from && strata_trace_load(&train, hot_from)) || (pin_from && strata_trace_load(&pins, pin_from))) {
        strata_trace_free(&t);
        strata_trace_free(&train);
        return 1;
    }
    const struct strata_sim_opts so = {.chunks = chunks, .hot_share = hot_share, .hot_from = hot_from ? &train : NULL,
                                       .pin_from = pin_from ? &pins : NULL, .pin_share = pin_share};
    struct strata_gguf_file *f = NULL;
    struct strata_expert_layout lay = {0};
    int rc = 0;
    if (model) {
        rc = strata_gguf_open(&f, model);
        if (rc == 0) rc = strata_expert_layout_init(&lay, f);
        if (rc == 0 && (lay.n_layers != t.n_layers || lay.n_expert != t.n_expert)) {
            fprintf(stderr, "strata sim: the trace has %u layers x %u experts, %s has %u x %u\n", t.n_layers,
                    t.n_expert, model, lay.n_layers, lay.n_expert);
            rc = STRATA_EARG;
        }
    }
    if (rc == 0 && cache_mib) {
        struct strata_slot_plan plan;
        strata_expert_layout_plan(&lay, cache_mib << 20, classes, &plan);
        slots = (int)plan.n_slots;
        printf("--cache-mib %llu: %u slots per layer (%s)\n", (unsigned long long)cache_mib, plan.n_slots,
               plan.uniform ? "uniform" : "size classes");
    }
    if (rc == 0 && gpu_mib) {
        struct strata_slot_plan plan;
        strata_expert_layout_plan(&lay, gpu_mib << 20, classes, &plan);
        gpu_slots = (int)plan.n_slots;
        printf("--gpu-cache-mib %llu: %u VRAM slots per layer\n", (unsigned long long)gpu_mib, plan.n_slots);
    }
    if (rc == 0 && two) {
        rc = sim_two_tiers(&t, &so, (uint32_t)gpu_slots, slots ? (uint32_t)slots : t.n_expert, decode);
        goto done;
    }
    printf("trace: %s  model=%s layers=%u experts=%u topk=%u tokens=%llu\n", trace_path, t.model, t.n_layers,
           t.n_expert, t.topk, (unsigned long long)t.n_tokens);
    struct strata_route_stats rs;
    if (t.n_tokens >= 8 && strata_route_stats(&t, 4, &rs) == 0)
        printf("routing (median layer): 90%% of the picks on %.0f of %u experts, the most-picked %.1f%% of them "
               "(uniform: ~%.0f, %.1f%%); %.0f%% of a token's experts were the token before's; 4 tokens %llu "
               "apart route to %.1f distinct of %u picks (reads shared by 4 sessions: at most %.2fx)\n",
               rs.cover90, t.n_expert, 100.0 * rs.top_share, 0.9 * t.n_expert, 100.0 / t.n_expert,
               100.0 * rs.prev_overlap, (unsigned long long)(t.n_tokens / 4), rs.distinct, 4 * t.topk,
               4 * t.topk / rs.distinct);
    printf("HOT: %.0f%% of the slots for the experts %s uses most%s\n", 100.0 * hot_share,
           hot_from ? hot_from : "this trace", hot_from ? "" : " (in-sample: an optimistic bound)");
    struct sim_row rows[64];
    int n_rows = 0;
    if (rc == 0 && sweep) {
        // top-k, then about 12 steps up to all experts
        for (double s = t.topk; n_rows < 64; s *= 1.35) {
            uint32_t v = (uint32_t)s;
            if (n_rows && v <= rows[n_rows - 1].slots) v = rows[n_rows - 1].slots + 1;
            if (v >= t.n_expert) v = t.n_expert;
            rows[n_rows++].slots = v;
            if (v == t.n_expert) break;
        }
    } else if (rc == 0) {
        if ((uint32_t)slots < t.topk) {
            fprintf(stderr, "strata sim: %d slots per layer is below top-k (%u)\n", slots, t.topk);
            rc = STRATA_EARG;
        }
        rows[n_rows++].slots = (uint32_t)slots;
    }
    for (int i = 0; i < n_rows && rc == 0; i++)
        for (int p = 0; p < STRATA_SIM_COUNT && rc == 0; p++)
            if ((rc = strata_sim_replay(&t, (enum strata_sim_policy)p, rows[i].slots, &so, &rows[i].r[p])) == 0 && decode)
                as_decode(&rows[i].r[p]);
    if (rc == 0 && decode && n_rows)
        printf("decode: the %llu one-token passes of the %llu tokens counted (the prompt's chunks replayed first)\n",
               (unsigned long long)rows[0].r[0].tokens, (unsigned long long)t.n_tokens);
    if (rc == 0 && pin_from && n_rows == 1)
        printf("pinned: %u experts per layer that %s uses most (every policy runs in the other %u slots)\n",
               rows[0].r[0].n_pinned, pin_from, rows[0].slots - rows[0].r[0].n_pinned);
    else if (rc == 0 && pin_from)
        printf("pinned: %.0f%% of each row's slots for the experts %s uses most\n",
               100.0 * (pin_share > 0 ? pin_share : STRATA_PIN_SHARE_DEFAULT), pin_from);
    if (rc == 0) {
        printf("%8s %10s", "slots", model ? "cache_MiB" : "");
        for (int p = 0; p < STRATA_SIM_COUNT; p++)
            printf("  %8s_misses %8s/tok %8s_hit", strata_sim_policy_name(p), "", strata_sim_policy_name(p));
        printf("\n");
        for (int i = 0; i < n_rows; i++) {
            double mib = 0;
            if (model) {
                struct strata_slot_plan pl;
                uint64_t per_slot = 0;
                strata_expert_layout_plan(&lay, 0, classes, &pl);
                for (uint32_t l = 0; l < lay.n_layers; l++) per_slot += strata_expert_layout_slot_size(&lay, &pl, l);
                mib = (double)per_slot * rows[i].slots / 1048576.0;
            }
            printf("%8u %10.1f", rows[i].slots, mib);
            for (int p = 0; p < STRATA_SIM_COUNT; p++) {
                const struct strata_sim_result *r = &rows[i].r[p];
                printf("  %15llu %12.3f %11.2f%%", (unsigned long long)r->misses,
                       r->tokens ? (double)r->misses / (double)r->tokens : 0.0, 100 * hit_rate(r));
            }
            printf("\n");
        }
        if (sweep) {
            char def[4096];
            if (!plot) {
                snprintf(def, sizeof def, "%s.svg", trace_path);
                plot = def;
            }
            if (write_svg(plot, rows, n_rows, t.n_expert)) rc = STRATA_EIO;
            else printf("plot: %s\n", plot);
        }
    }
done:
    strata_expert_layout_free(&lay);
    strata_gguf_close(f);
    strata_trace_free(&t);
    strata_trace_free(&train);
    strata_trace_free(&pins);
    return rc ? 1 : 0;
}

int cli_plan(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},  {"ram-gib", required_argument, 0, 'r'},
        {"trace", required_argument, 0, 't'},  {"disk-gbs", required_argument, 0, 'd'},
        {"mem-gbs", required_argument, 0, 'M'}, {"ctx", required_argument, 0, 'c'},
        {"reserve-gib", required_argument, 0, 'R'}, {"help", no_argument, 0, 'h'},
        {"measure-disk", no_argument, 0, 'D'}, {"seconds", required_argument, 0, 'S'},
        {"curve-out", required_argument, 0, 'o'}, {"disk-curve", required_argument, 0, 'k'},
        {"cache-mib", required_argument, 0, 'b'}, {"io-threads", required_argument, 0, 'i'},
        {"cache-policy", required_argument, 0, 'P'}, {"mem-mib", required_argument, 0, 'B'},
        {"gpu-mib", required_argument, 0, 'g'}, {"gpu-cache-mib", required_argument, 0, 'G'},
        {"hbm-gbs", required_argument, 0, 'H'}, {"pcie-gbs", required_argument, 0, 'e'},
        {"gpu-layer-us", required_argument, 0, 'L'}, {"gpu-reserve-mib", required_argument, 0, 'v'},
        {0, 0, 0, 0}};
    struct strata_plan_opts o = {.reserve_gib = 1.0, .gpu_layer_us = -1};
    uint64_t mem_mib = 0;
    float v, seconds = 1.0f;
    bool measure = false;
    const char *curve_out = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "m:c:h", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'm': o.model = optarg; break;
        case 'r': bad = cli_parse_float(optarg, "--ram-gib", 0.01, 1 << 20, &v); o.ram_gib = v; break;
        case 't': o.trace = optarg; break;
        case 'd': bad = cli_parse_float(optarg, "--disk-gbs", 0.001, 1000, &v); o.disk_gbs = v; break;
        case 'M': bad = cli_parse_float(optarg, "--mem-gbs", 0.001, 100000, &v); o.mem_gbs = v; break;
        case 'c': bad = cli_parse_int(optarg, "--ctx", 1, 1 << 24, &o.n_ctx); break;
        case 'R': bad = cli_parse_float(optarg, "--reserve-gib", 0, 1 << 20, &v); o.reserve_gib = v; break;
        case 'D': measure = true; break;
        case 'S': bad = cli_parse_float(optarg, "--seconds", 0.01, 3600, &seconds); break;
        case 'o': curve_out = optarg; break;
        case 'k': o.disk_curve = optarg; break;
        case 'b': bad = cli_parse_u64(optarg, "--cache-mib", &o.cache_mib); break;
        case 'B': bad = cli_parse_u64(optarg, "--mem-mib", &mem_mib); break;
        case 'i': bad = cli_parse_int(optarg, "--io-threads", 1, 256, &o.io_depth); break;
        case 'g': bad = cli_parse_float(optarg, "--gpu-mib", 1, 1 << 30, &v); o.gpu_mib = v; break;
        case 'G': bad = cli_parse_u64(optarg, "--gpu-cache-mib", &o.gpu_cache_mib); break;
        case 'H': bad = cli_parse_float(optarg, "--hbm-gbs", 0.001, 1e6, &v); o.hbm_gbs = v; break;
        case 'e': bad = cli_parse_float(optarg, "--pcie-gbs", 0.001, 1e4, &v); o.pcie_gbs = v; break;
        case 'L': bad = cli_parse_float(optarg, "--gpu-layer-us", 0, 1e6, &v); o.gpu_layer_us = v; break;
        case 'v': bad = cli_parse_float(optarg, "--gpu-reserve-mib", 0.001, 1 << 30, &v); o.gpu_reserve_mib = v; break;
        case 'P':
            if (strcmp(optarg, "lfu") && strcmp(optarg, "lru")) {
                fprintf(stderr, "strata plan: --cache-policy: '%s' is not lfu or lru\n", optarg);
                return 2;
            }
            o.lru = strcmp(optarg, "lru") == 0;
            break;
        case 'h':
            printf("usage: strata plan -m MODEL (--ram-gib R | --cache-mib N | --mem-mib N) [--trace TRACE]\n"
                   "                   [--disk-gbs G | --disk-curve FILE] [--io-threads N] [--cache-policy lfu|lru]\n"
                   "                   [--mem-gbs G]\n"
                   "       strata plan -m MODEL (--gpu-mib N | --gpu-cache-mib N) [--ram-gib R | --cache-mib N]\n"
                   "                   [--hbm-gbs G] [--pcie-gbs G] [--gpu-layer-us U] [--gpu-reserve-mib N]\n"
                   "                   [--mem-gbs G] [--trace TRACE] [--disk-gbs G | --disk-curve FILE]\n"
                   "                   [--ctx N] [--reserve-gib G]\n"
                   "       strata plan -m FILE --measure-disk [--seconds S] [--curve-out FILE]\n"
                   "dense and expert bytes, full residency with size classes, the recommended --cache-mib\n"
                   "for R GiB of RAM (or the given one), expected miss bytes per token (LFU or LRU replay of TRACE,\n"
                   "else uniform routing) and the predicted decode speed: resident bytes / memory GB/s +\n"
                   "miss bytes / disk GB/s, the disk priced at the engine's read size and reads in flight\n"
                   "from the curve, else from 2 s of such reads now.\n"
                   "--measure-disk: the disk's random-read curve, GB/s of O_DIRECT reads of 64 KiB..4 MiB\n"
                   "at 1..32 in flight, S seconds each (default 1), read from the second half of FILE\n"
                   "--mem-mib N: the expert cache the engine derives from `run --mem-mib N` (it opens the\n"
                   "model the way run does, at --ctx, default 4096), then priced as --cache-mib\n"
                   "--gpu-mib N: the VRAM tier (--backend cuda): N MiB of device memory holds the dense weights,\n"
                   "the KV cache at --ctx, the scratch and --gpu-reserve-mib (default 1024), the rest the expert\n"
                   "slots (--gpu-cache-mib prices a given one); the host cache behind them from --ram-gib or\n"
                   "--cache-mib (default every expert). Decode per token: --gpu-layer-us per layer (default 107,\n"
                   "an H200's fully resident decode) + resident bytes / --hbm-gbs (default 4800) + the VRAM\n"
                   "misses by --gpu-miss: copy over --pcie-gbs (default 45), cpu at --mem-gbs, auto split so\n"
                   "both finish together (miss bytes / (PCIe + memory)); + host misses from the disk.\n"
                   "Misses: a two-tier LFU (or LRU) replay of TRACE, else uniform routing.\n");
            return 0;
        default:
            fprintf(stderr, "strata plan: bad option '%s' (see strata plan --help)\n", argv[optind - 1]);
            return 2;
        }
        if (bad) return 2;
    }
    if (measure) {
        if (!o.model) {
            fprintf(stderr, "strata plan: --measure-disk needs -m FILE (a large file on the disk to measure)\n");
            return 2;
        }
        struct strata_disk_curve curve;
        printf("# %s: random O_DIRECT reads, %.2f s per point\n%8s %5s %8s %8s\n", o.model, seconds, "read_kib",
               "depth", "GB/s", "ms/read");
        if (strata_disk_curve_measure(o.model, NULL, 0, NULL, 0, seconds, &curve, stdout)) return 1;
        if (curve_out && strata_disk_curve_save(&curve, curve_out)) return 1;
        return 0;
    }
    if (o.model && mem_mib) {  // what the engine itself makes of the bound
        struct strata_engine_params ep = strata_engine_default_params();
        ep.model = o.model;
        ep.backend = STRATA_BACKEND_CPU;
        ep.memory_bound_bytes = mem_mib << 20;
        ep.n_ctx = o.n_ctx > 0 ? o.n_ctx : 4096;
        struct strata_engine *e = NULL;
        if (strata_engine_open(&e, &ep)) return 1;
        struct strata_model_info info;
        strata_engine_info(e, &info);
        strata_engine_close(e);
        printf("--mem-mib %llu: expert cache %.0f MiB, the rest %.0f MiB (dense weights %.0f MiB, one session's KV "
               "at %d positions, scratch and reserve)\n",
               (unsigned long long)mem_mib, info.expert_bytes / 1048576.0, info.mem_other_bytes / 1048576.0,
               info.dense_bytes / 1048576.0, ep.n_ctx);
        o.cache_mib = (info.expert_bytes + (1 << 20) - 1) >> 20;
    }
    if (!o.model || (o.ram_gib <= 0 && !o.cache_mib && o.gpu_mib <= 0 && !o.gpu_cache_mib)) {
        fprintf(stderr, "strata plan: -m MODEL and --ram-gib R (or --cache-mib N, --mem-mib N, --gpu-mib N) are "
                        "required\n");
        return 2;
    }
    return strata_plan(&o, stdout) ? 1 : 0;
}
