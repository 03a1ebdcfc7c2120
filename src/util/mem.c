// Huge-page-backed anonymous mappings for big buffers, aligned malloc for small ones, and what the
// kernel says of them (its huge-page mode, the process's anonymous memory on huge pages).
#include "util/mem.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "strata.h"

#define HUGE_BYTES ((size_t)2 << 20)

void *strata_zalloc_aligned(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64)) return NULL;
    memset(p, 0, bytes ? bytes : 64);
    return p;
}

void *strata_big_alloc(size_t bytes)
{
    if (bytes < HUGE_BYTES) {  // page-aligned (O_DIRECT reads land in the expert slab)
        void *p = NULL;
        if (posix_memalign(&p, 4096, bytes ? bytes : 64)) return NULL;
        memset(p, 0, bytes ? bytes : 64);
        return p;
    }
    // Over-map by one huge page and trim, so the buffer starts on a 2 MiB boundary and the
    // kernel can back it with huge pages from the first byte.
    size_t len = (bytes + HUGE_BYTES - 1) / HUGE_BYTES * HUGE_BYTES;
    char *raw = mmap(NULL, len + HUGE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    uintptr_t start = ((uintptr_t)raw + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1);
    size_t head = start - (uintptr_t)raw;
    if (head) munmap(raw, head);
    size_t tail = HUGE_BYTES - head;
    if (tail) munmap((char *)start + len, tail);
    madvise((void *)start, len, MADV_HUGEPAGE);
    return (void *)start;
}

void strata_big_free(void *p, size_t bytes)
{
    if (!p) return;
    if (bytes < HUGE_BYTES) {
        free(p);
        return;
    }
    munmap(p, (bytes + HUGE_BYTES - 1) / HUGE_BYTES * HUGE_BYTES);
}

void *strata_reserve_pages(size_t bytes)
{
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

int strata_commit_pages(void *p, size_t off, size_t len)
{
    if (!len) return 0;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = ((uintptr_t)p + off) & ~(page - 1), b = (uintptr_t)p + off + len;
#ifdef MADV_POPULATE_WRITE
    if (madvise((void *)a, b - a, MADV_POPULATE_WRITE) != 0 && (errno == ENOMEM || errno == EFAULT))
        return STRATA_ENOMEM;
#else
    (void)a, (void)b;
#endif
    return 0;
}

void strata_release_pages(void *p, size_t bytes)
{
    if (p) munmap(p, bytes ? bytes : 1);
}

const char *strata_thp_mode_parse(const char *line)
{
    static const char *const modes[] = {"always", "madvise", "never"};
    // the mode in force is the one in brackets: "always [madvise] never"
    for (size_t i = 0; line && i < sizeof modes / sizeof modes[0]; i++) {
        char want[16];
        snprintf(want, sizeof want, "[%s]", modes[i]);
        if (strstr(line, want)) return modes[i];
    }
    return "";
}

const char *strata_thp_mode(void)
{
    char buf[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return "unknown";
    const bool ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    const char *mode = ok ? strata_thp_mode_parse(buf) : "";
    return *mode ? mode : "unknown";
}

bool strata_anon_memory(uint64_t *anon, uint64_t *huge)
{
    *anon = *huge = 0;
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return false;
    char line[256];
    bool seen = false;
    unsigned long long kb;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "Anonymous: %llu kB", &kb) == 1) *anon = (uint64_t)kb * 1024, seen = true;
        else if (sscanf(line, "AnonHugePages: %llu kB", &kb) == 1) *huge = (uint64_t)kb * 1024;
    }
    fclose(f);
    return seen;
}
