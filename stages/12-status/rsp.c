/* rsp.c -- stage 12: rsp shows what it does, on a status listener of its
 * own (status_listen): a page, /status.json and /metrics, from counters in
 * shared memory (stats.c). As in stage 11 it is reloaded without dropping
 * anyone (SIGHUP), stopped gracefully (SIGTERM, SIGINT), its access log
 * reopened (SIGUSR1); it checks a config (-t) and drops root (user).
 *
 * Usage: rsp CONFIG.lua | rsp -t CONFIG.lua | rsp -v */
#include "access_log.h"
#include "clock.h"
#include "config.h"
#include "generation.h"
#include "listener.h"
#include "log.h"
#include "net.h"
#include "privileges.h"
#include "reactor.h"
#include "relay.h"
#include "stats.h"
#include "status.h"
#include "timer.h"
#include "version.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

static const char *balance_name(const struct pool *pool)
{
    return pool->balance == BALANCE_LEAST_CONN ? "least_conn" : "round_robin";
}

/* Says what we serve: one line for the listener, one per pool and site,
 * one for route. */
static void log_startup(const struct config *config)
{
    log_msg("listening on %s port %s", config->listen_host ? config->listen_host : "every address,",
            config->listen_port);
    for (size_t i = 0; i < config->pool_count; i++) {
        const struct named_pool *named = &config->pools[i];
        log_msg("pool %s: %zu backend%s, %s", named->name, named->pool.count,
                named->pool.count == 1 ? "" : "s", balance_name(&named->pool));
    }
    for (size_t i = 0; i < config->router.count; i++) {
        const struct site *site = &config->router.sites[i];
        const char *pool_name = NULL;

        for (size_t j = 0; j < config->pool_count; j++)
            if (site->pool == &config->pools[j].pool)
                pool_name = config->pools[j].name;
        if (pool_name != NULL)
            log_msg("site %s%s: pool %s", site->wildcard ? "*" : "", site->name, pool_name);
        else
            log_msg("site %s%s: %zu backend%s, %s", site->wildcard ? "*" : "", site->name,
                    site->pool->count, site->pool->count == 1 ? "" : "s", balance_name(site->pool));
    }
    if (config->router.fallback != NULL)
        log_msg("default site: %zu backend%s, %s", config->default_pool.count,
                config->default_pool.count == 1 ? "" : "s", balance_name(&config->default_pool));
    else if (config->route.L != NULL)
        log_msg("no default site: a request that route leaves to Host and no site takes gets 421");
    else
        log_msg("no default site: requests for other hosts get 421");
    if (config->route.L != NULL)
        log_msg("route(req) chooses for every request (time limit %g s)", config->route_time_limit);
}

/* What the signals act on. */
static struct {
    const char *config_path;
    struct relay_set relays;
    struct listener *listener;  /* NULL once stopping */
    struct epoll_event_handler signals;
    struct timer shutdown_timer;
    bool stopping;
    struct status_server *status; /* NULL: no status listener */
    struct status_facts facts;  /* what the status listener shows besides the counters */
} proxy;

/* True if both configs listen on the same address and port. */
static bool same_listen(const struct config *a, const struct config *b)
{
    if ((a->listen_host == NULL) != (b->listen_host == NULL))
        return false;
    return strcmp(a->listen_port, b->listen_port) == 0 &&
           (a->listen_host == NULL || strcmp(a->listen_host, b->listen_host) == 0);
}

/* Opens the access log c (loaded from path) asks for, or closes it if c
 * has none. Returns 0, or -1 after saying why, as a config error does. */
static int apply_access_log(const char *path, const struct config *c)
{
    if (c->operations.access_log == NULL) {
        access_log_close();
        return 0;
    }
    if (access_log_open(c->operations.access_log, c->operations.access_log_timed) == -1) {
        fprintf(stderr, "rsp: %s: setting 'access_log': cannot open %s: %s\n", path,
                c->operations.access_log, strerror(errno));
        return -1;
    }
    return 0;
}

/* Brings the status listener in line with c: started, moved (the new one
 * opened before the old one closes) or stopped. Returns 0, or -1 if the
 * new one could not be opened (the old one stays). */
static int apply_status(const struct config *c)
{
    const struct scaling *s = &c->scaling;
    struct status_server *next;

    if (s->status_host == NULL) {
        status_stop(proxy.status);
        proxy.status = NULL;
        return 0;
    }
    if (proxy.status != NULL && status_listens_on(proxy.status, s->status_host, s->status_port))
        return 0;
    next = status_start(s->status_host, s->status_port, &proxy.facts);
    if (next == NULL)
        return -1;
    status_stop(proxy.status);
    proxy.status = next;
    return 0;
}

/* SIGHUP: reads the config file again. Anything wrong (the file, a
 * setting, a port that cannot be had, a log that cannot be opened) and
 * the running generation keeps serving; otherwise the new one takes the
 * next request, and requests in flight finish on theirs. */
static void reload(void)
{
    struct config *current = generation_current(), *next;
    struct listener *listener = NULL;

    log_msg("SIGHUP: reloading the config");
    next = config_open(proxy.config_path);
    if (next == NULL)
        goto failed;
    if (!same_listen(current, next)) {
        /* The old socket stays until the new one works: a typo in `listen`
         * must not leave rsp deaf. */
        int fd = net_listen(next->listen_host, next->listen_port);
        if (fd == -1)
            goto failed;
        listener = listener_start(fd, &proxy.relays);
        if (listener == NULL) {
            close(fd);
            goto failed;
        }
    }
    if (apply_access_log(proxy.config_path, next) == -1 || apply_status(next) == -1) {
        if (listener != NULL)
            listener_stop(listener);
        goto failed;
    }
    if ((next->operations.user == NULL) != (current->operations.user == NULL) ||
        (next->operations.user != NULL && strcmp(next->operations.user, current->operations.user) != 0))
        log_msg("setting 'user' changed: that takes a restart; the rest of the config is reloaded");
    if (listener != NULL) {
        listener_stop(proxy.listener);
        proxy.listener = listener;
        log_msg("listening on %s port %s", next->listen_host ? next->listen_host : "every address,",
                next->listen_port);
    }
    proxy.facts.reloads_ok++;
    proxy.facts.loaded_at = clock_wall();
    log_msg("reloaded %s: generation %u", proxy.config_path, generation_install(next));
    return;

failed:
    if (next != NULL)
        config_release(next);
    proxy.facts.reloads_failed++;
    log_msg("reload failed: %s is refused, generation %u keeps serving", proxy.config_path,
            current->generation);
}

static void shutdown_timer_fired(struct timer *timer)
{
    (void)timer;
    log_msg("shutdown_timeout passed: closing %zu connection%s still open", proxy.relays.count,
            proxy.relays.count == 1 ? "" : "s");
    relay_close_all(&proxy.relays);
    reactor_stop();
}

/* SIGTERM, SIGINT: stops accepting, lets requests in flight finish (up
 * to shutdown_timeout), closes connections waiting for a request. The
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
    listener_stop(proxy.listener);
    proxy.listener = NULL;
    log_msg("%s: stopping; %zu connection%s open, requests in flight get up to %g s", why,
            proxy.relays.count, proxy.relays.count == 1 ? "" : "s", timeout);
    if (timer_arm(&proxy.shutdown_timer, reactor_now() + timeout) == -1) {
        log_msg("out of memory arming the shutdown timer: stopping now");
        relay_close_all(&proxy.relays);
        reactor_stop();
        return;
    }
    relay_drain_all(&proxy.relays);
}

/* Signals arrive as data on a signalfd, watched like any socket: so they
 * are handled between two events, never in the middle of one. */
static void signal_handle(struct epoll_event_handler *self, uint32_t events)
{
    struct signalfd_siginfo info;

    (void)events;
    for (;;) {
        ssize_t n = read(self->fd, &info, sizeof info);

        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1 && errno == EAGAIN)
            return;
        if (n != (ssize_t)sizeof info) {
            log_errno("reading the signalfd");
            return;
        }
        switch (info.ssi_signo) {
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
            stop(strsignal((int)info.ssi_signo));
            break;
        }
    }
}

/* Routes SIGTERM, SIGINT, SIGHUP and SIGUSR1 to the signalfd. Returns 0,
 * or -1 after logging. */
static int watch_signals(void)
{
    struct epoll_event_handler *handler = &proxy.signals;
    sigset_t signals;

    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGHUP);
    sigaddset(&signals, SIGUSR1);
    /* Blocked signals stay pending, where the signalfd can read them. */
    if (sigprocmask(SIG_BLOCK, &signals, NULL) == -1) {
        log_errno("sigprocmask");
        return -1;
    }
    handler->fd = signalfd(-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC);
    handler->handle = signal_handle;
    handler->closure = NULL;
    if (handler->fd == -1 || reactor_add(handler, EPOLLIN) == -1) {
        log_errno("signalfd");
        if (handler->fd != -1)
            close(handler->fd);
        return -1;
    }
    return 0;
}

/* rsp -t CONFIG: the config loads (and its access log can be opened). */
static int check_config(const char *path)
{
    struct config *c = config_open(path);
    int fd;

    if (c == NULL)
        return 1;
    /* As nginx -t does: a log that cannot be opened fails the check. */
    if (c->operations.access_log != NULL) {
        fd = open(c->operations.access_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
        if (fd == -1) {
            fprintf(stderr, "rsp: %s: setting 'access_log': cannot open %s: %s\n", path,
                    c->operations.access_log, strerror(errno));
            config_release(c);
            return 1;
        }
        if (close(fd) == -1)
            log_errno("close");
    }
    config_release(c);
    printf("rsp: %s: ok\n", path);
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: rsp CONFIG.lua    run\n"
                    "       rsp -t CONFIG.lua check the config and exit\n"
                    "       rsp -v            print the version\n");
    return 2;
}

int main(int argc, char *argv[])
{
    struct config *config;
    unsigned long long fd_limit;
    int listen_fd, status = 1;

    if (argc == 2 && strcmp(argv[1], "-v") == 0) {
        printf("rsp " RSP_VERSION "\n");
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "-t") == 0)
        return check_config(argv[2]);
    if (argc != 2 || argv[1][0] == '-')
        return usage();
    proxy.config_path = argv[1];
    /* The counters come first: the config finds its backends' and sites'
     * slots in them. They are in shared memory, ready for the worker
     * processes of chapter 13; one process uses one row of them. */
    if (stats_init() == -1)
        return 1;
    config = config_open(proxy.config_path);
    if (config == NULL) {
        stats_close();
        return 1;
    }

    /* A client that disconnects while we write to it must give us EPIPE,
     * not kill the whole proxy with SIGPIPE. */
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
        log_errno("signal");
        goto out_config;
    }
    fd_limit = privileges_raise_fd_limit();
    if (reactor_init() == -1)
        goto out_config;
    timer_init(&proxy.shutdown_timer, shutdown_timer_fired);
    if (watch_signals() == -1)
        goto out_reactor;
    listen_fd = net_listen(config->listen_host, config->listen_port);
    if (listen_fd == -1)
        goto out_signals;
    proxy.listener = listener_start(listen_fd, &proxy.relays);
    if (proxy.listener == NULL) {
        close(listen_fd);
        goto out_signals;
    }
    proxy.facts.started_at = proxy.facts.loaded_at = clock_wall();
    /* As root, the log is opened and the ports bound before root is given
     * up (the directory may be root's); reopening later needs the user's
     * rights. */
    if (apply_access_log(proxy.config_path, config) == -1 || apply_status(config) == -1)
        goto out_listener;
    if (config->operations.user != NULL) {
        /* The log file becomes the user's, as nginx does it: after a
         * SIGUSR1 rsp opens it again with that user's rights. */
        long uid = privileges_future_uid(config->operations.user);
        if (uid != -1)
            access_log_give_to((uid_t)uid);
        if (privileges_drop(config->operations.user) == -1)
            goto out_listener;
    }
    log_startup(config);
    log_msg("file descriptor limit: %llu", fd_limit);
    /* The first generation: from here on the config belongs to it. */
    generation_install(config);
    config = NULL;
    printf("Started. Listening on port %s.\n", generation_current()->listen_port);
    fflush(stdout);

    status = reactor_run() == 0 ? 0 : 1;
    if (status == 0)
        log_msg("stopped");

    /* Everything is freed, so that a leak checker at exit sees only real
     * leaks. The last generation takes its backends with it: their health
     * checks and idle connections. */
    relay_close_all(&proxy.relays);
    timer_disarm(&proxy.shutdown_timer);
    generation_clear();
out_listener:
    if (proxy.listener != NULL)
        listener_stop(proxy.listener);
    status_stop(proxy.status);
    proxy.status = NULL;
    access_log_close();
out_signals:
    if (reactor_remove(&proxy.signals) == -1 || close(proxy.signals.fd) == -1)
        log_errno("closing the signalfd");
out_reactor:
    reactor_close();
out_config:
    if (config != NULL)
        config_release(config);
    stats_close();
    return status;
}
