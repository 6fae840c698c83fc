/* pipe_pool.c -- pipes for splice(2), kept for reuse and bounded. */
#define _GNU_SOURCE
#include "pipe_pool.h"

#include "clock.h"
#include "log.h"
#include "stats.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#define PIPE_POOL_FDS_PER_PIPE 8    /* one pipe per this many descriptors allowed */
#define PIPE_POOL_MAX 1024          /* and never more than this many */
#define PIPE_POOL_IDLE 64           /* empty ones kept for reuse */
#define PIPE_POOL_BACKOFF 1.0       /* seconds without pipe2 after it failed */

static struct pipe_pair *idle;
static size_t idle_count, open_count, limit;
static double failed_at = -1;       /* clock_now() of pipe2's last failure */

/* How many pipes may be open at once: from RLIMIT_NOFILE, read once
 * (rsp's limit does not change while it runs). */
static size_t pipe_limit(void)
{
    struct rlimit rl;

    if (limit != 0)
        return limit;
    limit = PIPE_POOL_MAX;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur / PIPE_POOL_FDS_PER_PIPE < limit)
        limit = rl.rlim_cur / PIPE_POOL_FDS_PER_PIPE;
    return limit;
}

static void pipe_close(struct pipe_pair *p)
{
    if (close(p->read_fd) == -1)
        log_errno("close pipe fd %d", p->read_fd);
    if (close(p->write_fd) == -1)
        log_errno("close pipe fd %d", p->write_fd);
    free(p);
    open_count--;
    stats_gauge_own(&stats_row()->pipes, -1);
}

struct pipe_pair *pipe_pool_get(void)
{
    struct pipe_pair *p = idle;
    int fds[2], size;

    if (p != NULL) {
        idle = p->next;
        idle_count--;
        return p;
    }
    if (open_count >= pipe_limit())
        return NULL;
    /* Out of descriptors a moment ago: asking again on every read of
     * every body would only fail again. */
    if (failed_at >= 0 && clock_now() - failed_at < PIPE_POOL_BACKOFF)
        return NULL;
    p = malloc(sizeof *p);
    if (p == NULL)
        return NULL;
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) == -1) {
        /* EMFILE, ENFILE: the descriptors are better spent on clients;
         * bodies are copied instead for a while. */
        failed_at = clock_now();
        free(p);
        return NULL;
    }
    failed_at = -1;
    size = fcntl(fds[0], F_GETPIPE_SZ);
    *p = (struct pipe_pair){ .read_fd = fds[0], .write_fd = fds[1],
                             .capacity = size > 0 ? (size_t)size : 4096 };
    open_count++;
    stats_gauge_own(&stats_row()->pipes, 1);
    return p;
}

void pipe_pool_put(struct pipe_pair *p)
{
    if (idle_count >= PIPE_POOL_IDLE) {
        pipe_close(p);
        return;
    }
    p->next = idle;
    idle = p;
    idle_count++;
}

void pipe_pool_discard(struct pipe_pair *p)
{
    pipe_close(p);
}

void pipe_pool_trim(void)
{
    while (idle != NULL) {
        struct pipe_pair *p = idle;
        idle = p->next;
        idle_count--;
        pipe_close(p);
    }
}
