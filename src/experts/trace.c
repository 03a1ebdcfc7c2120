// Route trace writer and reader (format in trace.h).
#include "experts/trace.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

#define TOKENS_WIDTH 20

struct strata_trace_writer {
    FILE *f;
    char *path;
    long tokens_pos;     // file offset of the tokens= value
    uint64_t n_tokens;
    uint32_t n_layers, topk;
    int err;             // first write error (errno)
};

int strata_trace_open(struct strata_trace_writer **out, const char *path, const char *model,
                      uint32_t n_layers, uint32_t n_expert, uint32_t topk)
{
    *out = NULL;
    struct strata_trace_writer *w = calloc(1, sizeof *w);
    if (!w) return STRATA_ENOMEM;
    w->f = fopen(path, "w");
    w->path = strdup(path);
    if (!w->f || !w->path) {
        strata_log_error("trace_open: cannot write '%s': %s", path, strerror(errno));
        if (w->f) fclose(w->f);
        free(w->path);
        free(w);
        return STRATA_EIO;
    }
    // Names go in a key=value field: no spaces.
    char name[128];
    snprintf(name, sizeof name, "%s", model && *model ? model : "unknown");
    for (char *p = name; *p; p++)
        if (isspace((unsigned char)*p) || *p == '|') *p = '_';
    fprintf(w->f, "# model=%s layers=%u experts=%u topk=%u tokens=", name, n_layers, n_expert, topk);
    w->tokens_pos = ftell(w->f);
    fprintf(w->f, "%-*s\n", TOKENS_WIDTH, "0");
    w->n_layers = n_layers;
    w->topk = topk;
    *out = w;
    return 0;
}

int strata_trace_write(struct strata_trace_writer *w, const int32_t *ids, int n)
{
    if (n > 1) fprintf(w->f, "# chunk tokens=%d\n", n);
    for (int t = 0; t < n; t++) {
        for (uint32_t l = 0; l < w->n_layers; l++) {
            if (l) fputs(" | ", w->f);
            const int32_t *g = ids + ((size_t)t * w->n_layers + l) * w->topk;
            for (uint32_t k = 0; k < w->topk; k++) fprintf(w->f, k ? " %d" : "%d", g[k]);
        }
        fputc('\n', w->f);
    }
    w->n_tokens += (uint64_t)n;
    if (ferror(w->f) && !w->err) w->err = errno ? errno : EIO;
    return w->err ? STRATA_EIO : 0;
}

int strata_trace_close(struct strata_trace_writer *w)
{
    if (!w) return 0;
    int err = w->err;
    if (!err && fseek(w->f, w->tokens_pos, SEEK_SET) == 0) {
        char num[32];
        snprintf(num, sizeof num, "%llu", (unsigned long long)w->n_tokens);
        fprintf(w->f, "%-*s", TOKENS_WIDTH, num);
    }
    if (ferror(w->f) && !err) err = errno ? errno : EIO;
    if (fclose(w->f) != 0 && !err) err = errno ? errno : EIO;
    if (err) strata_log_error("trace_close: writing '%s' failed: %s", w->path, strerror(err));
    free(w->path);
    free(w);
    return err ? STRATA_EIO : 0;
}

// ---- reader ------------------------------------------------------------------------------------

static int header_u32(const char *line, const char *key, uint32_t *out)
{
    const char *p = strstr(line, key);
    if (!p) return -1;
    char *end;
    errno = 0;
    unsigned long v = strtoul(p + strlen(key), &end, 10);
    if (errno || end == p + strlen(key) || v > 1u << 20) return -1;
    *out = (uint32_t)v;
    return 0;
}

void strata_trace_free(struct strata_trace *t)
{
    free(t->ids);
    free(t->chunk);
    memset(t, 0, sizeof *t);
}

int strata_trace_load(struct strata_trace *t, const char *path)
{
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "r");
    if (!f) {
        strata_log_error("trace_load: cannot read '%s': %s", path, strerror(errno));
        return STRATA_EIO;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    uint64_t lineno = 0, cap_tok = 0;
    uint32_t chunk = 0, chunk_left = 0;
    int rc = 0;
    bool have_header = false;
    while (rc == 0 && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (line[0] == '#') {
            uint32_t n;
            if (!have_header && strstr(line, "layers=")) {
                if (header_u32(line, " layers=", &t->n_layers) || header_u32(line, " experts=", &t->n_expert) ||
                    header_u32(line, " topk=", &t->topk) || t->n_layers == 0 || t->n_expert == 0 ||
                    t->topk == 0 || t->topk > t->n_expert) {
                    strata_log_error("trace_load: %s:%llu: header needs layers=, experts=, topk= (topk <= experts)",
                                     path, (unsigned long long)lineno);
                    rc = STRATA_EFORMAT;
                    break;
                }
                const char *m = strstr(line, "model=");
                if (m) sscanf(m + 6, "%127s", t->model);
                have_header = true;
            } else if (header_u32(line, "# chunk tokens=", &n) == 0 && n > 0) {
                chunk++;
                chunk_left = n;
            }
            continue;
        }
        if (len <= 1) continue;
        if (!have_header) {
            strata_log_error("trace_load: %s:%llu: token line before the header", path, (unsigned long long)lineno);
            rc = STRATA_EFORMAT;
            break;
        }
        if (t->n_tokens == cap_tok) {
            cap_tok = cap_tok ? cap_tok * 2 : 1024;
            const size_t row = (size_t)t->n_layers * t->topk;
            int32_t *ids = realloc(t->ids, cap_tok * row * sizeof *ids);
            uint32_t *ch = ids ? realloc(t->chunk, cap_tok * sizeof *ch) : NULL;
            if (ids) t->ids = ids;
            if (ch) t->chunk = ch;
            if (!ids || !ch) {
                rc = STRATA_ENOMEM;
                break;
            }
        }
        int32_t *row = t->ids + t->n_tokens * t->n_layers * t->topk;
        const char *p = line;
        for (uint32_t l = 0; l < t->n_layers && rc == 0; l++) {
            if (l) {
                while (*p == ' ' || *p == '\t') p++;
                if (*p != '|') rc = STRATA_EFORMAT;
                p++;
            }
            for (uint32_t k = 0; k < t->topk && rc == 0; k++) {
                char *end;
                errno = 0;
                long v = strtol(p, &end, 10);
                if (errno || end == p || v < 0 || (uint64_t)v >= t->n_expert) rc = STRATA_EFORMAT;
                row[(size_t)l * t->topk + k] = (int32_t)v;
                p = end;
            }
        }
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
        if (rc == 0 && *p) rc = STRATA_EFORMAT;
        if (rc) {
            strata_log_error("trace_load: %s:%llu: expected %u groups of %u expert ids < %u separated by ' | '",
                             path, (unsigned long long)lineno, t->n_layers, t->topk, t->n_expert);
            break;
        }
        if (chunk_left == 0) chunk++;
        else chunk_left--;
        t->chunk[t->n_tokens++] = chunk;
    }
    free(line);
    fclose(f);
    if (rc == 0 && !have_header) {
        strata_log_error("trace_load: %s: no '# model=... layers=... experts=... topk=...' header", path);
        rc = STRATA_EFORMAT;
    }
    if (rc) strata_trace_free(t);
    return rc;
}

static int cmp_rank(const void *a, const void *b, void *count_)
{
    const uint64_t *count = count_;
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (count[x] != count[y]) return count[x] > count[y] ? -1 : 1;
    return (x > y) - (x < y);
}

int strata_trace_rank(const struct strata_trace *t, uint32_t l, uint32_t *order)
{
    if (l >= t->n_layers) {
        strata_log_error("trace_rank: layer %u of a trace of %u layers", l, t->n_layers);
        return STRATA_EARG;
    }
    const uint32_t X = t->n_expert, K = t->topk;
    uint64_t *count = calloc(X, sizeof *count);
    if (!count) return STRATA_ENOMEM;
    for (uint64_t tok = 0; tok < t->n_tokens; tok++)
        for (uint32_t k = 0; k < K; k++) count[t->ids[(tok * t->n_layers + l) * K + k]]++;
    for (uint32_t e = 0; e < X; e++) order[e] = e;
    qsort_r(order, X, sizeof *order, cmp_rank, count);
    free(count);
    return 0;
}
