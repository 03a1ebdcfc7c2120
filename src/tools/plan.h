// strata plan: what a machine with R GiB of RAM should give the expert cache for a model, the
// miss bytes per token to expect and the byte-floor decode speed.
#ifndef STRATA_TOOLS_PLAN_H
#define STRATA_TOOLS_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct strata_plan_opts {
    const char *model;
    double ram_gib;
    const char *trace;      // route trace for the miss estimate, or NULL (uniform routing)
    bool lru;               // replay it with LRU (--cache-policy lru) instead of the default LFU
    uint64_t cache_mib;     // the expert cache to price (0: what ram_gib leaves for it)
    int io_depth;           // the engine's --io-threads (reads in flight; 0: 4)
    double disk_gbs;        // 0: from disk_curve, else random O_DIRECT reads of the model (2 s)
    const char *disk_curve; // a measured random-read curve (strata_disk_curve_save), or NULL
    double mem_gbs;         // RAM bandwidth for resident bytes (default 12 GB/s)
    int n_ctx;              // context for the KV cache estimate (default 4096)
    double reserve_gib;     // left to the OS and the rest (the CLI's default is 1 GiB)
    // The VRAM tier (a GPU plan when gpu_mib or gpu_cache_mib is given; ram_gib / cache_mib then
    // size the host cache behind it, default every expert):
    double gpu_mib;         // device memory strata may use: dense weights, KV, scratch, reserve, the
                            // rest to expert slots
    uint64_t gpu_cache_mib; // the VRAM for experts to price (0: what gpu_mib leaves)
    double hbm_gbs;         // device memory bandwidth for resident bytes (0: 4800, an H200)
    double pcie_gbs;        // host -> device copies of missed experts (0: 45)
    double gpu_layer_us;    // fixed GPU time per layer of a decoded token (< 0: 107, the H200's
                            // fully resident decode of the 48-layer qwen3-30b-a3b shape; 0: pure
                            // byte floors)
    double gpu_reserve_mib; // CUDA context and the rest on the device (0: 1024)
};

// The disk's random-read curve: GB/s of O_DIRECT reads of one size at one queue depth.
struct strata_disk_point {
    uint64_t read_bytes;
    int depth;
    double gbs;         // bytes landed / wall time
    double ms;          // mean time of one read, submission to completion
};

#define STRATA_DISK_CURVE_MAX 128
struct strata_disk_curve {
    int n;
    struct strata_disk_point p[STRATA_DISK_CURVE_MAX];
};

// Random, 4 KiB-aligned O_DIRECT reads of read_bytes each from the second half of path (its head
// was just read for the metadata), depth in flight through io_uring, for about seconds (at least
// 3 * depth reads). 0 or negative.
int strata_disk_point(const char *path, uint64_t read_bytes, int depth, double seconds, struct strata_disk_point *out);
// Read sizes 64 KiB..4 MiB x depths 1..32 (the given ones when n_sizes / n_depths > 0).
int strata_disk_curve_measure(const char *path, const uint64_t *sizes, int n_sizes, const int *depths, int n_depths,
                              double seconds, struct strata_disk_curve *c, FILE *progress);
// TSV: "# read_kib depth gbs ms" then one point per line. 0 or negative.
int strata_disk_curve_save(const struct strata_disk_curve *c, const char *path);
int strata_disk_curve_load(struct strata_disk_curve *c, const char *path);
// GB/s at a read size and depth: the measured depth nearest below (or the smallest), linear in
// log2(size) between measured sizes, clamped at the ends. 0 for an empty curve.
double strata_disk_curve_gbs(const struct strata_disk_curve *c, uint64_t read_bytes, int depth);

// Print the plan. 0 or negative.
int strata_plan(const struct strata_plan_opts *o, FILE *out);

#endif
