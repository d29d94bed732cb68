/*
 * backoff.c — the one retry pause of kgym (util.h): exponential from a base,
 * capped, replaced by the server's Retry-After when it sent one.  Callers
 * that must stay wakeable (a scheduler that is stopping) wait the pause on
 * their own condition variable; the others use kg_backoff_sleep.
 */
#include "util/util.h"

#include <errno.h>
#include <math.h>
#include <time.h>

double kg_backoff_delay(const kg_backoff *b, int attempt, double retry_after_s)
{
    double s;
    if (retry_after_s >= 0 && isfinite(retry_after_s))
        s = retry_after_s;
    else
        s = b->base_s * pow(2.0, attempt > 1 ? attempt - 1 : 0);
    if (!(s <= b->max_s)) /* NaN too */
        s = b->max_s;
    return s > 0 ? s : 0;
}

void kg_backoff_sleep(double seconds)
{
    if (!(seconds > 0))
        return;
    struct timespec ts = {.tv_sec = (time_t)seconds, .tv_nsec = (long)((seconds - floor(seconds)) * 1e9)};
    /* clock_nanosleep on CLOCK_MONOTONIC: a clock step does not stretch it,
     * and a signal only interrupts it (EINTR), after which it goes on. */
    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += ts.tv_sec;
    end.tv_nsec += ts.tv_nsec;
    if (end.tv_nsec >= 1000000000L) {
        end.tv_sec++;
        end.tv_nsec -= 1000000000L;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &end, NULL) == EINTR)
        ;
}
