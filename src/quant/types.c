// The type-trait table: name, block size, bytes per block and dot-product activation format of
// every GGUF tensor type (ggml numbering; retired ids have no entry).
#include "quant/quant.h"

#include <strings.h>

#define T(id, nm, bs, ts, q, vdt) [STRATA_TYPE_##id] = {nm, bs, ts, q, STRATA_TYPE_##vdt}

static const struct strata_type_traits g_traits[STRATA_TYPE_COUNT] = {
    T(F32, "F32", 1, 4, false, F32),
    T(F16, "F16", 1, 2, false, F16),
    T(Q4_0, "Q4_0", 32, 18, true, Q8_0),
    T(Q4_1, "Q4_1", 32, 20, true, Q8_1),
    T(Q5_0, "Q5_0", 32, 22, true, Q8_0),
    T(Q5_1, "Q5_1", 32, 24, true, Q8_1),
    T(Q8_0, "Q8_0", 32, 34, true, Q8_0),
    T(Q8_1, "Q8_1", 32, 36, true, Q8_1),
    T(Q2_K, "Q2_K", 256, 84, true, Q8_K),
    T(Q3_K, "Q3_K", 256, 110, true, Q8_K),
    T(Q4_K, "Q4_K", 256, 144, true, Q8_K),
    T(Q5_K, "Q5_K", 256, 176, true, Q8_K),
    T(Q6_K, "Q6_K", 256, 210, true, Q8_K),
    T(Q8_K, "Q8_K", 256, 292, true, Q8_K),
    T(IQ2_XXS, "IQ2_XXS", 256, 66, true, Q8_K),
    T(IQ2_XS, "IQ2_XS", 256, 74, true, Q8_K),
    T(IQ3_XXS, "IQ3_XXS", 256, 98, true, Q8_K),
    T(IQ1_S, "IQ1_S", 256, 50, true, Q8_K),
    T(IQ4_NL, "IQ4_NL", 32, 18, true, Q8_0),
    T(IQ3_S, "IQ3_S", 256, 110, true, Q8_K),
    T(IQ2_S, "IQ2_S", 256, 82, true, Q8_K),
    T(IQ4_XS, "IQ4_XS", 256, 136, true, Q8_K),
    T(I8, "I8", 1, 1, false, I8),
    T(I16, "I16", 1, 2, false, I16),
    T(I32, "I32", 1, 4, false, I32),
    T(I64, "I64", 1, 8, false, I64),
    T(F64, "F64", 1, 8, false, F64),
    T(IQ1_M, "IQ1_M", 256, 56, true, Q8_K),
    T(BF16, "BF16", 1, 2, false, BF16),
    T(TQ1_0, "TQ1_0", 256, 54, true, Q8_K),
    T(TQ2_0, "TQ2_0", 256, 66, true, Q8_K),
    T(MXFP4, "MXFP4", 32, 17, true, Q8_0),
};

const struct strata_type_traits *strata_type_traits(uint32_t type)
{
    if (type >= STRATA_TYPE_COUNT || g_traits[type].name == NULL) return NULL;
    return &g_traits[type];
}

int strata_type_from_name(const char *name)
{
    for (int i = 0; i < STRATA_TYPE_COUNT; i++)
        if (g_traits[i].name && strcasecmp(g_traits[i].name, name) == 0) return i;
    return -1;
}

const char *strata_type_name(uint32_t type)
{
    const struct strata_type_traits *tr = strata_type_traits(type);
    return tr ? tr->name : "?";
}

uint64_t strata_type_row_bytes(uint32_t type, uint64_t n)
{
    const struct strata_type_traits *tr = strata_type_traits(type);
    if (!tr || n % tr->block_size) return 0;
    return n / tr->block_size * tr->type_size;
}
