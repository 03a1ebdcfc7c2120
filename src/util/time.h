// Monotonic wall-clock seconds, the one clock strata times its phases and I/O with.
#ifndef STRATA_TIME_H
#define STRATA_TIME_H

#include <time.h>

static inline double strata_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
