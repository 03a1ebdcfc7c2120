// Logging and error reporting for the library.
//
// Library functions return 0 or a negative error code (-errno style or STRATA_E*) and report
// why in exactly one line through strata_log_error(), naming the function and the value.
// Only the innermost failure logs; callers propagate the code without logging again.
// The line goes to stderr (or the sink set by strata_log_set_sink) and is also kept as the
// thread's last error, so a client can print it in its own format.
#ifndef STRATA_LOG_H
#define STRATA_LOG_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "strata.h"  // the STRATA_E* error codes

enum strata_log_level {
    STRATA_LOG_ERROR,
    STRATA_LOG_WARN,
    STRATA_LOG_INFO,
    STRATA_LOG_DEBUG,
    STRATA_LOG_COUNT
};

typedef void (*strata_log_sink)(enum strata_log_level level, const char *line, void *user);

void strata_log(enum strata_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define strata_log_error(...) strata_log(STRATA_LOG_ERROR, __VA_ARGS__)
#define strata_log_warn(...)  strata_log(STRATA_LOG_WARN, __VA_ARGS__)
#define strata_log_info(...)  strata_log(STRATA_LOG_INFO, __VA_ARGS__)
#define strata_log_debug(...) strata_log(STRATA_LOG_DEBUG, __VA_ARGS__)

// Messages above `level` are dropped (default: STRATA_LOG_WARN; STRATA_LOG env var overrides).
void strata_log_set_level(enum strata_log_level level);
// Replace the stderr sink (NULL restores it). Not thread-safe against concurrent logging.
void strata_log_set_sink(strata_log_sink sink, void *user);
// The last error line logged by this thread ("" if none). Borrowed; valid until the next log.
const char *strata_last_error(void);

// Internal invariants: stays on in release builds.
#define STRATA_ASSERT(cond)                                                              \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "strata: internal error: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                     \
        }                                                                                \
    } while (0)

#endif
