// Kernel dispatch: detects which SIMD level this CPU (and OS) can run and hands out complete
// kernel tables, one per ISA, whose missing entries come from the next lower ISA.
//
// Levels: AVX2 means AVX2 + FMA + F16C + BMI2 (Haswell, Zen 1 and later); AVX512 means AVX-512
// F/BW/VL/DQ + VNNI (Cascade Lake, Ice Lake, Zen 4 and later). The BF16 extension is not
// required: no kernel uses it, because its rounding (denormals flushed) is not ggml's.
#include <cpuid.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/kernels_impl.h"
#include "util/log.h"

// Filled once (cpuid traps to the hypervisor in a VM: microseconds), then read-only.
static struct strata_kernels g_tables[STRATA_ISA_COUNT];
static enum strata_isa g_cpu_best;
static pthread_once_t g_init_once = PTHREAD_ONCE_INIT;

static const char *const g_isa_names[STRATA_ISA_COUNT] = {"scalar", "avx2", "avx512"};

// clang 14's __builtin_cpu_supports does not know "f16c": ask cpuid (leaf 1, ecx bit 29).
static bool cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

// Whether the hardware (and the OS, which the builtins check through xgetbv) runs `isa`.
static bool cpu_runs(enum strata_isa isa)
{
    __builtin_cpu_init();
    switch (isa) {
    case STRATA_ISA_SCALAR:
        return true;
    case STRATA_ISA_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("bmi2") && cpu_has_f16c();
    case STRATA_ISA_AVX512:
        return cpu_runs(STRATA_ISA_AVX2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
    default:
        return false;
    }
}

static void init_once(void)
{
    g_cpu_best = STRATA_ISA_SCALAR;
    for (int isa = STRATA_ISA_COUNT - 1; isa > 0; isa--) {
        if (cpu_runs((enum strata_isa)isa)) {
            g_cpu_best = (enum strata_isa)isa;
            break;
        }
    }
    // complete each table from the one below it (tables exist for every ISA; only those the CPU
    // runs are handed out)
    const struct strata_kernels *partial[STRATA_ISA_COUNT] = {
        &strata_kernels_scalar_table, &strata_kernels_avx2_table, &strata_kernels_avx512_table};
    const struct strata_kernels *lowbit[STRATA_ISA_COUNT] = {
        NULL, &strata_lowbit_avx2_table, &strata_lowbit_avx512_table};
    for (int isa = 0; isa < STRATA_ISA_COUNT; isa++) {
        struct strata_kernels *t = &g_tables[isa];
        *t = *partial[isa];
        t->isa = (enum strata_isa)isa;
        if (isa == 0) {  // the references: dequantisation and rounding from quant/
            for (uint32_t i = 0; i < STRATA_TYPE_COUNT; i++) {
                t->dequant[i] = strata_dequant_ref(i);
                t->quantize[i] = strata_quantize_ref(i);
            }
            continue;
        }
        for (int i = 0; i < STRATA_TYPE_COUNT; i++) {  // the low-bit formats' own files
            if (!t->dequant[i]) t->dequant[i] = lowbit[isa]->dequant[i];
            if (!t->quantize[i]) t->quantize[i] = lowbit[isa]->quantize[i];
            if (!t->vec_dot[i]) {  // a multi-token dot only together with its vec_dot
                t->vec_dot[i] = lowbit[isa]->vec_dot[i];
                t->vec_dot_multi[i] = lowbit[isa]->vec_dot_multi[i];
            }
        }
        const struct strata_kernels *lower = &g_tables[isa - 1];
        for (int i = 0; i < STRATA_TYPE_COUNT; i++) {
            if (!t->dequant[i]) t->dequant[i] = lower->dequant[i];
            if (!t->quantize[i]) t->quantize[i] = lower->quantize[i];
            // a multi-token dot must round as the vec_dot beside it: take the lower one only
            // together with the lower vec_dot
            if (!t->vec_dot[i]) {
                t->vec_dot[i] = lower->vec_dot[i];
                t->vec_dot_multi[i] = lower->vec_dot_multi[i];
            }
        }
    }
}

enum strata_isa strata_isa_detect(void)
{
    pthread_once(&g_init_once, init_once);
    enum strata_isa best = g_cpu_best;
    const char *want = getenv("STRATA_ISA");
    if (!want || !*want) return best;
    for (int isa = 0; isa < STRATA_ISA_COUNT; isa++) {
        if (strcmp(want, g_isa_names[isa]) != 0) continue;
        if (isa <= (int)best) return (enum strata_isa)isa;
        strata_log_warn("strata_isa_detect: STRATA_ISA=%s but this CPU runs at most %s", want,
                        g_isa_names[best]);
        return best;
    }
    strata_log_warn("strata_isa_detect: STRATA_ISA=%s is not scalar, avx2 or avx512; using %s",
                    want, g_isa_names[best]);
    return best;
}

const char *strata_isa_name(enum strata_isa isa)
{
    return (unsigned)isa < STRATA_ISA_COUNT ? g_isa_names[isa] : "?";
}

const struct strata_kernels *strata_kernels_for(enum strata_isa isa)
{
    pthread_once(&g_init_once, init_once);
    return (unsigned)isa <= (unsigned)g_cpu_best ? &g_tables[isa] : NULL;
}

const struct strata_kernels *strata_kernels(void)
{
    return strata_kernels_for(strata_isa_detect());
}
