// strata sim: replay a route trace through expert-cache replacement policies.
//
// One cache of n_slots per layer, as in the engine. Accesses come in groups: a token's experts of
// one layer (or, honouring "# chunk" markers, the union of a prompt chunk's experts, in ascending
// id order and split into groups of n_slots, exactly as the forward pass acquires them). The
// experts of the group being served are pinned; a miss evicts one unpinned expert chosen by the
// policy. With the engine's group order, LRU here reproduces the engine's misses exactly.
#ifndef STRATA_TOOLS_SIM_H
#define STRATA_TOOLS_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "experts/trace.h"

enum strata_sim_policy {
    STRATA_SIM_LRU,     // least recently used
    STRATA_SIM_LFU,     // least frequently used over the whole trace so far, ties by recency
    STRATA_SIM_LRFU,    // combined recency/frequency, CRF decay 2^(-lambda * age), lambda = 0.05
    STRATA_SIM_ARC,     // adaptive replacement cache: recent (T1) and frequent (T2) lists whose
                        // split follows hits in their ghost lists (Megiddo & Modha), per layer
    STRATA_SIM_HOT,     // LRU around a learned hot set: the hot_share x n_slots experts a trace
                        // uses most in each layer stay once loaded (evicted only when every other
                        // slot is pinned)
    STRATA_SIM_BELADY,  // evict the expert needed furthest in the future: the optimum
    STRATA_SIM_COUNT
};

struct strata_sim_opts {
    bool chunks;                          // honour chunk markers
    double hot_share;                     // HOT: share of the slots for the hot set (0: 0.5)
    const struct strata_trace *hot_from;  // HOT: the trace that picks the hot set (NULL: the one
                                          // replayed, an in-sample bound)
    const struct strata_trace *pin_from;  // the engine's --pin-from: per layer the experts this trace
                                          // used most, strata_expert_pin_count(pin_share) of them,
                                          // resident from the start and never evicted; any policy
                                          // runs in the other slots, and a pass's groups are cut at
                                          // those (the engine's max_batch). NULL: none
    double pin_share;                     // 0: STRATA_PIN_SHARE_DEFAULT
};

struct strata_sim_result {
    uint64_t hits, misses;   // per expert access of a group
    uint64_t tokens;
    // the same for the one-token passes only (decode: the engine's split_hit_rate), the prompt
    // chunks replayed before them but not counted
    uint64_t decode_hits, decode_misses, decode_tokens;
    uint32_t n_pinned;       // experts pinned per layer (pin_from)
};

const char *strata_sim_policy_name(enum strata_sim_policy p);
// Replay t at n_slots per layer (n_slots >= topk). 0 or negative.
int strata_sim_replay(const struct strata_trace *t, enum strata_sim_policy p, uint32_t n_slots,
                      const struct strata_sim_opts *o, struct strata_sim_result *r);
// Two tiers, as the engine's VRAM tier over its host store (the copy path, --gpu-miss copy): t
// through vram_slots per layer; each group's VRAM misses, in batches of up to 16 as the copy thread
// takes them, through host_slots (the host store's cache; n_expert or more: every expert, read at
// open, so the host never misses; a bounded one starts empty, as the engine's). The
// same policy and pins in both. host misses are the reads from the file. (With --gpu-miss auto the
// CPU-computed misses are read from the host tier too but do not enter VRAM: its misses are at
// least these.) 0 or negative.
int strata_sim_replay2(const struct strata_trace *t, enum strata_sim_policy p, uint32_t vram_slots,
                       uint32_t host_slots, const struct strata_sim_opts *o, struct strata_sim_result *vram,
                       struct strata_sim_result *host);
// The same with default options (in-sample hot set of half the slots). chunks: honour chunk markers.
int strata_sim_run(const struct strata_trace *t, enum strata_sim_policy p, uint32_t n_slots, bool chunks,
                   struct strata_sim_result *r);
// The hot set of layer l: hot[e] = 1 for the n_hot experts t uses most (ties: lower id).
void strata_sim_hot_set(const struct strata_trace *t, uint32_t l, uint32_t n_hot, uint8_t *hot);

// How a trace routes, per MoE layer then the median over layers: the fewest experts that take
// 90% of the picks (the most-picked first) and the most-picked expert's share of the picks
// (uniform routing: about 0.9 x E and 1/E); the share of a token's experts that the token before
// it used too (temporal locality, what an LRU cache lives on); and, for `sessions` tokens taken
// n_tokens / sessions apart (stand-ins for concurrent sessions at different places of different
// texts), the distinct experts they route to of their sessions x topk picks: a batched decode
// step of that many sessions reads these, so sessions x topk / distinct bounds what sharing the
// reads can give. 0, or STRATA_EARG (fewer than 2 x sessions tokens), STRATA_ENOMEM.
struct strata_route_stats {
    double cover90, top_share, prev_overlap, distinct;
    uint32_t sessions;
};
int strata_route_stats(const struct strata_trace *t, uint32_t sessions, struct strata_route_stats *r);

#endif
