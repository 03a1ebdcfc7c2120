// Argument parsing helpers of the CLI: numbers with range checks, token-id lists.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

// The contents of FILE for "@FILE" (trailing whitespace cut), NULL with one line on failure.
static char *read_id_file(const char *path, const char *name)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long len = -1;
    if (f && fseek(f, 0, SEEK_END) == 0) len = ftell(f);
    if (f && len >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)len + 1)) &&
        fread(buf, 1, (size_t)len, f) == (size_t)len) {
        while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' ')) len--;
        buf[len] = 0;
        fclose(f);
        return buf;
    }
    fprintf(stderr, "strata: %s: cannot read '%s'\n", name, path);
    free(buf);
    if (f) fclose(f);
    return NULL;
}

static int parse_id_list(const char *s, const char *name, int32_t **out, int *n)
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

// "A;B;C": token id lists of several sequences (or @FILE holding them), concatenated in *out
// with each one's length in *lens.
int cli_parse_id_seqs(const char *s, const char *name, int32_t **out, int *n, int **lens, int *n_seqs)
{
    char *text = s[0] == '@' ? read_id_file(s + 1, name) : strdup(s);
    if (!text) return 1;
    int cap = 1;
    for (const char *p = text; *p; p++) cap += *p == ';';
    int32_t *all = NULL;
    int *len = malloc((size_t)cap * sizeof *len), total = 0, count = 0, rc = len ? 0 : 1;
    for (char *part = text, *next; rc == 0 && part; part = next) {
        next = strchr(part, ';');
        if (next) *next++ = 0;
        int32_t *ids;
        int m;
        if (parse_id_list(part, name, &ids, &m)) {
            rc = 1;
            break;
        }
        int32_t *grown = realloc(all, (size_t)(total + m) * sizeof *all);
        if (!grown) {
            free(ids);
            rc = 1;
            break;
        }
        all = grown;
        memcpy(all + total, ids, (size_t)m * sizeof *ids);
        free(ids);
        total += m;
        len[count++] = m;
    }
    free(text);
    if (rc) {
        free(all);
        free(len);
        return 1;
    }
    *out = all;
    *n = total;
    *lens = len;
    *n_seqs = count;
    return 0;
}

int cli_parse_ids(const char *s, const char *name, int32_t **out, int *n)
{
    if (s[0] != '@') return parse_id_list(s, name, out, n);
    // a file of ids: lists longer than one command-line argument may be
    char *text = read_id_file(s + 1, name);
    if (!text) return 1;
    int rc = parse_id_list(text, name, out, n);
    free(text);
    return rc;
}
