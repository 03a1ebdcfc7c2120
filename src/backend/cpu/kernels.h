// The CPU backend's kernel tables: per instruction set, the dequantisation, activation rounding
// and dot products of every type strata computes with (quant/quant.h lists the types and holds
// their reference dequantisation and rounding).
//
// Dot products follow ggml: the activation row is first rounded to the weight type's
// "vec_dot_type" (Q8_0 blocks for Q8_0/Q4_0..., Q8_K blocks for K-quants, f16 for F16, ...), then
// vec_dot(weight_row, act_row) computes the float result. Matching that rounding is what makes
// strata agree with llama.cpp to float rounding.
#ifndef STRATA_BACKEND_CPU_KERNELS_H
#define STRATA_BACKEND_CPU_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "quant/quant.h"

// *s = dot(w, a) over n elements; w in the weight type, a in its vec_dot_type.
typedef void (*strata_vec_dot_fn)(int64_t n, float *s, const void *w, const void *a);
// s[t] = dot(w, a[t]) for the n_act (1..STRATA_DOT_TOKENS) activation rows a[t]: each weight
// block is decoded once and applied to every row (prompt processing is bound by decoding, not
// bytes). Each s[t] is bit-identical to the vec_dot of the same table on a[t], so results never
// depend on how tokens are grouped.
#define STRATA_DOT_TOKENS 8
typedef void (*strata_vec_dot_multi_fn)(int64_t n, float *s, const void *w, const void *const *a, int n_act);

enum strata_isa {
    STRATA_ISA_SCALAR,
    STRATA_ISA_AVX2,
    STRATA_ISA_AVX512,
    STRATA_ISA_COUNT
};

struct strata_kernels {
    enum strata_isa isa;
    strata_dequant_fn dequant[STRATA_TYPE_COUNT];     // NULL: type not computable
    strata_quantize_fn quantize[STRATA_TYPE_COUNT];   // indexed by the vec_dot type
    strata_vec_dot_fn vec_dot[STRATA_TYPE_COUNT];     // indexed by the weight type
    strata_vec_dot_multi_fn vec_dot_multi[STRATA_TYPE_COUNT];  // NULL: vec_dot per token
};

// Best ISA this CPU supports (STRATA_ISA env var "scalar"/"avx2"/"avx512" can force lower).
enum strata_isa strata_isa_detect(void);
const char *strata_isa_name(enum strata_isa isa);
// Kernel table of one ISA; entries a variant lacks are filled from the next lower ISA (the scalar
// one's dequantisation and rounding are quant/'s references), so every table is complete for
// every strata_type_computable type. NULL if the CPU cannot run that ISA.
const struct strata_kernels *strata_kernels_for(enum strata_isa isa);
// strata_kernels_for(strata_isa_detect()).
const struct strata_kernels *strata_kernels(void);

#endif
