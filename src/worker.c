/* worker.c -- serving clients: the public listeners, the relays, and
 * the signals of a process that serves (SIGHUP reloads, SIGUSR1 reopens
 * the access log, SIGTERM and SIGINT stop gracefully). That process is
 * rsp alone (one worker, the default), or a worker the master forked
 * (master.c), which first forgets what was the master's; a worker
 * reloads only when its master says so (a SIGHUP sent to it directly,
 * as pkill -HUP rsp does, is logged and ignored). */
#include "process.h"

#include "access_log.h"
#include "acme_client.h"
#include "backend.h"
#include "config.h"
#include "generation.h"
#include "health.h"
#include "listener.h"
#include "limit.h"
#include "log.h"
#include "notify.h"
#include "proctitle.h"
#include "reactor.h"
#include "relay.h"
#include "stats.h"
#include "timer.h"
#include "upstream.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* The listeners of one process: plain HTTP, and HTTPS if there is `tls`. */
struct listeners {
    struct listener *plain;
    struct listener *tls;
};

/* What the signals act on. */
static struct {
    struct process *p;
    struct relay_set relays;
    struct listeners listeners; /* both NULL once stopping */
    struct listeners moved;     /* during a reload that moves `listen`: the new ones */
    struct listen_fds mine;     /* a worker's own sockets, among the master's */
    struct timer shutdown_timer;
    bool stopping;
    bool stop_from_master;      /* stopping: the master has asked (SIGTERM) */
    bool stop_from_others;      /* stopping: someone else has (kill, pkill) */
    int worker;                 /* this process is worker N (1, 2, ...); 0: rsp alone */
    pid_t master;               /* a worker's master */
} proxy;

/* Starts a listener on each socket of fds, which belong to them from
 * here on, whatever happens. Returns 0, or -1 after logging (the sockets
 * are closed then). */
static int listeners_start(struct listeners *l, struct listen_fds fds, bool shared)
{
    l->tls = NULL;
    l->plain = listener_start(fds.plain, &proxy.relays, shared, false);
    if (l->plain == NULL) {
        if (close(fds.plain) == -1)
            log_errno("close listening socket");
        if (fds.tls != -1 && close(fds.tls) == -1)
            log_errno("close listening socket (HTTPS)");
        return -1;
    }
    if (fds.tls != -1 && (l->tls = listener_start(fds.tls, &proxy.relays, shared, true)) == NULL) {
        if (close(fds.tls) == -1)
            log_errno("close listening socket (HTTPS)");
        listener_stop(l->plain);
        l->plain = NULL;
        return -1;
    }
    return 0;
}

/* Stops both (closing their sockets); either may be NULL. */
static void listeners_stop(struct listeners *l)
{
    if (l->plain != NULL)
        listener_stop(l->plain);
    if (l->tls != NULL)
        listener_stop(l->tls);
    l->plain = l->tls = NULL;
}

/* rsp alone reads the file itself. */
static struct config *load_file(struct process *p)
{
    return config_open(p->config_path);
}

static void warn_workers(const struct config *current, struct config *next)
{
    if (next->scaling.workers != current->scaling.workers)
        log_msg("setting 'workers' changed: that takes a restart; the rest of the config is reloaded");
}

/* New listeners for the new addresses, beside the old ones. One that did
 * not move is carried over (reopening its port would fail: it is taken). */
static int open_moved(struct process *p, const struct config *current, const struct config *next)
{
    struct sockets had = { .fds = { { listener_socket(proxy.listeners.plain),
                                      proxy.listeners.tls ? listener_socket(proxy.listeners.tls) : -1 } },
                           .count = 1 };
    struct sockets sockets = { .count = 0 };

    (void)p;
    if (sockets_reopen(&sockets, next, 1, current, &had) == -1)
        return -1;
    return listeners_start(&proxy.moved, sockets.fds[0], false);
}

static void close_moved(struct process *p)
{
    (void)p;
    listeners_stop(&proxy.moved);
}

static void use_moved(struct process *p, const struct config *next)
{
    (void)p;
    listeners_stop(&proxy.listeners);
    proxy.listeners = proxy.moved;
    proxy.moved = (struct listeners){ NULL, NULL };
    log_listening(next);
}

/* rsp alone: the whole reload is its own. */
static const struct reload_ops alone_reload = {
    .load = load_file,
    .restart_settings = warn_workers,
    .open_moved = open_moved,
    .close_moved = close_moved,
    .use_moved = use_moved,
};

/* A worker loads the very bytes the master has read and found good
 * (config_text.c) into a Lua state of its own. */
static struct config *load_shared(struct process *p)
{
    struct config *next = NULL;
    char *text;
    size_t length;

    if (config_share_take(&text, &length) == 0) {
        next = config_open_text(p->config_path, text, length);
        free(text);
    }
    return next;
}

/* A worker: the listening sockets, the status listener and the health
 * checks are the master's business. */
static const struct reload_ops worker_reload = {
    .follower = true,
    .load = load_shared,
};

static void shutdown_timer_fired(struct timer *timer)
{
    (void)timer;
    log_msg("shutdown_timeout passed: closing %zu connection%s still open", proxy.relays.count,
            proxy.relays.count == 1 ? "" : "s");
    relay_close_all(&proxy.relays);
    reactor_stop();
}

/* SIGTERM, SIGINT: stops accepting, lets requests in flight finish (up
 * to shutdown_timeout), closes connections waiting for a request, client
 * and backend ones alike (upstream_stop_pooling). The
 * reactor stops when the last relay is gone. A second signal stops at
 * once. */
static void stop(const char *why)
{
    double timeout = generation_current()->operations.shutdown_timeout;

    if (proxy.stopping) {
        log_msg("%s again: stopping now", why);
        relay_close_all(&proxy.relays);
        reactor_stop();
        return;
    }
    proxy.stopping = true;
    notify_stopping(); /* rsp alone: a worker sends nothing */
    listeners_stop(&proxy.listeners);
    log_msg("%s: stopping; %zu connection%s open, requests in flight get up to %g s", why,
            proxy.relays.count, proxy.relays.count == 1 ? "" : "s", timeout);
    if (timer_arm(&proxy.shutdown_timer, reactor_now() + timeout) == -1) {
        log_msg("out of memory arming the shutdown timer: stopping now");
        relay_close_all(&proxy.relays);
        reactor_stop();
        return;
    }
    upstream_stop_pooling();
    relay_drain_all(&proxy.relays);
}

/* A worker's SIGTERM or SIGINT: the master's (it stops, or `listen`
 * moved) and one sent to the worker itself (`pkill rsp` reaches every
 * process) each stop it gracefully, as nginx's workers do (the master
 * replaces one it did not stop); only a second from the same side means
 * "now", so that `pkill rsp` is one graceful stop, not two signals. */
static void worker_stop(int signo)
{
    bool *asked = proxy.p->signal_sender == proxy.master ? &proxy.stop_from_master : &proxy.stop_from_others;

    if (proxy.stopping && !*asked) {
        *asked = true;
        log_msg("%s: already stopping", strsignal(signo));
        return;
    }
    *asked = true;
    stop(strsignal(signo));
}

/* SIGHUP: reloads the config; HTTP/2 connections are then told to go
 * (GOAWAY, streams in flight finish), so that their clients' next
 * requests, on new connections, meet the new config. */
static void reload(void)
{
    unsigned before = generation_current()->generation;

    process_reload(proxy.p, proxy.worker != 0 ? &worker_reload : &alone_reload);
    if (generation_current()->generation != before)
        relay_reloaded(&proxy.relays);
}

void worker_signal(int signo)
{
    /* A reload is the master's: it reads the config for every worker. A
     * worker signalled directly (pkill -HUP rsp, systemctl kill -s HUP)
     * must not try one of its own. */
    if (signo == SIGHUP && proxy.worker != 0 && proxy.p->signal_sender != proxy.master) {
        log_msg("SIGHUP is for the master (PID %ld): ignored", (long)proxy.master);
        return;
    }
    if ((signo == SIGTERM || signo == SIGINT) && proxy.worker != 0) {
        worker_stop(signo);
        return;
    }
    switch (signo) {
    case SIGHUP:
        if (proxy.stopping)
            log_msg("SIGHUP ignored: rsp is stopping");
        else
            reload();
        break;
    case SIGUSR1:
        access_log_reopen();
        break;
    default:
        stop(strsignal(signo));
        break;
    }
}

int worker_serve(struct process *p, struct listen_fds fds, bool shared, bool announce)
{
    int status;

    proxy.p = p;
    timer_init(&proxy.shutdown_timer, shutdown_timer_fired, NULL);
    /* The certificates the ACME client keeps, served from here on. */
    if (generation_serve() == -1 || listeners_start(&proxy.listeners, fds, shared) == -1)
        return 1;
    status = process_run(announce);
    /* Everything is freed, so that a leak checker at exit sees only real
     * leaks. The last generation takes its backends with it: their health
     * checks and idle connections. */
    relay_close_all(&proxy.relays);
    timer_disarm(&proxy.shutdown_timer);
    listeners_stop(&proxy.listeners);
    return status;
}

/* The master's epoll instance, its timers and what it deferred. */
static int forget_reactor(void)
{
    return reactor_after_fork();
}

/* The master's signalfd (the worker opens its own). */
static int forget_signals(void)
{
    if (close(proxy.p->signals.fd) == -1)
        log_errno("close the master's signalfd");
    return 0;
}

static int forget_status(void)
{
    status_forget(proxy.p->status);
    proxy.p->status = NULL;
    return 0;
}

static int forget_health_checks(void)
{
    for (struct backend *b = backend_first(); b != NULL; b = b->registry_next)
        health_check_forget(b);
    return 0;
}

/* The ACME client's request and lock (the master runs the client). */
static int forget_acme_client(void)
{
    acme_client_forget();
    return 0;
}

/* The other workers' sockets: this one keeps proxy.mine. */
static int forget_other_sockets(void)
{
    struct sockets *s = &proxy.p->sockets;

    for (size_t i = 0; i < s->count; i++) {
        struct listen_fds other = s->fds[i];
        if (other.plain != proxy.mine.plain && close(other.plain) == -1)
            log_errno("close another worker's socket");
        if (other.tls != -1 && other.tls != proxy.mine.tls && close(other.tls) == -1)
            log_errno("close another worker's socket (HTTPS)");
    }
    s->count = 0;
    return 0;
}

/* The master's table of workers. */
static int forget_workers(void)
{
    master_forget();
    return 0;
}

/* What a worker just forked must forget of its master, in this order;
 * each step returns 0, or -1 if the worker cannot go on. It keeps its
 * own sockets, the config generation and the shared counters. */
static int (*const forget_master[])(void) = {
    forget_reactor,     forget_signals,       forget_status, forget_health_checks,
    forget_acme_client, forget_other_sockets, forget_workers,
};

void worker_run(struct process *p, int slot, int row, struct listen_fds fds, bool shared, pid_t master)
{
    char tag[32];
    int status;

    snprintf(tag, sizeof tag, "worker %d", slot);
    log_set_tag(tag);
    proctitle_set("rsp: worker process %d", slot);
    proxy.p = p;
    proxy.worker = slot;
    proxy.master = master;
    proxy.mine = fds;
    stats_use_row(row);
    /* A worker must not outlive its master: nobody would stop it. */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) == -1)
        log_errno("prctl(PR_SET_PDEATHSIG)");
    /* The master may have died between fork and prctl: then nobody sends
     * that signal, and the worker must go by itself. */
    if (getppid() != master)
        _exit(1);
    /* Its own process group: a Ctrl-C at a terminal reaches the master
     * alone, which passes the stop on, once. */
    if (setpgid(0, 0) == -1)
        log_errno("setpgid");
    for (size_t i = 0; i < sizeof forget_master / sizeof forget_master[0]; i++)
        if (forget_master[i]() == -1)
            _exit(1);
    if (process_watch_signals(p, false, worker_signal) == -1)
        _exit(1);
    status = worker_serve(p, fds, shared, false);
    process_clean_up(p);
    limit_close();
    stats_close();
    config_share_close();
    exit(status);
}
