// Logging: one line per message to stderr or a user sink; the last error is kept per thread.
#include "util/log.h"

#include <stdatomic.h>
#include <string.h>

static _Atomic int g_level = -1;
static strata_log_sink g_sink;
static void *g_sink_user;
static _Thread_local char t_last_error[512];

static const char *const level_names[STRATA_LOG_COUNT] = {"error", "warning", "info", "debug"};

static int current_level(void)
{
    int level = atomic_load(&g_level);
    if (level < 0) {
        const char *env = getenv("STRATA_LOG");
        level = STRATA_LOG_WARN;
        if (env) {
            for (int i = 0; i < STRATA_LOG_COUNT; i++)
                if (strcmp(env, level_names[i]) == 0) level = i;
        }
        atomic_store(&g_level, level);
    }
    return level;
}

void strata_log_set_level(enum strata_log_level level) { atomic_store(&g_level, (int)level); }

void strata_log_set_sink(strata_log_sink sink, void *user)
{
    g_sink = sink;
    g_sink_user = user;
}

const char *strata_last_error(void) { return t_last_error; }

void strata_log(enum strata_log_level level, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (level == STRATA_LOG_ERROR) memcpy(t_last_error, line, sizeof line);
    if ((int)level > current_level()) return;
    if (g_sink) {
        g_sink(level, line, g_sink_user);
        return;
    }
    if (level == STRATA_LOG_INFO || level == STRATA_LOG_DEBUG)
        fprintf(stderr, "strata: %s\n", line);
    else
        fprintf(stderr, "strata: %s: %s\n", level_names[level], line);
}
