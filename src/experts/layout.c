// Expert layout of a GGUF: stacked per-layer expert tensors and the byte totals.
#include "experts/layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "experts/io.h"
#include "gguf/gguf.h"
#include "util/log.h"

static const char *const g_part_names[STRATA_EXPERT_PART_COUNT] = {"ffn_gate_exps", "ffn_up_exps",
                                                                   "ffn_down_exps"};

// "blk.<L>.<part>.weight" -> L and part, else -1.
static int parse_expert_name(const char *name, int *layer)
{
    if (strncmp(name, "blk.", 4) != 0) return -1;
    char *end;
    long l = strtol(name + 4, &end, 10);
    if (end == name + 4 || *end != '.' || l < 0 || l > 1000000) return -1;
    for (int p = 0; p < STRATA_EXPERT_PART_COUNT; p++) {
        size_t n = strlen(g_part_names[p]);
        if (strncmp(end + 1, g_part_names[p], n) == 0 && strcmp(end + 1 + n, ".weight") == 0) {
            *layer = (int)l;
            return p;
        }
    }
    return -1;
}

static void count_classes(struct strata_expert_layout *lay);

void strata_expert_part_offsets(const struct strata_expert_layer *el, uint32_t e,
                                uint64_t off[STRATA_EXPERT_PART_COUNT])
{
    const uint64_t page = STRATA_IO_PAGE;
    uint64_t region = 0;  // start of the current part's pages (paged), or its offset (packed)
    for (int p = 0; p < STRATA_EXPERT_PART_COUNT; p++) {
        if (!el->paged) {
            off[p] = region;
            region += el->part_bytes[p];
            continue;
        }
        const uint64_t file_off = el->tensor[p]->file_offset + (uint64_t)e * el->part_bytes[p];
        off[p] = region + (file_off & (page - 1));
        region = (off[p] + el->part_bytes[p] + page - 1) & ~(page - 1);
    }
}

// Whole-page parts have one phase for every expert, so expert 0 prices the slot.
static uint64_t layer_slot_bytes(const struct strata_expert_layer *el)
{
    uint64_t off[STRATA_EXPERT_PART_COUNT];
    strata_expert_part_offsets(el, 0, off);
    const uint64_t end = off[STRATA_EXPERT_PART_COUNT - 1] + el->part_bytes[STRATA_EXPERT_PART_COUNT - 1];
    return (end + STRATA_IO_PAGE - 1) & ~(uint64_t)(STRATA_IO_PAGE - 1);
}

void strata_expert_layout_free(struct strata_expert_layout *lay)
{
    free(lay->layers);
    memset(lay, 0, sizeof *lay);
}

int strata_expert_layout_init(struct strata_expert_layout *lay, const struct strata_gguf_file *f)
{
    memset(lay, 0, sizeof *lay);
    int max_layer = -1;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        int l;
        lay->total_bytes += f->tensors[i].n_bytes;
        if (parse_expert_name(f->tensors[i].name, &l) >= 0 && l > max_layer) max_layer = l;
    }
    if (max_layer < 0) {
        lay->dense_bytes = lay->total_bytes;
        lay->full_residency_bytes = lay->total_bytes;
        return 0;
    }
    struct strata_expert_layer *by_block = calloc((size_t)max_layer + 1, sizeof *by_block);
    if (!by_block) return STRATA_ENOMEM;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        int l, p = parse_expert_name(f->tensors[i].name, &l);
        if (p < 0) continue;
        by_block[l].layer = l;
        by_block[l].tensor[p] = &f->tensors[i];
    }
    int rc = 0;
    uint32_t n = 0;
    for (int l = 0; l <= max_layer && rc == 0; l++) {
        struct strata_expert_layer *el = &by_block[l];
        int present = 0;
        for (int p = 0; p < STRATA_EXPERT_PART_COUNT; p++) present += el->tensor[p] != NULL;
        if (present == 0) continue;
        if (present != STRATA_EXPERT_PART_COUNT) {
            strata_log_error("expert_layout: %s: layer %d has only %d of the gate/up/down expert tensors",
                             f->path, l, present);
            rc = STRATA_EFORMAT;
            break;
        }
        for (int p = 0; p < STRATA_EXPERT_PART_COUNT; p++) {
            const struct strata_gguf_tensor *t = el->tensor[p];
            uint64_t x = t->n_dims == 3 ? t->ne[2] : 0;
            if (x == 0 || x > 65536 || (lay->n_expert && x != lay->n_expert)) {
                strata_log_error("expert_layout: %s: tensor '%s' has %llu experts, expected %u",
                                 f->path, t->name, (unsigned long long)x, lay->n_expert);
                rc = STRATA_EFORMAT;
                break;
            }
            lay->n_expert = (uint32_t)x;
            el->part_bytes[p] = t->n_bytes / x;
            el->triplet_bytes += el->part_bytes[p];
            lay->expert_bytes += t->n_bytes;
        }
        el->paged = true;
        for (int p = 0; p < STRATA_EXPERT_PART_COUNT; p++) el->paged &= el->part_bytes[p] % STRATA_IO_PAGE == 0;
        el->slot_bytes = layer_slot_bytes(el);
        by_block[n++] = *el;
    }
    if (rc) {
        free(by_block);
        memset(lay, 0, sizeof *lay);
        return rc;
    }
    lay->layers = by_block;
    lay->n_layers = n;
    count_classes(lay);
    // The nextn (multi-token prediction) blocks that follow the trunk in block_count are never
    // run: their experts take no slots (glm4moe, glm-dsa, deepseek32 files carry one).
    const char *arch;
    uint32_t blocks, nextn;
    char key[96];
    if (strata_gguf_get_str(f, "general.architecture", &arch) == 0 &&
        snprintf(key, sizeof key, "%s.nextn_predict_layers", arch) < (int)sizeof key &&
        strata_gguf_get_u32(f, key, &nextn) == 0 && nextn > 0 &&
        snprintf(key, sizeof key, "%s.block_count", arch) < (int)sizeof key &&
        strata_gguf_get_u32(f, key, &blocks) == 0 && nextn < blocks) {
        strata_expert_layout_limit(lay, blocks - nextn);
        // nor are their other tensors loaded: out of the dense bytes too
        for (uint64_t i = 0; i < f->n_tensors; i++) {
            const char *name = f->tensors[i].name;
            char *end;
            int l;
            if (strncmp(name, "blk.", 4) != 0 || parse_expert_name(name, &l) >= 0) continue;
            const long b = strtol(name + 4, &end, 10);
            if (end == name + 4 || *end != '.' || b < (long)(blocks - nextn)) continue;
            lay->total_bytes -= f->tensors[i].n_bytes;
            lay->unused_dense_bytes += f->tensors[i].n_bytes;
        }
        count_classes(lay);
    }
    return 0;
}

void strata_expert_layout_limit(struct strata_expert_layout *lay, uint32_t n_blocks)
{
    while (lay->n_layers > 0 && (uint32_t)lay->layers[lay->n_layers - 1].layer >= n_blocks) {
        const struct strata_expert_layer *el = &lay->layers[--lay->n_layers];
        for (int p = 0; p < STRATA_EXPERT_PART_COUNT; p++) {
            lay->expert_bytes -= el->tensor[p]->n_bytes;
            lay->total_bytes -= el->tensor[p]->n_bytes;
            lay->unused_expert_bytes += el->tensor[p]->n_bytes;
        }
    }
    count_classes(lay);
}

// dense_bytes, full_residency_bytes and the slot classes from the layers.
static void count_classes(struct strata_expert_layout *lay)
{
    lay->dense_bytes = lay->total_bytes - lay->expert_bytes;
    lay->full_residency_bytes = lay->dense_bytes;
    lay->n_classes = 0;
    for (uint32_t i = 0; i < lay->n_layers; i++) {
        uint64_t sb = lay->layers[i].slot_bytes;
        lay->full_residency_bytes += sb * lay->n_expert;
        uint32_t c = 0;
        while (c < lay->n_classes && lay->class_bytes[c] != sb) c++;
        if (c == lay->n_classes && c < 64) {
            uint32_t j = lay->n_classes++;
            while (j > 0 && lay->class_bytes[j - 1] > sb) {
                lay->class_bytes[j] = lay->class_bytes[j - 1];
                j--;
            }
            lay->class_bytes[j] = sb;
        }
    }
}

void strata_expert_layout_plan(const struct strata_expert_layout *lay, uint64_t budget, bool classes,
                               struct strata_slot_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    uint64_t sum = 0, max = 0;
    for (uint32_t l = 0; l < lay->n_layers; l++) {
        sum += lay->layers[l].slot_bytes;
        if (lay->layers[l].slot_bytes > max) max = lay->layers[l].slot_bytes;
    }
    plan->max_slot_bytes = max;
    if (lay->n_layers == 0 || sum == 0) return;
    const uint64_t uniform_sum = max * lay->n_layers;
    uint64_t n;
    if (budget == 0) {
        n = lay->n_expert;
        plan->uniform = !classes;
    } else {
        n = classes ? budget / sum : 0;
        // Few slots: one size keeps the layout simple and matches the tools' conversion.
        plan->uniform = !classes || n < 16;
        if (plan->uniform) n = budget / uniform_sum;
    }
    if (n > lay->n_expert) n = lay->n_expert;
    plan->n_slots = (uint32_t)n;
    plan->n_classes = plan->uniform ? 1 : lay->n_classes;
    plan->total_bytes = n * (plan->uniform ? uniform_sum : sum);
}

uint64_t strata_expert_layout_slot_size(const struct strata_expert_layout *lay,
                                        const struct strata_slot_plan *plan, uint32_t l)
{
    if (l >= lay->n_layers) return 0;
    return plan->uniform ? plan->max_slot_bytes : lay->layers[l].slot_bytes;
}

uint64_t strata_expert_layout_min_budget(const struct strata_expert_layout *lay, uint32_t min_slots)
{
    uint64_t max = 0;
    for (uint32_t l = 0; l < lay->n_layers; l++)
        if (lay->layers[l].slot_bytes > max) max = lay->layers[l].slot_bytes;
    // Below 16 slots the plan is uniform, so the minimum is priced with the largest slot.
    return (uint64_t)min_slots * max * lay->n_layers;
}

uint32_t strata_expert_pin_count(uint32_t n_slots, uint32_t n_expert, uint32_t n_expert_used, double share)
{
    if (n_slots >= n_expert || n_slots <= n_expert_used) return 0;
    if (!(share > 0)) share = STRATA_PIN_SHARE_DEFAULT;
    const uint32_t n = share >= 1 ? n_slots : (uint32_t)(share * n_slots);
    return n < n_slots - n_expert_used ? n : n_slots - n_expert_used;
}

int strata_expert_pass_group(int n_used, int max_batch)
{
    if (n_used <= max_batch) return n_used > 0 ? n_used : 1;
    return max_batch >= 2 ? max_batch / 2 : 1;
}

static int cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

void strata_expert_pass_order(uint32_t *ids, int n, const int32_t *count, uint64_t *scratch)
{
    for (int i = 0; i < n; i++) scratch[i] = ((uint64_t)(uint32_t)(INT32_MAX - count[ids[i]]) << 32) | ids[i];
    qsort(scratch, (size_t)n, sizeof *scratch, cmp_u64);
    for (int i = 0; i < n; i++) ids[i] = (uint32_t)scratch[i];
}
