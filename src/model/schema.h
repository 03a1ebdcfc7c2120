// Tensor schemas: for an architecture and its hyperparameters, every tensor a GGUF file of it
// holds, in the order converters write them: name, shape (GGUF order, input dimension first),
// whether it stays F32 whatever the weight type (norms, biases, routers, conv taps), whether a
// loader accepts its absence, and the distribution `strata synth` draws its values from. The
// loaders take shapes from here and synth writes exactly this list, so the two cannot disagree.
#ifndef STRATA_MODEL_SCHEMA_H
#define STRATA_MODEL_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct strata_hparams;

struct strata_tensor_spec {
    char name[96];
    uint32_t n_dims;
    uint64_t ne[4];        // GGUF order; unused dims 1
    bool f32;              // stays F32 (else the weight type)
    bool optional;         // a loader accepts a file without it
    float mean, std;       // synth: values drawn around mean with this standard deviation
    bool negative;         // synth: written as -|x| (ssm_a holds -exp(A_log), a decay below 0)
};

struct strata_schema {
    struct strata_tensor_spec *items;
    size_t n, cap;
};

// What the metadata does not say about a file: whether its optional tensors are there (synth
// writes them when asked; a loader builds the schema with them and accepts their absence).
struct strata_schema_opts {
    bool qk_norm;          // glm4moe per-head q/k RMS norms (GLM-4.5/4.7 have them, Air not)
};

// The schema of hp's architecture (qwen3moe, glm4moe, qwen3next, qwen35moe): every block of
// hp->n_layer + hp->n_layer_nextn, then the head. STRATA_EUNSUP for an architecture it does not
// describe yet, STRATA_ENOMEM.
int strata_schema_build(const struct strata_hparams *hp, const struct strata_schema_opts *o, struct strata_schema *s);
void strata_schema_free(struct strata_schema *s);
// The tensor named `name`, or NULL.
const struct strata_tensor_spec *strata_schema_find(const struct strata_schema *s, const char *name);

// Pieces the architectures share, for building schemas (also used by synth's newer presets).
int strata_schema_add(struct strata_schema *s, const char *name, bool f32, float mean, float std, uint32_t n_dims,
                      uint64_t ne0, uint64_t ne1, uint64_t ne2);
// blk.L's router ffn_gate_inp [E, X] and routed experts ffn_{gate,up}_exps [E, F, X],
// ffn_down_exps [F, E, X].
int strata_schema_moe(struct strata_schema *s, uint32_t l, uint64_t E, uint64_t F, uint64_t X);
// A SwiGLU FFN of width ff named blk.L.<gate>/<up>/<down>.weight (dense or shared expert).
int strata_schema_ffn(struct strata_schema *s, uint32_t l, const char *gate, const char *up, const char *down,
                      uint64_t E, uint64_t ff);
// The FFN half of a GLM / DeepSeek block l: a dense SwiGLU of width Fd in the first n_dense
// blocks, else routed experts with a selection bias plus a shared expert of width Fs; and the
// nextn wiring of the blocks from n_trunk on.
int strata_schema_glm_ffn(struct strata_schema *s, uint32_t l, uint64_t E, uint32_t n_dense, uint64_t Fd,
                          uint64_t F, uint64_t Fs, uint64_t X, uint32_t n_trunk);

#endif
