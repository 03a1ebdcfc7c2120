// libFuzzer harness: the CLI's argument parsers (numbers with ranges, token-id lists, sequences
// of them, the engine options of run/eval/serve). The first byte picks the parser, the rest is
// the argument. "@FILE" arguments are skipped (they name files to read).
#include <fcntl.h>

#include "fuzz_util.h"

#include "cli/cli.h"

static int g_null = -1, g_stderr = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fz_quiet();
    g_null = open("/dev/null", O_WRONLY);
    g_stderr = dup(2);
    return 0;
}

static const int STORE_OPTS[] = {
    CLI_OPT_CACHE_MIB, CLI_OPT_CACHE_CLASSES, CLI_OPT_IO,       CLI_OPT_IO_THREADS,
    CLI_OPT_STATS_LAYERS, CLI_OPT_TRACE_OUT, CLI_OPT_CACHE_POLICY, CLI_OPT_BACKEND,
    CLI_OPT_GPU,       CLI_OPT_PREFETCH,     CLI_OPT_PREFETCH_K, CLI_OPT_MEM_MIB, 0,
};
#define N_STORE (sizeof STORE_OPTS / sizeof STORE_OPTS[0])

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    char *s = fz_str(data + 1, size - 1);
    if (s[0] == '@') {
        free(s);
        return 0;
    }
    fflush(stderr);
    dup2(g_null, 2);  // the parsers print one line per bad argument
    int which = data[0] % (5 + N_STORE);
    int v;
    uint64_t u;
    float x;
    int32_t *ids = NULL;
    int n = 0, *lens = NULL, n_seqs = 0;
    switch (which) {
    case 0:
        if (cli_parse_int(s, "--n", -5, 1000, &v) == 0 && (v < -5 || v > 1000)) abort();
        break;
    case 1: (void)cli_parse_u64(s, "--u", &u); break;
    case 2:
        if (cli_parse_float(s, "--f", 0.0, 2.0, &x) == 0 && !(x >= 0.0f && x <= 2.0f)) abort();
        break;
    case 3:
        if (cli_parse_ids(s, "--ids", &ids, &n) == 0) {
            if (n < 1) abort();
            for (int i = 0; i < n; i++) {
                if (ids[i] < 0) abort();
            }
            free(ids);
        }
        break;
    case 4:
        if (cli_parse_id_seqs(s, "--seqs", &ids, &n, &lens, &n_seqs) == 0) {
            int total = 0;
            for (int i = 0; i < n_seqs; i++) total += lens[i];
            if (total != n || n_seqs < 1) abort();
            for (int i = 0; i < n; i++) {
                if (ids[i] < 0) abort();
            }
            free(ids);
            free(lens);
        }
        break;
    default: {
        struct strata_engine_params p = strata_engine_default_params();
        struct cli_report_opts r = {false, NULL};
        (void)cli_parse_store_opt(STORE_OPTS[which - 5], s, &p, &r);
        break;
    }
    }
    fflush(stderr);
    dup2(g_stderr, 2);
    free(s);
    return 0;
}
