/* timer.c -- a binary min-heap of timers, ordered by key.
 *
 * heap[0] has the smallest key; the children of heap[i] are heap[2i+1] and
 * heap[2i+2], and neither has a smaller key than its parent. Each timer
 * knows its own slot, so removing or moving one does not need a search. */
#include "timer.h"

#include <stdlib.h>

static struct timer **heap;
static size_t heap_length, heap_size;

static void place(struct timer *timer, size_t i)
{
    heap[i] = timer;
    timer->slot = i + 1;
}

/* Moves heap[i] up while its parent's key is larger. */
static void sift_up(size_t i)
{
    struct timer *timer = heap[i];

    while (i > 0 && heap[(i - 1) / 2]->key > timer->key) {
        place(heap[(i - 1) / 2], i);
        i = (i - 1) / 2;
    }
    place(timer, i);
}

/* Moves heap[i] down while a child's key is smaller. */
static void sift_down(size_t i)
{
    struct timer *timer = heap[i];

    for (;;) {
        size_t child = 2 * i + 1;

        if (child >= heap_length)
            break;
        if (child + 1 < heap_length && heap[child + 1]->key < heap[child]->key)
            child++;
        if (heap[child]->key >= timer->key)
            break;
        place(heap[child], i);
        i = child;
    }
    place(timer, i);
}

void timer_init(struct timer *timer, void (*fire)(struct timer *), void *closure)
{
    timer->deadline = timer->key = 0;
    timer->slot = 0;
    timer->fire = fire;
    timer->closure = closure;
}

int timer_arm(struct timer *timer, double deadline)
{
    if (timer->slot != 0) {
        timer->deadline = deadline;
        /* Later than the key: leave the heap alone (see timer.h). */
        if (deadline >= timer->key)
            return 0;
        timer->key = deadline;
        sift_up(timer->slot - 1);
        return 0;
    }
    if (heap_length == heap_size) {
        size_t size = heap_size ? 2 * heap_size : 64;
        struct timer **bigger = realloc(heap, size * sizeof *heap);
        if (bigger == NULL)
            return -1;
        heap = bigger;
        heap_size = size;
    }
    timer->deadline = timer->key = deadline;
    place(timer, heap_length++);
    sift_up(heap_length - 1);
    return 0;
}

void timer_disarm(struct timer *timer)
{
    size_t i;
    struct timer *last;

    if (timer->slot == 0)
        return;
    i = timer->slot - 1;
    timer->slot = 0;
    last = heap[--heap_length];
    if (i == heap_length)
        return; /* it was the last one */
    /* The last timer takes the hole, then goes up or down to its place. */
    place(last, i);
    if (i > 0 && heap[(i - 1) / 2]->key > last->key)
        sift_up(i);
    else
        sift_down(i);
}

double timers_next(void)
{
    return heap_length > 0 ? heap[0]->key : -1;
}

void timers_run(double now)
{
    while (heap_length > 0 && heap[0]->key <= now) {
        struct timer *timer = heap[0];

        if (timer->deadline > now) {
            /* Its deadline moved later since it was filed: file it again. */
            timer->key = timer->deadline;
            sift_down(0);
            continue;
        }
        timer_disarm(timer);
        timer->fire(timer);
    }
}

void timers_free(void)
{
    free(heap);
    heap = NULL;
    heap_length = heap_size = 0;
}

void timers_forget(void)
{
    for (size_t i = 0; i < heap_length; i++)
        heap[i]->slot = 0;
    heap_length = 0;
}
