// Where the routed experts of a GGUF live: for each MoE layer, the stacked gate/up/down tensors
// (`blk.L.ffn_{gate,up,down}_exps.weight`, expert index slowest), so expert e of layer L is three
// contiguous byte ranges at known offsets. Also the byte totals that size the expert cache.
#ifndef STRATA_EXPERT_LAYOUT_H
#define STRATA_EXPERT_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

struct strata_gguf_file;
struct strata_gguf_tensor;

enum strata_expert_part { STRATA_EXPERT_GATE, STRATA_EXPERT_UP, STRATA_EXPERT_DOWN, STRATA_EXPERT_PART_COUNT };

struct strata_expert_layer {
    int layer;                                                  // block index
    const struct strata_gguf_tensor *tensor[STRATA_EXPERT_PART_COUNT]; // borrowed from the strata_gguf_file
    uint64_t part_bytes[STRATA_EXPERT_PART_COUNT];              // bytes of one expert's slice
    uint64_t triplet_bytes;                                     // sum of the three slices
    uint64_t slot_bytes;                                        // a slot of this layer, 4 KiB pages
    bool paged;                                                 // parts in whole pages (below)
};

struct strata_expert_layout {
    uint32_t n_expert;               // experts per MoE layer (same in every layer)
    uint32_t n_layers;               // MoE layers found
    struct strata_expert_layer *layers; // [n_layers], ascending block index; owned
    uint64_t total_bytes;            // all tensor bytes of the file
    uint64_t expert_bytes;           // routed-expert tensor bytes
    uint64_t dense_bytes;            // everything else
    uint64_t full_residency_bytes;   // dense + n_expert * sum of slot_bytes (4 KiB-aligned slots)
    uint64_t unused_expert_bytes;    // expert tensors of blocks never run (nextn), in no total
    uint64_t unused_dense_bytes;     // their other tensors (never loaded), in no total either
    uint32_t n_classes;              // distinct slot sizes
    uint64_t class_bytes[64];        // the distinct slot sizes, ascending (first 64)
};

// Where the parts of expert e sit in a slot of its layer. In a paged layer (every part a whole
// number of 4 KiB pages, as in the real shapes) each part sits at its file offset's phase within
// 4 KiB, in pages of its own, so an O_DIRECT read of its aligned enclosing range lands in the slot
// as it is (no bounce buffer, no copy) and never touches another part (io.h); the slot costs at
// most one page per part more than the triplet. Otherwise the parts are packed back to back (and
// read through the page cache).
void strata_expert_part_offsets(const struct strata_expert_layer *el, uint32_t e,
                                uint64_t off[STRATA_EXPERT_PART_COUNT]);

// Find the expert tensors of every layer. A layer with only some of the three, or with
// inconsistent expert counts, is an error (STRATA_EFORMAT, logged). A file without experts gives
// n_layers = 0. The blocks after block_count - nextn_predict_layers (the nextn / MTP blocks,
// which decoding never runs) are left out as by strata_expert_layout_limit.
int strata_expert_layout_init(struct strata_expert_layout *lay, const struct strata_gguf_file *f);
void strata_expert_layout_free(struct strata_expert_layout *lay);
// Forget the MoE layers of blocks >= n_blocks (glm4moe's nextn blocks, which decoding never
// runs): their experts get no slots and leave expert_bytes, total_bytes and the classes.
void strata_expert_layout_limit(struct strata_expert_layout *lay, uint32_t n_blocks);

// How a cache budget becomes slots (the store, `strata sim --cache-mib` and `strata plan` share
// it). Every layer gets n_slots slots (at most n_expert). With classes a layer's slot is its own
// slot_bytes; the budget is divided by the sum over layers. Below 16 slots per layer, or with
// classes off, every slot has the largest slot_bytes (uniform). budget 0 = full residency.
struct strata_slot_plan {
    uint32_t n_slots;        // per layer
    bool uniform;            // one slot size for all layers
    uint32_t n_classes;      // distinct slot sizes used
    uint64_t max_slot_bytes; // largest slot_bytes of any layer
    uint64_t total_bytes;    // n_slots * sum of the layers' slot sizes
};
void strata_expert_layout_plan(const struct strata_expert_layout *lay, uint64_t budget, bool classes,
                               struct strata_slot_plan *plan);
// Slot size of MoE layer l under a plan.
uint64_t strata_expert_layout_slot_size(const struct strata_expert_layout *lay,
                                        const struct strata_slot_plan *plan, uint32_t l);
// Smallest budget that gives min_slots slots per layer.
uint64_t strata_expert_layout_min_budget(const struct strata_expert_layout *lay, uint32_t min_slots);

// A pinned hot set (--pin-from): per MoE layer the experts a route trace used most, held from
// open and never evicted. Each tier (host store, VRAM) pins the first strata_expert_pin_count of
// its slots; its other slots run the policy, and max_batch is those other slots.
struct strata_expert_pins {
    const uint32_t *rank;    // [n_layers][n_expert] experts by use, most first (strata_trace_rank);
                             // NULL: nothing pinned. Borrowed for the open only.
    double share;            // of the slots per layer (0: STRATA_PIN_SHARE_DEFAULT)
};
// Measured with strata sim (docs/expert-store.md, "A pinned hot set").
#define STRATA_PIN_SHARE_DEFAULT 0.25
// Experts pinned per layer: share x n_slots, at most n_slots - n_expert_used (a token's experts
// always find unpinned slots), 0 when the slots hold every expert (nothing is ever evicted).
uint32_t strata_expert_pin_count(uint32_t n_slots, uint32_t n_expert, uint32_t n_expert_used, double share);

// How a pass (one forward step of a batch or prompt chunk) fetches the n_used distinct experts it
// needs of one layer (the forward pass and strata sim share it). When they fit the slots of the
// layer (max_batch): one group, in ascending id order. Otherwise they are ordered by how many
// rows (tokens) need them, most first (ties: ascending id), and taken in groups of max_batch / 2,
// so that the next group's reads run while a group computes and no expert is read twice in a pass.
int strata_expert_pass_group(int n_used, int max_batch);
// Reorder ids[0..n) (ascending on entry) for a pass of several groups: count[e] descending, then id.
// scratch: n entries.
void strata_expert_pass_order(uint32_t *ids, int n, const int32_t *count, uint64_t *scratch);

#endif
