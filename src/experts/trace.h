// Route traces: every token's routed expert ids per MoE layer, as text.
//
//   # model=<name> layers=<L> experts=<E> topk=<K> tokens=<T> [key=value ...]
//   e e e e | e e e e | ...        one line per token: L groups of K ids, groups split by " | "
//   # chunk tokens=<N>             (strata writes this before the N rows of a prompt chunk whose
//                                  experts were fetched together; readers may ignore it)
// Lines starting with '#' are comments. The writer patches tokens=<T> at close (the number is
// padded with spaces so the header keeps its length).
#ifndef STRATA_EXPERTS_TRACE_H
#define STRATA_EXPERTS_TRACE_H

#include <stdint.h>
#include <stdio.h>

struct strata_trace_writer;

// Open path for writing and write the header. 0 or negative.
int strata_trace_open(struct strata_trace_writer **out, const char *path, const char *model,
                      uint32_t n_layers, uint32_t n_expert, uint32_t topk);
// Append n tokens: ids is [n][n_layers][topk]. A chunk of more than one token is marked.
int strata_trace_write(struct strata_trace_writer *w, const int32_t *ids, int n);
// Patch the token count, close. 0 or negative (a failed write is reported here too).
int strata_trace_close(struct strata_trace_writer *w);

struct strata_trace {
    char model[128];
    uint32_t n_layers, n_expert, topk;
    uint64_t n_tokens;
    int32_t *ids;        // [n_tokens][n_layers][topk]; owned
    uint32_t *chunk;     // [n_tokens] chunk number (tokens outside a marked chunk get their own)
};

// Read a trace; every id is checked against experts=, every line against layers= and topk=.
// 0 or negative (STRATA_EFORMAT with the line number).
int strata_trace_load(struct strata_trace *t, const char *path);
void strata_trace_free(struct strata_trace *t);
// The experts of MoE layer l by how often t routed to them, most first (ties: the lower id), into
// order[0..n_expert). A hot set of n experts is its first n (strata sim's HOT policy, --pin-from).
// 0, or STRATA_EARG (l out of range), STRATA_ENOMEM.
int strata_trace_rank(const struct strata_trace *t, uint32_t l, uint32_t *order);

#endif
