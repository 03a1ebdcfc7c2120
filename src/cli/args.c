// Argument parsing helpers of the CLI: numbers with range checks, token-id lists.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"

int cli_parse_int(const char *s, const char *name, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "strata: %s: '%s' is not a whole number in [%ld, %ld]\n", name, s, lo, hi);
        return 1;
    }
    *out = (int)v;
    return 0;
}

int cli_parse_u64(const char *s, const char *name, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || *s == '-') {
        fprintf(stderr, "strata: %s: '%s' is not a non-negative whole number\n", name, s);
        return 1;
    }
    *out = v;
    return 0;
}

int cli_parse_float(const char *s, const char *name, double lo, double hi, float *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "strata: %s: '%s' is not a number in [%g, %g]\n", name, s, lo, hi);
        return 1;
    }
    *out = (float)v;
    return 0;
}

int cli_parse_ids(const char *s, const char *name, int32_t **out, int *n)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++) cap += *p == ',';
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) return 1;
    int count = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
            fprintf(stderr, "strata: %s: '%s' is not a comma-separated list of token ids\n", name, s);
            free(ids);
            return 1;
        }
        ids[count++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    if (count == 0) {
        fprintf(stderr, "strata: %s: no token ids given\n", name);
        free(ids);
        return 1;
    }
    *out = ids;
    *n = count;
    return 0;
}
