// The CHECK macro the C test programs share: a failed check prints where and why, counts into
// g_failures and lets the test go on, so one run reports every failure.
#ifndef STRATA_TEST_CHECK_H
#define STRATA_TEST_CHECK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_failures;

// 64-byte aligned memory (the SIMD kernels' rows), or the test ends: "out of memory".
static inline void *xmalloc(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 64)) {
        printf("out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

#define CHECK(cond, ...)                                                           \
    do {                                                                           \
        if (!(cond)) {                                                             \
            g_failures++;                                                          \
            printf("    check failed at %s:%d: %s: ", __FILE__, __LINE__, #cond);  \
            printf(__VA_ARGS__);                                                   \
            printf("\n");                                                          \
        }                                                                          \
    } while (0)

// Units in the last place between two floats of the same sign (0: the same bits).
static inline uint32_t ulp_diff(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, 4), memcpy(&ib, &b, 4);
    return ia > ib ? (uint32_t)(ia - ib) : (uint32_t)(ib - ia);
}

// "ok   NAME" or "FAIL NAME" for a case, given g_failures before it ran.
static inline void case_result(const char *name, int failures_before)
{
    printf("%s %s\n", g_failures == failures_before ? "ok  " : "FAIL", name);
}

#endif
