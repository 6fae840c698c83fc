/* rsp.c -- stage 18: the backend pool and closing, measured (a backend
 * keeps as many idle connections as were in use at once lately, with
 * backend_keepalive as the floor; a client connection closes at once
 * after its answer unless the client may still be sending). As in stage
 * 17 slow clients cost the backend nothing (request bodies read whole
 * before a backend is chosen, responses read as fast as the backend sends
 * them, what memory cannot hold in temporary files: request_buffering,
 * response_buffering, max_body_size, body_min_rate, temp_dir). As in
 * stage 16 it takes the fast path (fewer system calls,
 * response bodies spliced: splice); as in stages 14 and 15
 * it serves HTTPS (tls, redirect_http, hsts, acme_webroot) beside plain
 * HTTP; as in stages 12 and 13 it shows what it does (status_listen) and
 * uses every core (workers); as in stages 10 and 11 it is reloaded
 * without dropping anyone (SIGHUP), stopped gracefully (SIGTERM, SIGINT),
 * its access log reopened (SIGUSR1); it checks a config (-t) and drops
 * root (user).
 *
 * With one worker (the default) this process serves clients itself; with
 * more it becomes the master (master.c) and each worker it forks runs
 * worker_run below: the same loop, the same signals.
 *
 * Usage: rsp CONFIG.lua | rsp -t CONFIG.lua | rsp -v | rsp -h (rsp(8)) */
#include "access_log.h"
#include "clock.h"
#include "config.h"
#include "generation.h"
#include "listener.h"
#include "log.h"
#include "net.h"
#include "health.h"
#include "privileges.h"
#include "process.h"
#include "reactor.h"
#include "relay.h"
#include "stats.h"
#include "timer.h"
#include "version.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

static const char *balance_name(const struct pool *pool)
{
    return pool->balance == BALANCE_LEAST_CONN ? "least_conn" : "round_robin";
}

/* Says what we serve: one line for the listener, one per pool and site,
 * one for route. */
void log_listening(const struct config *c)
{
    log_msg("listening on %s port %s", c->listen_host ? c->listen_host : "every address,",
            c->listen_port);
    if (c->tls.context != NULL)
        log_msg("listening for HTTPS on %s port %s", c->tls.listen_host ? c->tls.listen_host : "every address,",
                c->tls.listen_port);
}

static void log_startup(const struct config *config)
{
    log_listening(config);
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


/* The listeners of one process: plain HTTP, and HTTPS if there is `tls`. */
struct listeners {
    struct listener *plain;
    struct listener *tls;
};

/* What the signals act on. */
static struct {
    struct process p;
    struct relay_set relays;
    struct listeners listeners; /* both NULL once stopping */
    struct epoll_event_handler signals;
    struct timer shutdown_timer;
    bool stopping;
    int worker;                 /* this process is worker N (1, 2, ...); 0: rsp alone */
    bool master;                /* this process keeps workers: signals go to master.c */
} proxy;

static bool same_address(const char *host_a, const char *port_a, const char *host_b, const char *port_b)
{
    if ((host_a == NULL) != (host_b == NULL))
        return false;
    return strcmp(port_a, port_b) == 0 && (host_a == NULL || strcmp(host_a, host_b) == 0);
}

bool same_listen(const struct config *a, const struct config *b)
{
    if ((a->tls.context == NULL) != (b->tls.context == NULL))
        return false;
    return same_address(a->listen_host, a->listen_port, b->listen_host, b->listen_port) &&
           (a->tls.context == NULL || same_address(a->tls.listen_host, a->tls.listen_port,
                                                   b->tls.listen_host, b->tls.listen_port));
}

/* A listening socket for host:port: the one `had` is, if it listens
 * there already (as a duplicate: the old one may be closed while this
 * one serves on), else a new one. */
static int open_one(const char *host, const char *port, bool reuseport, const char *had_host,
                    const char *had_port, int had)
{
    int fd;

    if (had == -1 || !same_address(host, port, had_host, had_port))
        return net_listen_reuseport(host, port, reuseport);
    fd = fcntl(had, F_DUPFD_CLOEXEC, 0);
    if (fd == -1)
        log_errno("dup listening socket");
    return fd;
}

int sockets_reopen(struct sockets *s, const struct config *c, size_t count, const struct config *was,
                   const struct sockets *had)
{
    s->count = 0;
    while (s->count < count) {
        struct listen_fds old = { -1, -1 }, fds = { -1, -1 };

        if (was != NULL && s->count < had->count)
            old = had->fds[s->count];
        fds.plain = open_one(c->listen_host, c->listen_port, count > 1, was ? was->listen_host : NULL,
                             was ? was->listen_port : NULL, old.plain);
        if (fds.plain != -1 && c->tls.context != NULL) {
            fds.tls = open_one(c->tls.listen_host, c->tls.listen_port, count > 1,
                               was ? was->tls.listen_host : NULL, was ? was->tls.listen_port : NULL,
                               was && was->tls.context ? old.tls : -1);
            if (fds.tls == -1 && close(fds.plain) == -1)
                log_errno("close listening socket");
        }
        if (fds.plain == -1 || (c->tls.context != NULL && fds.tls == -1)) {
            sockets_close(s);
            return -1;
        }
        s->fds[s->count++] = fds;
    }
    return 0;
}

int sockets_open(struct sockets *s, const struct config *c, size_t count)
{
    return sockets_reopen(s, c, count, NULL, NULL);
}

void sockets_close(struct sockets *s)
{
    for (size_t i = 0; i < s->count; i++) {
        if (close(s->fds[i].plain) == -1)
            log_errno("close listening socket");
        if (s->fds[i].tls != -1 && close(s->fds[i].tls) == -1)
            log_errno("close listening socket (HTTPS)");
    }
    s->count = 0;
}

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

int apply_access_log(const char *path, const struct config *c)
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

int apply_status(struct process *p, const struct config *c)
{
    const struct scaling *s = &c->scaling;
    struct status_server *next;

    if (s->status_host == NULL) {
        status_stop(p->status);
        p->status = NULL;
        return 0;
    }
    if (p->status != NULL && status_listens_on(p->status, s->status_host, s->status_port))
        return 0;
    next = status_start(s->status_host, s->status_port, &p->facts);
    if (next == NULL)
        return -1;
    status_stop(p->status);
    p->status = next;
    return 0;
}

void reload_refused(struct process *p, struct config *next)
{
    if (next != NULL)
        config_release(next);
    p->facts.reloads_failed++;
    log_msg("reload failed: %s is refused, generation %u keeps serving", p->config_path,
            generation_current()->generation);
}

/* A worker's reload: the master has read the file and found it good; the
 * worker loads the same bytes (config_text.c) into a Lua state of its
 * own. The listening sockets, the status listener and the health checks
 * are the master's business. */
static void worker_reload(void)
{
    struct config *current = generation_current(), *next = NULL;
    char *text;
    size_t length;

    if (config_share_take(&text, &length) == 0) {
        next = config_open_text(proxy.p.config_path, text, length);
        free(text);
    }
    if (next == NULL || !same_listen(current, next) || apply_access_log(proxy.p.config_path, next) == -1) {
        if (next != NULL)
            config_release(next);
        log_msg("reload failed: generation %u keeps serving", current->generation);
        return;
    }
    log_msg("config reloaded: generation %u", generation_install(next, false));
}

/* SIGHUP: reads the config file again. Anything wrong (the file, a
 * setting, a port that cannot be had, a log that cannot be opened) and
 * the running generation keeps serving; otherwise the new one takes the
 * next request, and requests in flight finish on theirs. */
static void reload(void)
{
    struct config *current = generation_current(), *next;
    struct listeners listeners = { NULL, NULL };
    struct sockets sockets = { .count = 0 };
    bool moved = false;

    if (proxy.worker != 0) {
        worker_reload();
        return;
    }
    log_msg("SIGHUP: reloading the config");
    next = config_open(proxy.p.config_path);
    if (next == NULL) {
        reload_refused(&proxy.p, NULL);
        return;
    }
    if (next->scaling.workers != current->scaling.workers)
        log_msg("setting 'workers' changed: that takes a restart; the rest of the config is reloaded");
    if (!same_listen(current, next)) {
        /* The old sockets stay until the new ones work: a typo in
         * `listen` must not leave rsp deaf. One that did not move is
         * carried over (reopening its port would fail: it is taken). */
        struct sockets had = { .fds = { { listener_socket(proxy.listeners.plain),
                                          proxy.listeners.tls ? listener_socket(proxy.listeners.tls) : -1 } },
                               .count = 1 };
        if (sockets_reopen(&sockets, next, 1, current, &had) == -1 ||
            listeners_start(&listeners, sockets.fds[0], false) == -1) {
            reload_refused(&proxy.p, next);
            return;
        }
        moved = true;
    }
    if (apply_access_log(proxy.p.config_path, next) == -1 || apply_status(&proxy.p, next) == -1) {
        if (moved)
            listeners_stop(&listeners);
        reload_refused(&proxy.p, next);
        return;
    }
    if ((next->operations.user == NULL) != (current->operations.user == NULL) ||
        (next->operations.user != NULL && strcmp(next->operations.user, current->operations.user) != 0))
        log_msg("setting 'user' changed: that takes a restart; the rest of the config is reloaded");
    if (moved) {
        listeners_stop(&proxy.listeners);
        proxy.listeners = listeners;
        log_listening(next);
    }
    proxy.p.facts.reloads_ok++;
    proxy.p.facts.loaded_at = clock_wall();
    log_msg("reloaded %s: generation %u", proxy.p.config_path, generation_install(next, true));
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
    listeners_stop(&proxy.listeners);
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
        if (proxy.master) {
            master_signal((int)info.ssi_signo);
            continue;
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

/* Routes SIGTERM, SIGINT, SIGHUP and SIGUSR1 (and for a master, SIGCHLD)
 * to the signalfd. Returns 0, or -1 after logging. */
static int watch_signals(bool master)
{
    struct epoll_event_handler *handler = &proxy.signals;
    sigset_t signals;

    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGHUP);
    sigaddset(&signals, SIGUSR1);
    if (master)
        sigaddset(&signals, SIGCHLD);
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

/* Prints the usage on out and returns status: on stdout with 0 when it
 * was asked for (-h), on stderr with 2 after a wrong command line. */
static int usage(FILE *out, int status)
{
    fprintf(out, "usage: rsp CONFIG.lua        run with this config\n"
                 "       rsp -t CONFIG.lua     check the config and exit (0: ok, 1: not)\n"
                 "       rsp -v, --version     print the version and exit\n"
                 "       rsp -h, --help        print this help and exit\n"
                 "signals: HUP reloads the config, TERM or INT stops gracefully (a second one\n"
                 "at once), USR1 reopens the access log. More: man rsp, man rsp.lua.\n");
    return status;
}

/* Sets up this process to serve clients on fds and runs until it stops.
 * With announce, prints the Started line once the listeners are up (what
 * scripts and the tests wait for); a worker leaves that to its master.
 * Returns the exit status. */
static int serve(struct listen_fds fds, bool shared, bool announce)
{
    int status;

    if (listeners_start(&proxy.listeners, fds, shared) == -1)
        return 1;
    if (announce) {
        printf("Started. Listening on port %s.\n", generation_current()->listen_port);
        fflush(stdout);
    }
    status = reactor_run() == 0 ? 0 : 1;
    if (status == 0)
        log_msg("stopped");
    /* Everything is freed, so that a leak checker at exit sees only real
     * leaks. The last generation takes its backends with it: their health
     * checks and idle connections. */
    relay_close_all(&proxy.relays);
    timer_disarm(&proxy.shutdown_timer);
    listeners_stop(&proxy.listeners);
    return status;
}

/* Releases what main set up, in reverse. */
static void clean_up(void)
{
    struct backend *b;

    generation_clear();
    status_stop(proxy.p.status);
    proxy.p.status = NULL;
    access_log_close();
    if (reactor_remove(&proxy.signals) == -1 || close(proxy.signals.fd) == -1)
        log_errno("closing the signalfd");
    for (b = backend_first(); b != NULL; b = b->registry_next)
        health_check_stop(b);
    reactor_close();
}

void worker_run(int slot, int row, struct listen_fds fds, bool shared, pid_t master)
{
    char tag[32];
    struct backend *b;
    int status;

    snprintf(tag, sizeof tag, "worker %d", slot);
    log_set_tag(tag);
    proxy.worker = slot;
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
    /* What the master watched is the master's: its epoll instance, its
     * timers, the status listener, the health checks, the other
     * workers' sockets. This process keeps fds and the config. */
    if (reactor_after_fork() == -1)
        _exit(1);
    if (close(proxy.signals.fd) == -1)
        log_errno("close the master's signalfd");
    status_forget(proxy.p.status);
    proxy.p.status = NULL;
    for (b = backend_first(); b != NULL; b = b->registry_next)
        health_check_forget(b);
    for (size_t i = 0; i < proxy.p.sockets.count; i++) {
        struct listen_fds other = proxy.p.sockets.fds[i];
        if (other.plain != fds.plain && close(other.plain) == -1)
            log_errno("close another worker's socket");
        if (other.tls != -1 && other.tls != fds.tls && close(other.tls) == -1)
            log_errno("close another worker's socket (HTTPS)");
    }
    proxy.p.sockets.count = 0;
    proxy.master = false;
    master_forget();
    if (watch_signals(false) == -1)
        _exit(1);
    timer_init(&proxy.shutdown_timer, shutdown_timer_fired, NULL);
    status = serve(fds, shared, false);
    clean_up();
    stats_close();
    config_share_close();
    exit(status);
}

int main(int argc, char *argv[])
{
    struct config *config;
    unsigned long long fd_limit;
    int status = 1;

    if (argc == 2 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--version") == 0)) {
        printf("rsp " RSP_VERSION "\n");
        return 0;
    }
    if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0))
        return usage(stdout, 0);
    if (argc == 3 && strcmp(argv[1], "-t") == 0)
        return check_config(argv[2]);
    if (argc != 2 || argv[1][0] == '-')
        return usage(stderr, 2);
    proxy.p.config_path = argv[1];
    /* The shared counters come first: the config finds its backends' and
     * sites' slots in them, and every worker forked later shares them. */
    if (stats_init() == -1)
        return 1;
    config = config_open(proxy.p.config_path);
    if (config == NULL)
        goto out_stats;

    /* A client that disconnects while we write to it must give us EPIPE,
     * not kill the whole proxy with SIGPIPE. */
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
        log_errno("signal");
        goto out_config;
    }
    /* A temporary file past the file size limit must give us EFBIG, and
     * the exchange falls back to backpressure (buffering.c). */
    if (signal(SIGXFSZ, SIG_IGN) == SIG_ERR) {
        log_errno("signal");
        goto out_config;
    }
    fd_limit = privileges_raise_fd_limit();
    if (reactor_init() == -1)
        goto out_config;
    timer_init(&proxy.shutdown_timer, shutdown_timer_fired, NULL);
    if (watch_signals(config->scaling.workers > 1) == -1)
        goto out_reactor;
    if (sockets_open(&proxy.p.sockets, config,
                     config->scaling.workers > 1 && config->scaling.reuseport ? config->scaling.workers : 1) == -1)
        goto out_signals;
    proxy.p.facts.started_at = proxy.p.facts.loaded_at = clock_wall();
    proxy.p.facts.workers = config->scaling.workers;
    /* As root, the log is opened and the ports bound before root is given
     * up (the directory may be root's); reopening later needs the user's
     * rights. */
    if (apply_access_log(proxy.p.config_path, config) == -1 || apply_status(&proxy.p, config) == -1)
        goto out_sockets;
    if (config->operations.user != NULL) {
        /* The log file becomes the user's, as nginx does it: after a
         * SIGUSR1 rsp opens it again with that user's rights. */
        long uid = privileges_future_uid(config->operations.user);
        if (uid != -1)
            access_log_give_to((uid_t)uid);
        if (privileges_drop(config->operations.user) == -1)
            goto out_sockets;
    }
    log_startup(config);
    log_msg("file descriptor limit: %llu", fd_limit);
    /* The first generation: from here on the config belongs to it. */
    generation_install(config, true);
    config = NULL;

    if (generation_current()->scaling.workers > 1) {
        proxy.master = true;
        status = config_share_init() == 0 ? master_run(&proxy.p) : 1;
        sockets_close(&proxy.p.sockets);
        config_share_close();
    } else {
        struct listen_fds fds = proxy.p.sockets.fds[0];

        proxy.p.sockets.count = 0; /* the listeners own them now */
        status = serve(fds, false, true);
    }
    clean_up();
    stats_close();
    return status;

out_sockets:
    status_stop(proxy.p.status);
    access_log_close();
    sockets_close(&proxy.p.sockets);
out_signals:
    if (reactor_remove(&proxy.signals) == -1 || close(proxy.signals.fd) == -1)
        log_errno("closing the signalfd");
out_reactor:
    reactor_close();
out_config:
    if (config != NULL)
        config_release(config);
out_stats:
    stats_close();
    return status;
}
