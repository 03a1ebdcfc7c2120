// Expert store tests on synthetic models: slot plans with size classes and the uniform fallback,
// LRU hits / misses / evictions against a hand-worked sequence, slot bytes equal to the file's
// expert ranges for both I/O engines and several thread counts, the minimum budget, grouped
// acquires at the slot limit, injected EIO and short reads (retried, then a clean error and no
// cached garbage), route trace write/read round trip and malformed traces, the simulator's LRU
// against the store on the same access sequence, the routing statistics of strata sim on a
// hand-worked trace, and synth --route-skew (routers scaled row by row, nothing else changed).
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "experts/provider.h"
#include "experts/store.h"
#include "experts/io.h"
#include "experts/layout.h"
#include "experts/trace.h"
#include "gguf/gguf.h"
#include "tools/plan.h"
#include "tools/sim.h"
#include "tools/synth.h"
#include "util/log.h"

#include "check.h"

static void drop_line(enum strata_log_level level, const char *line, void *user)
{
    (void)level, (void)line, (void)user;
}

// Expected errors are not printed (strata_last_error still records them).
static void quiet(bool on) { strata_log_set_sink(on ? drop_line : NULL, NULL); }

static char g_dir[] = "/tmp/strata-test-experts-XXXXXX";

static void synth(const char *path, int layers, int experts, const char *overrides)
{
    struct strata_synth_opts o = {.arch = "qwen3moe", .preset = "tiny", .out_path = path, .seed = 7,
                                  .type = -1, .n_layer = layers, .n_expert = experts,
                                  .type_overrides = overrides};
    if (strata_synth(&o)) {
        fprintf(stderr, "cannot synthesise %s\n", path);
        exit(1);
    }
}

// The view must hold exactly the three file ranges of expert e of layer l.
static int view_matches(struct strata_gguf_file *f, const struct strata_expert_layout *lay, uint32_t l, uint32_t e,
                        const struct strata_expert_view *v)
{
    const struct strata_expert_layer *el = &lay->layers[l];
    for (int p = 0; p < STRATA_EXPERT_PART_COUNT; p++) {
        char *want = malloc(el->part_bytes[p]);
        if (strata_gguf_read_tensor(f, el->tensor[p], e * el->part_bytes[p], want, el->part_bytes[p])) return 0;
        const int same = memcmp(want, v->part[p], el->part_bytes[p]) == 0;
        free(want);
        if (!same) return 0;
    }
    return 1;
}

static void test_plan(const char *mixed)
{
    struct strata_gguf_file *f;
    struct strata_expert_layout lay;
    CHECK(strata_gguf_open(&f, mixed) == 0, "open");
    CHECK(strata_expert_layout_init(&lay, f) == 0, "layout");
    CHECK(lay.n_classes == 2, "two size classes, got %u", lay.n_classes);
    uint64_t sum = 0, max = 0;
    for (uint32_t l = 0; l < lay.n_layers; l++) {
        sum += lay.layers[l].slot_bytes;
        if (lay.layers[l].slot_bytes > max) max = lay.layers[l].slot_bytes;
        CHECK(lay.layers[l].slot_bytes % 4096 == 0, "slot bytes 4 KiB aligned");
    }
    struct strata_slot_plan p;
    strata_expert_layout_plan(&lay, 20 * sum, true, &p);
    CHECK(p.n_slots == 20 && !p.uniform && p.n_classes == 2, "classes at 20 slots: %u %d", p.n_slots, p.uniform);
    CHECK(p.total_bytes == 20 * sum, "total");
    strata_expert_layout_plan(&lay, 20 * sum, false, &p);
    CHECK(p.uniform && p.n_slots == 20 * sum / (max * lay.n_layers), "classes off: uniform %u", p.n_slots);
    strata_expert_layout_plan(&lay, 10 * sum, true, &p);
    CHECK(p.uniform && p.n_slots == 10 * sum / (max * lay.n_layers), "below 16 slots: uniform %u", p.n_slots);
    strata_expert_layout_plan(&lay, 0, true, &p);
    CHECK(p.n_slots == lay.n_expert && !p.uniform, "full");
    CHECK(lay.full_residency_bytes == lay.dense_bytes + p.total_bytes, "full residency uses class sizes");
    CHECK(strata_expert_layout_min_budget(&lay, 2) == 2 * max * lay.n_layers, "min budget");
    strata_expert_layout_free(&lay);
    strata_gguf_close(f);
}

// LRU on layer 0 with 3 slots: hand-worked hits / misses / evictions.
static void test_lru(const char *path, enum strata_io_engine io, int threads)
{
    struct strata_gguf_file *f;
    struct strata_expert_layout lay;
    CHECK(strata_gguf_open(&f, path) == 0 && strata_expert_layout_init(&lay, f) == 0, "open");
    const uint64_t budget = 3 * lay.layers[0].slot_bytes * lay.n_layers;
    struct strata_experts_config cfg = {.cache_bytes = budget, .io = io, .io_threads = threads,
                                        .policy = STRATA_POLICY_LRU};
    struct strata_store *ex;
    CHECK(strata_store_open(&ex, f, &lay, 2, &cfg) == 0, "open store");
    CHECK(strata_provider_max_batch(strata_store_provider(ex)) == 3, "3 slots, got %d", strata_provider_max_batch(strata_store_provider(ex)));
    struct strata_expert_view v[4];
    // Access groups (ids) and what LRU must do: {1,2} 2 miss; {2,3} 1 hit 1 miss; {1,4} 1 hit
    // (1 resident), 4 evicts the LRU of {2,3} -> 2 (2 was touched before 3); {2} miss, evicts 3.
    const uint32_t g[4][2] = {{1, 2}, {2, 3}, {1, 4}, {2, 2}};
    const int n[4] = {2, 2, 2, 1};
    const uint64_t want_hits[4] = {0, 1, 2, 2}, want_miss[4] = {2, 3, 4, 5}, want_ev[4] = {0, 0, 1, 2};
    for (int i = 0; i < 4; i++) {
        CHECK(strata_provider_acquire(strata_store_provider(ex), 0, g[i], n[i], v) == 0, "acquire %d", i);
        for (int j = 0; j < n[i]; j++) CHECK(view_matches(f, &lay, 0, g[i][j], &v[j]), "bytes of expert %u", g[i][j]);
        strata_provider_release(strata_store_provider(ex), 0, v, n[i]);
        struct strata_experts_layer_stats st;
        strata_provider_layer_stats(strata_store_provider(ex), 0, &st);
        CHECK(st.hits == want_hits[i] && st.misses == want_miss[i] && st.evictions == want_ev[i],
              "%s step %d: hits %llu misses %llu evictions %llu", strata_io_engine_name(io), i,
              (unsigned long long)st.hits, (unsigned long long)st.misses, (unsigned long long)st.evictions);
    }
    // Every slot of a layer at once (a chunk group at the limit), on the last layer.
    const uint32_t all[3] = {5, 6, 7};
    const uint32_t L = lay.n_layers - 1;
    CHECK(strata_provider_acquire(strata_store_provider(ex), L, all, 3, v) == 0, "acquire 3 of 3");
    for (int j = 0; j < 3; j++) CHECK(view_matches(f, &lay, L, all[j], &v[j]), "group bytes");
    strata_provider_release(strata_store_provider(ex), L, v, 3);
    const uint32_t four[4] = {0, 1, 2, 3};
    quiet(true);
    CHECK(strata_provider_acquire(strata_store_provider(ex), L, four, 4, v) == STRATA_EARG, "more than the slots is refused");
    quiet(false);
    strata_store_close(ex);

    // Below the minimum (2 slots per layer) the store refuses to open, naming the minimum.
    cfg.cache_bytes = lay.layers[0].slot_bytes * lay.n_layers;
    quiet(true);
    CHECK(strata_store_open(&ex, f, &lay, 2, &cfg) == STRATA_ENOMEM, "below minimum");
    quiet(false);
    strata_expert_layout_free(&lay);
    strata_gguf_close(f);
}

// Full residency preloads everything: all acquires hit and the bytes match.
static void test_full(const char *path)
{
    struct strata_gguf_file *f;
    struct strata_expert_layout lay;
    CHECK(strata_gguf_open(&f, path) == 0 && strata_expert_layout_init(&lay, f) == 0, "open");
    struct strata_store *ex;
    CHECK(strata_store_open(&ex, f, &lay, 2, NULL) == 0, "open full");
    struct strata_experts_stats st;
    strata_provider_stats(strata_store_provider(ex), &st);
    CHECK(st.full && st.slots_per_layer == lay.n_expert && st.preload_bytes > 0, "full");
    uint32_t ids[64];
    for (uint32_t e = 0; e < lay.n_expert; e++) ids[e] = e;
    struct strata_expert_view v[64];
    for (uint32_t l = 0; l < lay.n_layers; l++) {
        CHECK(strata_provider_acquire(strata_store_provider(ex), l, ids, (int)lay.n_expert, v) == 0, "acquire all");
        for (uint32_t e = 0; e < lay.n_expert; e++) CHECK(view_matches(f, &lay, l, e, &v[e]), "full bytes");
        strata_provider_release(strata_store_provider(ex), l, v, (int)lay.n_expert);
    }
    strata_provider_stats(strata_store_provider(ex), &st);
    CHECK(st.misses == 0 && st.hits == (uint64_t)lay.n_expert * lay.n_layers, "all hits");
    strata_store_close(ex);
    strata_expert_layout_free(&lay);
    strata_gguf_close(f);
}

// Injected faults: one failed attempt is retried; a lasting one fails the acquire cleanly, and the
// expert is not left cached (the next acquire without faults reads it again).
static void test_faults(const char *path, enum strata_io_engine io)
{
    struct strata_gguf_file *f;
    struct strata_expert_layout lay;
    CHECK(strata_gguf_open(&f, path) == 0 && strata_expert_layout_init(&lay, f) == 0, "open");
    struct strata_experts_config cfg = {.cache_bytes = 4 * lay.layers[0].slot_bytes * lay.n_layers, .io = io};
    struct strata_store *ex;
    struct strata_experts_stats st;
    struct strata_expert_view v[2];
    const uint32_t ids[2] = {3, 4};
    const char *kinds[2] = {"2:eio:1", "2:short:1"};
    for (int k = 0; k < 2; k++) {
        setenv("STRATA_IO_FAULT", kinds[k], 1);
        CHECK(strata_store_open(&ex, f, &lay, 2, &cfg) == 0, "open");
        CHECK(strata_provider_acquire(strata_store_provider(ex), 0, ids, 2, v) == 0, "%s: retried", kinds[k]);
        CHECK(view_matches(f, &lay, 0, 3, &v[0]) && view_matches(f, &lay, 0, 4, &v[1]), "%s: bytes", kinds[k]);
        strata_provider_release(strata_store_provider(ex), 0, v, 2);
        strata_provider_stats(strata_store_provider(ex), &st);
        CHECK(st.retries == 1, "%s: %s retries %llu", strata_io_engine_name(io), kinds[k],
              (unsigned long long)st.retries);
        strata_store_close(ex);
    }
    const char *lasting[2] = {"1:eio:1000000", "4:short:1000000"};
    for (int k = 0; k < 2; k++) {
        setenv("STRATA_IO_FAULT", lasting[k], 1);
        CHECK(strata_store_open(&ex, f, &lay, 2, &cfg) == 0, "open");
        quiet(true);
        int rc = strata_provider_acquire(strata_store_provider(ex), 0, ids, 2, v);
        CHECK(rc == STRATA_EIO, "%s: %s gives EIO, got %d", strata_io_engine_name(io), lasting[k], rc);
        CHECK(strstr(strata_last_error(), "failed after 3 tries") != NULL, "logged: %s", strata_last_error());
        rc = strata_provider_acquire(strata_store_provider(ex), 0, ids, 2, v);
        CHECK(rc == STRATA_EIO, "still failing");
        quiet(false);
        strata_provider_stats(strata_store_provider(ex), &st);
        CHECK(st.hits == 0, "nothing served from a failed read");
        strata_store_close(ex);
    }
    unsetenv("STRATA_IO_FAULT");
    strata_expert_layout_free(&lay);
    strata_gguf_close(f);
}

// Trace round trip, chunk markers, malformed input; the simulator's LRU equals the store's.
static void test_trace_and_sim(const char *path)
{
    char tpath[256];
    snprintf(tpath, sizeof tpath, "%s/t.trace", g_dir);
    struct strata_trace_writer *w;
    CHECK(strata_trace_open(&w, tpath, "my model", 2, 8, 2) == 0, "trace open");
    // token-major [n][layers][topk]
    const int32_t a[2 * 2] = {1, 2, 3, 4};
    const int32_t b[2 * 2 * 2] = {2, 3, 4, 5, 1, 4, 6, 7};
    const int32_t c[2 * 2] = {2, 6, 0, 7};
    CHECK(strata_trace_write(w, a, 1) == 0 && strata_trace_write(w, b, 2) == 0 && strata_trace_write(w, c, 1) == 0,
          "write");
    CHECK(strata_trace_close(w) == 0, "close");
    struct strata_trace t;
    CHECK(strata_trace_load(&t, tpath) == 0, "load");
    CHECK(t.n_tokens == 4 && t.n_layers == 2 && t.n_expert == 8 && t.topk == 2 && strcmp(t.model, "my_model") == 0,
          "header: %llu %s", (unsigned long long)t.n_tokens, t.model);
    CHECK(t.ids[0] == 1 && t.ids[3] == 4 && t.ids[4] == 2 && t.ids[15] == 7, "ids");
    CHECK(t.chunk[0] != t.chunk[1] && t.chunk[1] == t.chunk[2] && t.chunk[2] != t.chunk[3], "chunks");
    FILE *f = fopen(tpath, "r");
    char line[256];
    CHECK(fgets(line, sizeof line, f) && strncmp(line, "# model=my_model layers=2 experts=8 topk=2 tokens=4", 51) == 0,
          "header line: %s", line);
    CHECK(fgets(line, sizeof line, f) && strcmp(line, "1 2 | 3 4\n") == 0, "row format: %s", line);
    fclose(f);
    strata_trace_free(&t);

    const char *bad[] = {"1 2 | 3 4\n", "# model=x layers=2 experts=8 topk=2 tokens=1\n1 2 | 3\n",
                         "# model=x layers=2 experts=8 topk=2 tokens=1\n1 2 | 3 9\n",
                         "# model=x layers=2 experts=8 topk=9 tokens=1\n", "# model=x layers=2 experts=8 topk=2\n1 2 3 4\n"};
    quiet(true);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        f = fopen(tpath, "w");
        fputs(bad[i], f);
        fclose(f);
        CHECK(strata_trace_load(&t, tpath) == STRATA_EFORMAT, "malformed trace %zu rejected", i);
    }
    quiet(false);

    // A pseudo-random per-token trace replayed through the store and the simulator's LRU.
    struct strata_gguf_file *gf;
    struct strata_expert_layout lay;
    CHECK(strata_gguf_open(&gf, path) == 0 && strata_expert_layout_init(&lay, gf) == 0, "open");
    CHECK(strata_trace_open(&w, tpath, "rand", lay.n_layers, lay.n_expert, 2) == 0, "open");
    struct strata_experts_config cfg = {.cache_bytes = 5 * lay.layers[0].slot_bytes * lay.n_layers,
                                        .policy = STRATA_POLICY_LRU};
    struct strata_store *ex;
    CHECK(strata_store_open(&ex, gf, &lay, 2, &cfg) == 0, "store");
    uint64_t x = 88172645463325252ull;
    int32_t row[64 * 2];
    struct strata_expert_view v[2];
    for (int tok = 0; tok < 200; tok++) {
        for (uint32_t l = 0; l < lay.n_layers; l++) {
            uint32_t e[2];
            do {
                for (int k = 0; k < 2; k++) {
                    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                    // skewed: low ids more likely
                    e[k] = (uint32_t)((x % lay.n_expert) * (x % 1000) / 1000);
                }
            } while (e[0] == e[1]);
            row[l * 2] = (int32_t)e[0], row[l * 2 + 1] = (int32_t)e[1];
            const uint32_t s[2] = {e[0] < e[1] ? e[0] : e[1], e[0] < e[1] ? e[1] : e[0]};
            CHECK(strata_provider_acquire(strata_store_provider(ex), l, s, 2, v) == 0, "acquire");
            strata_provider_release(strata_store_provider(ex), l, v, 2);
        }
        strata_trace_write(w, row, 1);
    }
    CHECK(strata_trace_close(w) == 0, "close");
    struct strata_experts_stats st;
    strata_provider_stats(strata_store_provider(ex), &st);
    CHECK(strata_trace_load(&t, tpath) == 0, "load");
    struct strata_sim_result r[STRATA_SIM_COUNT];
    for (int p = 0; p < STRATA_SIM_COUNT; p++)
        CHECK(strata_sim_run(&t, (enum strata_sim_policy)p, 5, true, &r[p]) == 0, "sim");
    CHECK(r[STRATA_SIM_LRU].misses == st.misses && r[STRATA_SIM_LRU].hits == st.hits,
          "sim LRU %llu misses, store %llu", (unsigned long long)r[STRATA_SIM_LRU].misses,
          (unsigned long long)st.misses);
    for (int p = 0; p < STRATA_SIM_COUNT; p++)
        CHECK(r[STRATA_SIM_BELADY].misses <= r[p].misses, "Belady is the bound (%s %llu < %llu)",
              strata_sim_policy_name((enum strata_sim_policy)p), (unsigned long long)r[p].misses,
              (unsigned long long)r[STRATA_SIM_BELADY].misses);
    CHECK(r[STRATA_SIM_BELADY].misses < r[STRATA_SIM_LRU].misses, "Belady beats LRU here");
    for (int p = 0; p < STRATA_SIM_COUNT; p++)  // one-token passes only: decode's counts are all of them
        CHECK(r[p].decode_hits == r[p].hits && r[p].decode_misses == r[p].misses && r[p].decode_tokens == 200,
              "%s: decode counts %llu / %llu", strata_sim_policy_name((enum strata_sim_policy)p),
              (unsigned long long)r[p].decode_hits, (unsigned long long)r[p].decode_misses);
    strata_trace_free(&t);
    // A prompt chunk, then decode: the chunk's accesses are replayed (they fill the cache) but only
    // the one-token passes count as decode's (the engine's split_hit_rate).
    CHECK(strata_trace_open(&w, tpath, "chunk", 1, 8, 2) == 0, "open");
    const int32_t prompt[6] = {0, 1, 2, 3, 0, 1}, dec[10] = {0, 1, 2, 3, 0, 2, 1, 3, 4, 5};
    CHECK(strata_trace_write(w, prompt, 3) == 0 && strata_trace_write(w, dec, 1) == 0 &&
              strata_trace_write(w, dec + 2, 1) == 0 && strata_trace_write(w, dec + 4, 1) == 0 &&
              strata_trace_write(w, dec + 6, 1) == 0 && strata_trace_write(w, dec + 8, 1) == 0,
          "write");
    CHECK(strata_trace_close(w) == 0 && strata_trace_load(&t, tpath) == 0, "close, load");
    struct strata_sim_result cr;
    CHECK(strata_sim_run(&t, STRATA_SIM_LRU, 4, true, &cr) == 0, "sim");
    CHECK(cr.misses == 6 && cr.hits == 8 && cr.decode_misses == 2 && cr.decode_hits == 8 && cr.decode_tokens == 5 &&
              cr.tokens == 8,
          "chunk of 4 experts then 5 decode tokens at 4 slots: %llu / %llu misses / hits, decode %llu / %llu of %llu tokens",
          (unsigned long long)cr.misses, (unsigned long long)cr.hits, (unsigned long long)cr.decode_misses,
          (unsigned long long)cr.decode_hits, (unsigned long long)cr.decode_tokens);
    strata_trace_free(&t);
    strata_store_close(ex);
    strata_expert_layout_free(&lay);
    strata_gguf_close(gf);
}

// The disk curve: save / load round trip, interpolation in log2(size) at the nearest depth
// below, malformed files refused, and one real point measured on a file.
static void test_disk_curve(const char *model)
{
    struct strata_disk_curve c = {.n = 4};
    c.p[0] = (struct strata_disk_point){256 << 10, 1, 0.5, 0.5};
    c.p[1] = (struct strata_disk_point){1 << 20, 1, 1.0, 1.0};
    c.p[2] = (struct strata_disk_point){256 << 10, 4, 1.0, 1.0};
    c.p[3] = (struct strata_disk_point){1 << 20, 4, 2.0, 2.0};
    char path[256];
    snprintf(path, sizeof path, "%s/curve.tsv", g_dir);
    CHECK(strata_disk_curve_save(&c, path) == 0, "save");
    struct strata_disk_curve d;
    CHECK(strata_disk_curve_load(&d, path) == 0 && d.n == 4, "load");
    const double mid = strata_disk_curve_gbs(&d, 512 << 10, 4);
    CHECK(mid > 1.49 && mid < 1.51, "512 KiB at 4 in flight: %.3f (halfway in log2 size)", mid);
    CHECK(strata_disk_curve_gbs(&d, 512 << 10, 2) < 0.76, "depth 2 priced at depth 1");
    CHECK(strata_disk_curve_gbs(&d, 8 << 20, 8) == 2.0 && strata_disk_curve_gbs(&d, 4096, 1) == 0.5, "clamped");
    FILE *f = fopen(path, "w");
    fputs("# read_kib depth gbs ms\n256 0 1.0 1.0\n", f);
    fclose(f);
    quiet(true);
    CHECK(strata_disk_curve_load(&d, path) == STRATA_EFORMAT, "depth 0 refused");
    quiet(false);
    unlink(path);
    struct strata_disk_point pt;
    quiet(true);
    const int rc = strata_disk_point(model, 64 << 10, 2, 0.01, &pt);
    quiet(false);
    // (a file system without O_DIRECT, like tmpfs, refuses with EINVAL)
    CHECK((rc == 0 && pt.gbs > 0 && pt.ms > 0) || rc == -EINVAL, "one point measured: %d", rc);
}

// strata_route_stats on a hand-worked trace (1 layer, 8 experts, top-2, 8 tokens).
static void test_route_stats(void)
{
    int32_t ids[8 * 2] = {0, 1, 0, 2, 0, 1, 0, 3, 4, 5, 0, 1, 6, 7, 0, 1};
    struct strata_trace t = {.n_layers = 1, .n_expert = 8, .topk = 2, .n_tokens = 8, .ids = ids};
    struct strata_route_stats r;
    CHECK(strata_route_stats(&t, 4, &r) == 0, "route stats");
    // counts 6 4 1 1 1 1 1 1 of 16 picks: 90% (14.4) takes 7 experts; the top one 6/16
    CHECK(r.cover90 == 7 && r.top_share == 6.0 / 16, "cover %.1f top %.4f", r.cover90, r.top_share);
    // pairs sharing an expert with the token before: tokens 1, 2, 3 (one each) of 7 x 2
    CHECK(fabs(r.prev_overlap - 3.0 / 14) < 1e-12, "overlap %.4f", r.prev_overlap);
    // tokens {0,2,4,6}: {0,1,4,5,6,7} = 6; tokens {1,3,5,7}: {0,1,2,3} = 4
    CHECK(r.distinct == 5.0 && r.sessions == 4, "distinct %.2f", r.distinct);
    quiet(true);
    t.n_tokens = 7;
    CHECK(strata_route_stats(&t, 4, &r) == STRATA_EARG, "too short for 4 sessions");
    quiet(false);
}

// --route-skew: only the routers change, each row (an expert) by one factor, not all alike.
static void test_route_skew(void)
{
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/even.gguf", g_dir);
    snprintf(b, sizeof b, "%s/skew.gguf", g_dir);
    struct strata_synth_opts o = {.arch = "qwen3moe", .preset = "tiny", .out_path = a, .seed = 7, .type = -1,
                                  .n_layer = 2, .n_expert = 16};
    CHECK(strata_synth(&o) == 0, "synth");
    o.out_path = b;
    o.route_skew = 0.5f;
    CHECK(strata_synth(&o) == 0, "synth skewed");
    struct strata_gguf_file *fa = NULL, *fb = NULL;
    CHECK(strata_gguf_open(&fa, a) == 0 && strata_gguf_open(&fb, b) == 0, "open");
    if (!fa || !fb) {
        strata_gguf_close(fa);
        return;
    }
    float skew = 0;
    CHECK(strata_gguf_get_f32(fb, "strata.synth.route_skew", &skew) == 0 && skew == 0.5f, "the key says so");
    CHECK(fa->n_tensors == fb->n_tensors, "same tensors");
    int routers = 0;
    for (uint64_t i = 0; i < fa->n_tensors; i++) {
        const struct strata_gguf_tensor *ta = &fa->tensors[i], *tb = strata_gguf_find_tensor(fb, ta->name);
        CHECK(tb && tb->n_bytes == ta->n_bytes, "%s", ta->name);
        if (!tb) continue;
        char *x = malloc(ta->n_bytes), *y = malloc(tb->n_bytes);
        CHECK(strata_gguf_read_tensor(fa, ta, 0, x, ta->n_bytes) == 0 && strata_gguf_read_tensor(fb, tb, 0, y, tb->n_bytes) == 0,
              "read");
        if (!strstr(ta->name, "ffn_gate_inp.weight")) {
            CHECK(memcmp(x, y, ta->n_bytes) == 0, "%s unchanged", ta->name);
        } else {
            routers++;
            const uint64_t cols = ta->ne[0], rows = ta->ne[1];
            const float *u = (const float *)x, *v = (const float *)y;
            double lo = 1e30, hi = 0;
            for (uint64_t r = 0; r < rows; r++) {
                const double f = (double)v[r * cols] / (double)u[r * cols];
                for (uint64_t j = 1; j < cols; j++)
                    if (fabs((double)v[r * cols + j] - f * u[r * cols + j]) > 1e-6 * fabs((double)v[r * cols + j]) + 1e-30) {
                        CHECK(0, "%s row %llu is not one factor of the even row", ta->name, (unsigned long long)r);
                        break;
                    }
                lo = f < lo ? f : lo;
                hi = f > hi ? f : hi;
            }
            CHECK(lo > 0 && hi / lo > 1.5, "%s: factors %.3f..%.3f", ta->name, lo, hi);
        }
        free(x);
        free(y);
    }
    CHECK(routers == 2, "two routers, got %d", routers);
    strata_gguf_close(fa);
    strata_gguf_close(fb);
    unlink(a);
    unlink(b);
}

int main(void)
{
    if (!mkdtemp(g_dir)) return 1;
    char plain[256], mixed[256];
    snprintf(plain, sizeof plain, "%s/plain.gguf", g_dir);
    snprintf(mixed, sizeof mixed, "%s/mixed.gguf", g_dir);
    synth(plain, 3, 16, NULL);
    synth(mixed, 3, 32, "blk\\.1\\.ffn_.*_exps=Q4_K");
    test_plan(mixed);
    for (int io = 0; io < STRATA_IO_COUNT; io++)
        for (int th = 1; th <= 5; th += 4) {
            test_lru(plain, (enum strata_io_engine)io, th);
            test_lru(mixed, (enum strata_io_engine)io, th);
        }
    test_full(mixed);
    for (int io = 0; io < STRATA_IO_COUNT; io++) test_faults(plain, (enum strata_io_engine)io);
    test_trace_and_sim(plain);
    test_route_stats();
    test_route_skew();
    test_disk_curve(plain);
    unlink(plain);
    unlink(mixed);
    char tpath[256];
    snprintf(tpath, sizeof tpath, "%s/t.trace", g_dir);
    unlink(tpath);
    rmdir(g_dir);
    if (g_failures) {
        fprintf(stderr, "%d checks failed\n", g_failures);
        return 1;
    }
    printf("test_experts: all checks passed\n");
    return 0;
}
