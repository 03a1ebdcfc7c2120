// Tensor block formats: the type-trait table of every GGUF tensor type, the reference
// dequantisation and activation rounding of the types strata computes with, and random blocks for
// synthetic models. The dot products are the backends' (backend/cpu/kernels.h).
//
// Numbering follows GGUF's type enum (ggml's), so a type id read from a file indexes the table
// directly. Ids that GGUF retired (4, 5, 31-33, 36-38) have no traits (strata_type_traits
// returns NULL) and a file using them is rejected as an unknown type.
//
// A weight row of n elements is n / block_size consecutive blocks of type_size bytes.
// Dot products follow ggml: the activation row is first rounded to the weight type's
// "vec_dot_type" (Q8_0 blocks for Q8_0/Q4_0..., Q8_K blocks for K-quants, f16 for F16, ...),
// then vec_dot(weight_row, act_row) computes the float result. Matching that rounding is what
// makes strata agree with llama.cpp to float rounding.
#ifndef STRATA_QUANT_H
#define STRATA_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum strata_type {
    STRATA_TYPE_F32 = 0,
    STRATA_TYPE_F16 = 1,
    STRATA_TYPE_Q4_0 = 2,
    STRATA_TYPE_Q4_1 = 3,
    STRATA_TYPE_Q5_0 = 6,
    STRATA_TYPE_Q5_1 = 7,
    STRATA_TYPE_Q8_0 = 8,
    STRATA_TYPE_Q8_1 = 9,
    STRATA_TYPE_Q2_K = 10,
    STRATA_TYPE_Q3_K = 11,
    STRATA_TYPE_Q4_K = 12,
    STRATA_TYPE_Q5_K = 13,
    STRATA_TYPE_Q6_K = 14,
    STRATA_TYPE_Q8_K = 15,
    STRATA_TYPE_IQ2_XXS = 16,
    STRATA_TYPE_IQ2_XS = 17,
    STRATA_TYPE_IQ3_XXS = 18,
    STRATA_TYPE_IQ1_S = 19,
    STRATA_TYPE_IQ4_NL = 20,
    STRATA_TYPE_IQ3_S = 21,
    STRATA_TYPE_IQ2_S = 22,
    STRATA_TYPE_IQ4_XS = 23,
    STRATA_TYPE_I8 = 24,
    STRATA_TYPE_I16 = 25,
    STRATA_TYPE_I32 = 26,
    STRATA_TYPE_I64 = 27,
    STRATA_TYPE_F64 = 28,
    STRATA_TYPE_IQ1_M = 29,
    STRATA_TYPE_BF16 = 30,
    STRATA_TYPE_TQ1_0 = 34,
    STRATA_TYPE_TQ2_0 = 35,
    STRATA_TYPE_MXFP4 = 39,
    STRATA_TYPE_COUNT = 40
};

struct strata_type_traits {
    const char *name;               // "Q4_K", as GGUF tools print it
    uint32_t block_size;            // elements per block
    uint32_t type_size;             // bytes per block
    bool is_quantized;
    enum strata_type vec_dot_type;  // activation format of its dot product (meaningful if computable)
};

// NULL for ids that are out of range or retired.
const struct strata_type_traits *strata_type_traits(uint32_t type);
// "Q4_K" -> STRATA_TYPE_Q4_K (case-insensitive); -1 if unknown.
int strata_type_from_name(const char *name);
const char *strata_type_name(uint32_t type);  // "unknown(N)"-free: "?" for invalid ids
// Bytes of a row of n elements; 0 if n is not a multiple of the block size or type invalid.
uint64_t strata_type_row_bytes(uint32_t type, uint64_t n);

// ---- reference kernels ----------------------------------------------------------------------

// src: n elements in blocks of `type`; dst: n floats. n is a multiple of the block size.
typedef void (*strata_dequant_fn)(const void *src, float *dst, int64_t n);
// Round an activation row to a vec_dot format (Q8_0, Q8_1, Q8_K, F16, BF16, F32) as ggml does.
typedef void (*strata_quantize_fn)(const float *src, void *dst, int64_t n);

// Scalar reference dequantisation of weight type `type`; NULL if strata cannot decode it.
strata_dequant_fn strata_dequant_ref(uint32_t type);
// Scalar reference rounding of float activations to the activation format `type`, bit-identical
// to llama.cpp's x86 build; NULL for a type that is not an activation format.
strata_quantize_fn strata_quantize_ref(uint32_t type);
// True if strata computes with weights of this type: it decodes it and rounds activations to its
// vec_dot type. Every backend multiplies with every such type (backend tests hold them to it).
bool strata_type_computable(uint32_t type);

// ---- synthetic data --------------------------------------------------------------------------

// Fill n elements (multiple of the block size) of `type` with random but valid blocks whose
// dequantised values have roughly standard deviation `std` (sane f16 scales, valid grid indices
// for IQ types). Deterministic for a given *rng state (splitmix64), which it advances.
// Returns 0, or STRATA_EUNSUP for a type it cannot synthesise.
int strata_quant_random(uint32_t type, uint64_t *rng, void *dst, int64_t n, float std);

// splitmix64 step and a uniform float in [0,1): the one PRNG strata uses for synthetic data.
uint64_t strata_rng_next(uint64_t *state);
float strata_rng_uniform(uint64_t *state);
float strata_rng_normal(uint64_t *state);

#endif
