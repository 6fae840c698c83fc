/* timer.h -- deadlines, kept in a binary min-heap.
 *
 * A timer is a struct the owner embeds (in a relay, a health check): a
 * deadline, a function to call when it passes, and a closure pointer that
 * function can use for its own state (the owner, as a socket handler's
 * closure is in reactor.h). Arming, moving and
 * disarming are O(log n), and moving a deadline later, which is what
 * "there was activity, push the timeout back" does on every read, costs
 * nothing at all: the heap keeps the old, earlier key, and when that key
 * comes up the timer is simply put back in with the new one. The reactor
 * sleeps until the earliest key (timers_next) and then fires what is due
 * (timers_run). Times are seconds on the monotonic clock (reactor_now). */
#ifndef RSP_TIMER_H
#define RSP_TIMER_H

#include <stdbool.h>
#include <stddef.h>

struct timer {
    double deadline;            /* when it fires */
    double key;                 /* its place in the heap: <= deadline */
    size_t slot;                /* its index in the heap + 1; 0 when disarmed */
    void (*fire)(struct timer *timer);
    void *closure;              /* for fire: what the timer is for */
};

/* Prepares a disarmed timer that calls fire(timer) when it is due, with
 * timer->closure set to closure. */
void timer_init(struct timer *timer, void (*fire)(struct timer *), void *closure);

/* Arms the timer for `deadline`, or moves it there if armed. Returns 0, or
 * -1 if the heap could not grow (out of memory; the timer is then left as
 * it was). */
int timer_arm(struct timer *timer, double deadline);

/* Disarms the timer, if armed. Call before freeing what embeds it. */
void timer_disarm(struct timer *timer);

static inline bool timer_armed(const struct timer *timer)
{
    return timer->slot != 0;
}

/* The earliest key in the heap, or a negative number if no timer is armed.
 * It may come before the earliest deadline (a deadline moved later): then
 * the reactor wakes early once, and timers_run files the timer again. */
double timers_next(void);

/* Fires, one after another, every timer whose deadline is at or before
 * `now`, disarming each first: a fire function may arm it again, arm or
 * disarm any other timer, and free what embeds its own. */
void timers_run(double now);

/* Disarms every timer at once without firing any: in a worker just
 * forked, the timers are the master's. */
void timers_forget(void);

/* Frees the heap itself; every timer must be disarmed. */
void timers_free(void);

#endif
