// Jobs (a request between an HTTP thread and the scheduler) and stop-string scanning.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server.h"

struct srv_job *srv_job_new(void)
{
    struct srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&j->refs, 1);
    atomic_init(&j->cancel, false);
    j->top_logprobs = -1;
    j->stop_index = -1;
    return j;
}

void srv_job_unref(struct srv_job *j)
{
    if (!j || atomic_fetch_sub(&j->refs, 1) != 1) return;
    free(j->prompt);
    for (int i = 0; i < j->n_stop; i++) free(j->stop[i]);
    free(j->text);
    free(j->lp);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

void srv_job_wait(struct srv_job *j, size_t seen, int timeout_ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&j->mu);
    while (!j->done && j->n_final <= seen) {
        if (pthread_cond_timedwait(&j->cv, &j->mu, &until) == ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&j->mu);
}

int srv_stop_find(char *const *stops, int n_stop, const char *text, size_t len, size_t from,
                  size_t *at, size_t *final_len)
{
    int found = -1;
    size_t best = len, hold = 0;
    for (int i = 0; i < n_stop; i++) {
        size_t m = strlen(stops[i]);
        if (m == 0) continue;
        size_t start = from >= m - 1 ? from - (m - 1) : 0;
        for (size_t p = start; p + m <= len && p < best; p++) {
            if (memcmp(text + p, stops[i], m) == 0) {
                best = p;
                found = i;
                break;
            }
        }
        // the longest tail of the text that a stop string starts with
        for (size_t k = m - 1 < len ? m - 1 : len; k > hold; k--) {
            if (memcmp(text + len - k, stops[i], k) == 0) {
                hold = k;
                break;
            }
        }
    }
    *at = best;
    *final_len = found >= 0 ? best : len - hold;
    return found;
}
