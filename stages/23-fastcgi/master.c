/* master.c -- the master process: it starts the workers, replaces one that
 * dies, passes the operator's signals on to every worker, and serves the
 * status listener. It never serves a client itself.
 *
 *   SIGHUP   the master reads the config; if it is good, every worker
 *            reloads in place (stage 10's reload: no connection dropped).
 *            If `listen` changed, a new set of workers is started on the
 *            new sockets and the old set drains, as a SIGTERM would.
 *   SIGTERM  every worker drains (shutdown_timeout); the master exits
 *   SIGINT   when the last is gone. A second one stops them at once.
 *   SIGUSR1  every worker reopens the access log.
 *   SIGCHLD  a worker has died: another is started in its place (after
 *            a second, if it died within a second of starting: a worker
 *            that cannot start must not make the master fork in a loop).
 *
 * Workers are forked, not executed afresh: each starts with the master's
 * config generation, its sockets and the shared counters already there. */
#include "process.h"

#include "access_log.h"
#include "config.h"
#include "generation.h"
#include "limit.h"
#include "log.h"
#include "notify.h"
#include "proctitle.h"
#include "reactor.h"
#include "stats.h"
#include "timer.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define RESPAWN_DELAY 1.0      /* seconds before replacing a worker that died young */
#define KILL_GRACE 5.0         /* seconds after shutdown_timeout before SIGKILL */

enum worker_state { WORKER_EMPTY, WORKER_RUNNING, WORKER_WAITING };

struct worker {
    enum worker_state state;
    pid_t pid;
    int slot;                  /* 1..workers: what the log calls it */
    int row;                   /* its row of the shared counters */
    struct listen_fds fds;     /* the listening sockets it serves */
    bool retiring;             /* told to stop (listen moved): not replaced */
    double started;            /* reactor_now() when forked */
    double due;                /* WAITING: when to start it */
};

static struct {
    struct process *p;
    struct sockets fresh;      /* during a reload that moves `listen`: the new sockets */
    struct worker workers[STATS_ROWS];
    bool row_used[STATS_ROWS];
    bool stopping;
    pid_t pid;                 /* the master's own */
    struct timer respawn;      /* starts the workers WAITING, each when due */
    struct timer kill;         /* after a stop: SIGKILL for those still there */
} master;

static int free_row(void)
{
    for (int i = 0; i < STATS_ROWS; i++)
        if (!master.row_used[i])
            return i;
    return -1;
}

static size_t running(void)
{
    size_t n = 0;

    for (size_t i = 0; i < STATS_ROWS; i++)
        n += master.workers[i].state == WORKER_RUNNING;
    return n;
}

/* The status page's list of worker pids. */
static void update_facts(void)
{
    struct status_facts *f = &master.p->facts;

    f->pid_count = 0;
    for (size_t i = 0; i < STATS_ROWS && f->pid_count < STATUS_MAX_PIDS; i++)
        if (master.workers[i].state == WORKER_RUNNING)
            f->pids[f->pid_count++] = master.workers[i].pid;
}

/* Arms the respawn timer for the first worker due, if any is waiting. */
static void arm_respawn(void)
{
    double first = -1;

    for (size_t i = 0; i < STATS_ROWS; i++)
        if (master.workers[i].state == WORKER_WAITING && (first < 0 || master.workers[i].due < first))
            first = master.workers[i].due;
    if (first < 0)
        timer_disarm(&master.respawn);
    else if (timer_arm(&master.respawn, first) == -1)
        log_msg("out of memory arming a timer: workers are not started again");
}

static void wait_to_start(struct worker *w)
{
    w->state = WORKER_WAITING;
    w->due = reactor_now() + RESPAWN_DELAY;
    arm_respawn();
}

/* Forks the worker w describes. */
static void start(struct worker *w)
{
    int row = free_row();
    pid_t pid;

    if (row == -1) {
        log_msg("worker %d cannot start: %d workers are alive, old and new", w->slot, STATS_ROWS);
        wait_to_start(w);
        return;
    }
    fflush(NULL); /* nothing buffered may be written twice */
    pid = fork();
    if (pid == -1) {
        log_errno("fork (worker %d)", w->slot);
        wait_to_start(w);
        return;
    }
    if (pid == 0)
        worker_run(master.p, w->slot, row, w->fds, !generation_current()->scaling.reuseport,
                   master.pid); /* never returns */
    w->state = WORKER_RUNNING;
    w->pid = pid;
    w->row = row;
    w->started = reactor_now();
    master.row_used[row] = true;
    log_msg("worker %d started (pid %ld)", w->slot, (long)pid);
    update_facts();
}

/* Starts workers 1..N on the master's sockets. */
static void start_all(void)
{
    const struct config *c = generation_current();

    for (unsigned i = 0; i < c->scaling.workers; i++) {
        struct worker *w = NULL;

        for (size_t j = 0; j < STATS_ROWS && w == NULL; j++)
            if (master.workers[j].state == WORKER_EMPTY)
                w = &master.workers[j];
        if (w == NULL)
            return; /* cannot happen: start() checks the rows first */
        *w = (struct worker){ .slot = (int)i + 1, .fds = master.p->sockets.fds[c->scaling.reuseport ? i : 0] };
        start(w);
    }
}

static void respawn_fired(struct timer *timer)
{
    (void)timer;
    for (size_t i = 0; i < STATS_ROWS; i++)
        if (master.workers[i].state == WORKER_WAITING && master.workers[i].due <= reactor_now() &&
            !master.stopping)
            start(&master.workers[i]); /* may wait again: arm_respawn re-arms */
    arm_respawn();
}

static void kill_fired(struct timer *timer)
{
    (void)timer;
    log_msg("workers still running %g s after shutdown_timeout: killing them", KILL_GRACE);
    for (size_t i = 0; i < STATS_ROWS; i++)
        if (master.workers[i].state == WORKER_RUNNING && kill(master.workers[i].pid, SIGKILL) == -1)
            log_errno("kill (worker %d)", master.workers[i].slot);
}

/* Sends signo to every running worker. */
static void tell_all(int signo)
{
    for (size_t i = 0; i < STATS_ROWS; i++) {
        struct worker *w = &master.workers[i];

        if (w->state == WORKER_RUNNING && kill(w->pid, signo) == -1 && errno != ESRCH)
            log_errno("kill (worker %d, signal %d)", w->slot, signo);
    }
}

/* SIGCHLD: collects every worker that ended, and replaces it unless it
 * was meant to end. */
static void reap(void)
{
    for (;;) {
        char how[64];
        int status;
        struct worker *w = NULL;
        pid_t pid = waitpid(-1, &status, WNOHANG);

        if (pid == 0)
            break;
        if (pid == -1) {
            if (errno == EINTR)
                continue;
            if (errno != ECHILD)
                log_errno("waitpid");
            break;
        }
        for (size_t i = 0; i < STATS_ROWS && w == NULL; i++)
            if (master.workers[i].state == WORKER_RUNNING && master.workers[i].pid == pid)
                w = &master.workers[i];
        if (w == NULL)
            continue;
        if (WIFSIGNALED(status))
            snprintf(how, sizeof how, "was killed by signal %d", WTERMSIG(status));
        else
            snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(status));
        /* What it held is gone; what it counted stays. */
        stats_clear_row(w->row);
        limit_clear_column(w->row); /* its clients' connections too */
        master.row_used[w->row] = false;
        if (master.stopping || w->retiring) {
            log_msg("worker %d (pid %ld) %s", w->slot, (long)pid, how);
            w->state = WORKER_EMPTY;
        } else if (reactor_now() - w->started < RESPAWN_DELAY) {
            log_msg("worker %d (pid %ld) %s; starting another in %g s (it ended within %g s of "
                    "starting)", w->slot, (long)pid, how, RESPAWN_DELAY, RESPAWN_DELAY);
            master.p->facts.restarts++;
            wait_to_start(w);
        } else {
            log_msg("worker %d (pid %ld) %s; starting another", w->slot, (long)pid, how);
            master.p->facts.restarts++;
            start(w);
        }
    }
    update_facts();
    if (master.stopping && running() == 0)
        reactor_stop();
}

/* The master reads the file once: the workers get these very bytes
 * (config_text.c). */
static struct config *load_and_share(struct process *p)
{
    struct config *next;
    char *text;
    size_t length;

    if (config_read_file(p->config_path, &text, &length) == -1)
        return NULL;
    next = config_open_text(p->config_path, text, length);
    if (next != NULL && config_share_put(p->config_path, text, length) == -1) {
        config_release(next);
        next = NULL;
    }
    free(text);
    return next;
}

/* The number of workers and how they share the sockets stay as they
 * started: changing them is a restart. */
static void keep_workers(const struct config *current, struct config *next)
{
    if (next->scaling.workers != current->scaling.workers ||
        next->scaling.reuseport != current->scaling.reuseport) {
        log_msg("settings 'workers' and 'reuseport' take a restart; the rest of the config is reloaded");
        next->scaling.workers = current->scaling.workers;
        next->scaling.reuseport = current->scaling.reuseport;
    }
}

/* New sockets for a new set of workers, if there are rows for them. */
static int open_moved(struct process *p, const struct config *current, const struct config *next)
{
    size_t rows = 0;

    for (size_t i = 0; i < STATS_ROWS; i++)
        rows += !master.row_used[i];
    if (rows < next->scaling.workers) {
        log_msg("a new listen address needs %u new workers, and old ones are still draining",
                next->scaling.workers);
        return -1;
    }
    return sockets_reopen(&master.fresh, next, next->scaling.reuseport ? next->scaling.workers : 1, current,
                          &p->sockets);
}

static void close_moved(struct process *p)
{
    (void)p;
    sockets_close(&master.fresh);
}

/* The new generation is in: every worker reloads in place, or, when
 * `listen` moved, a new set is forked on the new sockets (after the
 * install: they inherit the generation) while the old set drains. */
static void installed(struct process *p, const struct config *next, bool moved)
{
    if (!moved) {
        tell_all(SIGHUP); /* each reloads in place, keeping its connections */
        return;
    }
    /* New sockets: workers inherit theirs at fork, so a new set serves
     * them while the old set finishes what it has. */
    for (size_t i = 0; i < STATS_ROWS; i++) {
        struct worker *w = &master.workers[i];

        if (w->state == WORKER_RUNNING)
            w->retiring = true;
        else if (w->state == WORKER_WAITING)
            w->state = WORKER_EMPTY;
    }
    tell_all(SIGTERM);
    sockets_close(&p->sockets);
    p->sockets = master.fresh;
    master.fresh.count = 0;
    log_listening(next);
    start_all();
}

static const struct reload_ops master_reload = {
    .load = load_and_share,
    .restart_settings = keep_workers,
    .open_moved = open_moved,
    .close_moved = close_moved,
    .installed = installed,
};

static void stop(int signo)
{
    double timeout = generation_current()->operations.shutdown_timeout;

    if (master.stopping) {
        log_msg("%s again: the workers stop now", strsignal(signo));
        tell_all(SIGTERM); /* their second: at once */
        return;
    }
    master.stopping = true;
    notify_stopping();
    timer_disarm(&master.respawn);
    for (size_t i = 0; i < STATS_ROWS; i++)
        if (master.workers[i].state == WORKER_WAITING)
            master.workers[i].state = WORKER_EMPTY;
    log_msg("%s: stopping %zu worker%s; requests in flight get up to %g s", strsignal(signo),
            running(), running() == 1 ? "" : "s", timeout);
    sockets_close(&master.p->sockets);
    tell_all(SIGTERM);
    if (running() == 0) {
        reactor_stop();
        return;
    }
    if (timer_arm(&master.kill, reactor_now() + timeout + KILL_GRACE) == -1)
        log_msg("out of memory arming a timer: workers that do not stop are not killed");
}

void master_signal(int signo)
{
    switch (signo) {
    case SIGCHLD:
        reap();
        break;
    case SIGHUP:
        if (master.stopping)
            log_msg("SIGHUP ignored: rsp is stopping");
        else
            process_reload(master.p, &master_reload);
        break;
    case SIGUSR1:
        access_log_reopen(); /* the file the next worker started inherits */
        tell_all(SIGUSR1);
        break;
    default:
        stop(signo);
        break;
    }
}

int master_run(struct process *p)
{
    int status;

    master.p = p;
    master.pid = getpid();
    proctitle_set("rsp: master process %s", p->config_path);
    timer_init(&master.respawn, respawn_fired, NULL);
    timer_init(&master.kill, kill_fired, NULL);
    log_msg("master: %u workers%s", generation_current()->scaling.workers,
            generation_current()->scaling.reuseport ? ", a listening socket each (reuseport)" : "");
    start_all();
    status = process_run(true);
    timer_disarm(&master.respawn);
    timer_disarm(&master.kill);
    return status;
}

void master_forget(void)
{
    memset(master.workers, 0, sizeof master.workers);
    memset(master.row_used, 0, sizeof master.row_used);
}
