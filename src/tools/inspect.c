// strata inspect: a GGUF's metadata (long arrays abbreviated), its tensor table and the totals
// this project cares about: dense bytes, routed-expert bytes, one expert triplet per layer, and
// the full-residency size with 4 KiB-aligned expert slots.
#include "tools/inspect.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "experts/layout.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "util/log.h"

#define ARRAY_SHOWN 8  // elements of an array shown before "..."

static double mib(uint64_t b) { return (double)b / 1048576.0; }

static void print_scalar(FILE *out, enum strata_gguf_type type, const void *p)
{
    switch (type) {
    case GGUF_TYPE_UINT8: fprintf(out, "%u", *(const uint8_t *)p); break;
    case GGUF_TYPE_INT8: fprintf(out, "%d", *(const int8_t *)p); break;
    case GGUF_TYPE_UINT16: fprintf(out, "%u", *(const uint16_t *)p); break;
    case GGUF_TYPE_INT16: fprintf(out, "%d", *(const int16_t *)p); break;
    case GGUF_TYPE_UINT32: fprintf(out, "%u", *(const uint32_t *)p); break;
    case GGUF_TYPE_INT32: fprintf(out, "%d", *(const int32_t *)p); break;
    case GGUF_TYPE_FLOAT32: fprintf(out, "%g", *(const float *)p); break;
    case GGUF_TYPE_BOOL: fprintf(out, "%s", *(const bool *)p ? "true" : "false"); break;
    case GGUF_TYPE_UINT64: fprintf(out, "%" PRIu64, *(const uint64_t *)p); break;
    case GGUF_TYPE_INT64: fprintf(out, "%" PRId64, *(const int64_t *)p); break;
    case GGUF_TYPE_FLOAT64: fprintf(out, "%g", *(const double *)p); break;
    default: fprintf(out, "?"); break;
    }
}

static size_t scalar_size(enum strata_gguf_type t)
{
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

// Strings are printed quoted, control characters escaped, cut at 80 bytes.
static void print_str(FILE *out, const struct strata_gguf_str *s)
{
    fputc('"', out);
    for (uint64_t i = 0; i < s->len && i < 80; i++) {
        unsigned char c = (unsigned char)s->s[i];
        if (c == '\n') fputs("\\n", out);
        else if (c == '"' || c == '\\') fprintf(out, "\\%c", c);
        else if (c < 0x20) fprintf(out, "\\x%02x", c);
        else fputc(c, out);
    }
    fputs(s->len > 80 ? "\"..." : "\"", out);
}

static void print_value(FILE *out, const struct strata_gguf_value *v, int depth)
{
    if (v->type == GGUF_TYPE_STRING) {
        print_str(out, &v->str);
        return;
    }
    if (v->type != GGUF_TYPE_ARRAY) {
        print_scalar(out, v->type, &v->u8);
        return;
    }
    fprintf(out, "[%s x %" PRIu64 "] [", strata_gguf_type_name(v->arr.type), v->arr.n);
    for (uint64_t i = 0; i < v->arr.n && i < ARRAY_SHOWN; i++) {
        if (i) fputs(", ", out);
        if (v->arr.type == GGUF_TYPE_STRING)
            print_str(out, &((const struct strata_gguf_str *)v->arr.items)[i]);
        else if (v->arr.type == GGUF_TYPE_ARRAY)
            print_value(out, &((const struct strata_gguf_value *)v->arr.items)[i], depth + 1);
        else
            print_scalar(out, v->arr.type, (const char *)v->arr.items + i * scalar_size(v->arr.type));
    }
    fputs(v->arr.n > ARRAY_SHOWN ? ", ...]" : "]", out);
}

static cJSON *json_scalar(enum strata_gguf_type type, const void *p)
{
    switch (type) {
    case GGUF_TYPE_UINT8: return cJSON_CreateNumber(*(const uint8_t *)p);
    case GGUF_TYPE_INT8: return cJSON_CreateNumber(*(const int8_t *)p);
    case GGUF_TYPE_UINT16: return cJSON_CreateNumber(*(const uint16_t *)p);
    case GGUF_TYPE_INT16: return cJSON_CreateNumber(*(const int16_t *)p);
    case GGUF_TYPE_UINT32: return cJSON_CreateNumber(*(const uint32_t *)p);
    case GGUF_TYPE_INT32: return cJSON_CreateNumber(*(const int32_t *)p);
    case GGUF_TYPE_FLOAT32: return cJSON_CreateNumber(*(const float *)p);
    case GGUF_TYPE_BOOL: return cJSON_CreateBool(*(const bool *)p);
    case GGUF_TYPE_UINT64: return cJSON_CreateNumber((double)*(const uint64_t *)p);
    case GGUF_TYPE_INT64: return cJSON_CreateNumber((double)*(const int64_t *)p);
    case GGUF_TYPE_FLOAT64: return cJSON_CreateNumber(*(const double *)p);
    default: return cJSON_CreateNull();
    }
}

// Arrays: {"type":..., "n":..., "head":[first elements]}.
static cJSON *json_value(const struct strata_gguf_value *v)
{
    if (v->type == GGUF_TYPE_STRING) return cJSON_CreateString(v->str.s);
    if (v->type != GGUF_TYPE_ARRAY) return json_scalar(v->type, &v->u8);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", strata_gguf_type_name(v->arr.type));
    cJSON_AddNumberToObject(o, "n", (double)v->arr.n);
    cJSON *head = cJSON_AddArrayToObject(o, "head");
    for (uint64_t i = 0; i < v->arr.n && i < ARRAY_SHOWN; i++) {
        cJSON *item;
        if (v->arr.type == GGUF_TYPE_STRING)
            item = cJSON_CreateString(((const struct strata_gguf_str *)v->arr.items)[i].s);
        else if (v->arr.type == GGUF_TYPE_ARRAY)
            item = json_value(&((const struct strata_gguf_value *)v->arr.items)[i]);
        else
            item = json_scalar(v->arr.type, (const char *)v->arr.items + i * scalar_size(v->arr.type));
        cJSON_AddItemToArray(head, item);
    }
    return o;
}

static void shape_str(const struct strata_gguf_tensor *t, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    for (uint32_t d = 0; d < t->n_dims && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, d ? " x %" PRIu64 : "%" PRIu64, t->ne[d]);
}

static int inspect_json(const struct strata_gguf_file *f, const struct strata_expert_layout *lay, FILE *out)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "path", f->path);
    cJSON_AddNumberToObject(root, "version", f->version);
    cJSON_AddNumberToObject(root, "file_bytes", (double)f->file_size);
    cJSON_AddNumberToObject(root, "alignment", (double)f->alignment);
    cJSON_AddNumberToObject(root, "data_offset", (double)f->data_offset);
    cJSON *md = cJSON_AddObjectToObject(root, "metadata");
    for (uint64_t i = 0; i < f->n_kv; i++) cJSON_AddItemToObject(md, f->kv[i].key.s, json_value(&f->kv[i].value));
    cJSON *ts = cJSON_AddArrayToObject(root, "tensors");
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct strata_gguf_tensor *t = &f->tensors[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", t->name);
        cJSON_AddStringToObject(o, "type", strata_type_name(t->type));
        cJSON *shape = cJSON_AddArrayToObject(o, "shape");
        for (uint32_t d = 0; d < t->n_dims; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->ne[d]));
        cJSON_AddNumberToObject(o, "offset", (double)t->file_offset);
        cJSON_AddNumberToObject(o, "bytes", (double)t->n_bytes);
        cJSON_AddItemToArray(ts, o);
    }
    cJSON *tot = cJSON_AddObjectToObject(root, "totals");
    cJSON_AddNumberToObject(tot, "tensor_bytes",
                            (double)(lay->total_bytes + lay->unused_expert_bytes + lay->unused_dense_bytes));
    cJSON_AddNumberToObject(tot, "unused_expert_bytes", (double)lay->unused_expert_bytes);
    cJSON_AddNumberToObject(tot, "unused_dense_bytes", (double)lay->unused_dense_bytes);
    cJSON_AddNumberToObject(tot, "dense_bytes", (double)lay->dense_bytes);
    cJSON_AddNumberToObject(tot, "expert_bytes", (double)lay->expert_bytes);
    cJSON_AddNumberToObject(tot, "n_expert", lay->n_expert);
    cJSON_AddNumberToObject(tot, "moe_layers", lay->n_layers);
    cJSON_AddNumberToObject(tot, "full_residency_bytes", (double)lay->full_residency_bytes);
    cJSON *cls = cJSON_AddArrayToObject(tot, "slot_classes");
    for (uint32_t c = 0; c < lay->n_classes; c++) cJSON_AddItemToArray(cls, cJSON_CreateNumber((double)lay->class_bytes[c]));
    cJSON *ls = cJSON_AddArrayToObject(tot, "expert_triplets");
    for (uint32_t l = 0; l < lay->n_layers; l++) {
        const struct strata_expert_layer *el = &lay->layers[l];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "layer", el->layer);
        cJSON_AddNumberToObject(o, "triplet_bytes", (double)el->triplet_bytes);
        cJSON_AddNumberToObject(o, "slot_bytes", (double)el->slot_bytes);
        char types[64];
        snprintf(types, sizeof types, "%s/%s/%s", strata_type_name(el->tensor[0]->type),
                 strata_type_name(el->tensor[1]->type), strata_type_name(el->tensor[2]->type));
        cJSON_AddStringToObject(o, "types", types);
        cJSON_AddItemToArray(ls, o);
    }
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    if (!s) return STRATA_ENOMEM;
    fprintf(out, "%s\n", s);
    free(s);
    return 0;
}

static void inspect_text(const struct strata_gguf_file *f, const struct strata_expert_layout *lay, FILE *out)
{
    fprintf(out, "%s: GGUF v%u, %.1f MiB, %" PRIu64 " metadata keys, %" PRIu64 " tensors, alignment %" PRIu64 "\n\n",
            f->path, f->version, mib(f->file_size), f->n_kv, f->n_tensors, f->alignment);
    fprintf(out, "metadata:\n");
    for (uint64_t i = 0; i < f->n_kv; i++) {
        fprintf(out, "  %-44s %-8s ", f->kv[i].key.s, strata_gguf_type_name(f->kv[i].value.type));
        print_value(out, &f->kv[i].value, 0);
        fputc('\n', out);
    }
    fprintf(out, "\ntensors:\n  %-36s %-8s %-24s %14s %12s\n", "name", "type", "shape", "offset", "bytes");
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct strata_gguf_tensor *t = &f->tensors[i];
        char shape[96];
        shape_str(t, shape, sizeof shape);
        fprintf(out, "  %-36s %-8s %-24s %14" PRIu64 " %12" PRIu64 "\n", t->name, strata_type_name(t->type),
                shape, t->file_offset, t->n_bytes);
    }
    fprintf(out, "\ntotals:\n");
    fprintf(out, "  tensor bytes          %12.1f MiB\n",
            mib(lay->total_bytes + lay->unused_expert_bytes + lay->unused_dense_bytes));
    if (lay->unused_expert_bytes || lay->unused_dense_bytes)
        fprintf(out, "  nextn blocks          %12.1f MiB  (never run: experts %.1f, the rest %.1f; not below)\n",
                mib(lay->unused_expert_bytes + lay->unused_dense_bytes), mib(lay->unused_expert_bytes),
                mib(lay->unused_dense_bytes));
    fprintf(out, "  dense (resident)      %12.1f MiB  (%.1f%%)\n", mib(lay->dense_bytes),
            lay->total_bytes ? 100.0 * lay->dense_bytes / lay->total_bytes : 0.0);
    fprintf(out, "  routed experts        %12.1f MiB  (%.1f%%), %u MoE layers x %u experts\n",
            mib(lay->expert_bytes), lay->total_bytes ? 100.0 * lay->expert_bytes / lay->total_bytes : 0.0,
            lay->n_layers, lay->n_expert);
    fprintf(out, "  full residency        %12.1f MiB  (experts in 4 KiB-aligned slots)\n",
            mib(lay->full_residency_bytes));
    fprintf(out, "  slot size classes     ");
    for (uint32_t c = 0; c < lay->n_classes; c++) fprintf(out, "%s%.1f KiB", c ? ", " : "", lay->class_bytes[c] / 1024.0);
    fprintf(out, "%s\n", lay->n_classes ? "" : "none");
    if (lay->n_layers) {
        fprintf(out, "  expert triplet per layer (gate+up+down of one expert):\n");
        for (uint32_t l = 0; l < lay->n_layers; l++) {
            const struct strata_expert_layer *el = &lay->layers[l];
            // Consecutive layers with the same triplet are folded into one line.
            uint32_t e = l;
            while (e + 1 < lay->n_layers && lay->layers[e + 1].triplet_bytes == el->triplet_bytes &&
                   lay->layers[e + 1].tensor[0]->type == el->tensor[0]->type &&
                   lay->layers[e + 1].tensor[2]->type == el->tensor[2]->type)
                e++;
            char range[32];
            if (e == l) snprintf(range, sizeof range, "%d", el->layer);
            else snprintf(range, sizeof range, "%d-%d", el->layer, lay->layers[e].layer);
            fprintf(out, "    layers %-9s %10.1f KiB  (%s/%s/%s)\n", range, el->triplet_bytes / 1024.0,
                    strata_type_name(el->tensor[0]->type), strata_type_name(el->tensor[1]->type),
                    strata_type_name(el->tensor[2]->type));
            l = e;
        }
    }
}

int strata_inspect(const char *path, bool json, FILE *out)
{
    struct strata_gguf_file *f = NULL;
    int rc = strata_gguf_open(&f, path);
    if (rc) return rc;
    struct strata_expert_layout lay;
    rc = strata_expert_layout_init(&lay, f);
    if (rc == 0) {
        if (json) rc = inspect_json(f, &lay, out);
        else inspect_text(f, &lay, out);
        strata_expert_layout_free(&lay);
    }
    strata_gguf_close(f);
    return rc;
}
