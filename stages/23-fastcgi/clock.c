/* clock.c -- the monotonic clock, and the wall clock. */
#include "clock.h"

#include "log.h"

#include <time.h>

double clock_now(void)
{
    static double last;
    struct timespec ts;

    if (clock_gettime(CLOCK_MONOTONIC, &ts) == -1) {
        log_errno("clock_gettime(CLOCK_MONOTONIC)");
        return last;
    }
    last = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    return last;
}

double clock_wall(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_REALTIME, &ts) == -1) {
        log_errno("clock_gettime(CLOCK_REALTIME)");
        return 0;
    }
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
