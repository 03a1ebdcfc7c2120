// strata plan: what a machine with R GiB of RAM should give the expert cache for a model, the
// miss bytes per token to expect and the byte-floor decode speed.
#ifndef STRATA_TOOLS_PLAN_H
#define STRATA_TOOLS_PLAN_H

#include <stdint.h>
#include <stdio.h>

struct strata_plan_opts {
    const char *model;
    double ram_gib;
    const char *trace;      // route trace for the miss estimate, or NULL (uniform routing)
    double disk_gbs;        // 0: measure with a short O_DIRECT read of the model
    double mem_gbs;         // RAM bandwidth for resident bytes (default 12 GB/s)
    int n_ctx;              // context for the KV cache estimate (default 4096)
    double reserve_gib;     // left to the OS and the rest (the CLI's default is 1 GiB)
};

// Print the plan. 0 or negative.
int strata_plan(const struct strata_plan_opts *o, FILE *out);
// Sequential O_DIRECT read speed of a file in GB/s (reads up to max_bytes in 1 MiB requests).
int strata_plan_disk_gbs(const char *path, uint64_t max_bytes, double *gbs);

#endif
