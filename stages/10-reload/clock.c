/* clock.c -- the monotonic clock. */
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
