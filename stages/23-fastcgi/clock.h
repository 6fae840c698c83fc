/* clock.h -- the monotonic clock, in seconds. */
#ifndef RSP_CLOCK_H
#define RSP_CLOCK_H

/* Seconds on CLOCK_MONOTONIC, which no change of the wall clock moves.
 * Should the clock ever fail (it cannot with a valid clock id; a broken
 * kernel or seccomp filter could make it), the failure is logged and the
 * last good reading is returned: time stands still rather than jumping. */
double clock_now(void);

/* Seconds since 1970 on CLOCK_REALTIME, for what people read (the status
 * page's "started at"); 0 if the clock failed (logged). */
double clock_wall(void);

#endif
