/* process.c -- what rsp alone, the master and the workers share: the
 * listening sockets, the access log and the status listener a config
 * asks for, the signalfd, and the reload, one path for all three (each
 * brings its own few steps: struct reload_ops in process.h). */
#include "process.h"

#include "access_log.h"
#include "backend.h"
#include "clock.h"
#include "config.h"
#include "generation.h"
#include "health.h"
#include "log.h"
#include "net.h"
#include "notify.h"
#include "reactor.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

void log_listening(const struct config *c)
{
    log_msg("listening on %s port %s", c->listen_host ? c->listen_host : "every address,",
            c->listen_port);
    if (c->tls.context != NULL)
        log_msg("listening for HTTPS on %s port %s", c->tls.listen_host ? c->tls.listen_host : "every address,",
                c->tls.listen_port);
}

static bool same_address(const char *host_a, const char *port_a, const char *host_b, const char *port_b)
{
    if ((host_a == NULL) != (host_b == NULL))
        return false;
    return strcmp(port_a, port_b) == 0 && (host_a == NULL || strcmp(host_a, host_b) == 0);
}

/* True if both configs listen on the same addresses and ports, plain and
 * HTTPS. */
static bool same_listen(const struct config *a, const struct config *b)
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

/* Opens the log at file into *log (unless open already), or says why
 * not, naming the config at path and the setting. Returns 0 or -1. */
static int open_log(const char *path, const char *setting, const char *file, struct access_log **log)
{
    if (*log != NULL)
        return 0;
    *log = access_log_open(file);
    if (*log != NULL)
        return 0;
    fprintf(stderr, "rsp: %s: setting '%s': cannot open %s: %s\n", path, setting, file, strerror(errno));
    return -1;
}

int apply_access_log(const char *path, struct config *c)
{
    struct operations *o = &c->operations;

    if (o->access_log != NULL && open_log(path, "access_log", o->access_log, &o->log) == -1)
        return -1;
    o->logging = o->log != NULL;
    for (size_t i = 0; i < c->router.count; i++) {
        struct site *site = &c->router.sites[i];
        char setting[300];

        o->site_logs |= site->access_log != NULL || site->access_log_off;
        if (site->access_log == NULL)
            continue;
        snprintf(setting, sizeof setting, "sites[\"%s%s\"].access_log", site->wildcard ? "*" : "", site->name);
        if (open_log(path, setting, site->access_log, &site->log) == -1)
            return -1; /* what is open is closed with the config */
        o->logging = true;
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

/* Reads every signal waiting on the signalfd and hands each on. */
static void signal_handle(struct epoll_event_handler *self, uint32_t events)
{
    struct process *p = self->closure;
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
        p->signal_sender = (pid_t)info.ssi_pid;
        p->on_signal((int)info.ssi_signo);
    }
}

int process_watch_signals(struct process *p, bool master, void (*on_signal)(int signo))
{
    struct epoll_event_handler *handler = &p->signals;
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
    p->on_signal = on_signal;
    handler->fd = signalfd(-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC);
    handler->handle = signal_handle;
    handler->closure = p;
    if (handler->fd == -1 || reactor_add(handler, EPOLLIN) == -1) {
        log_errno("signalfd");
        if (handler->fd != -1)
            close(handler->fd);
        return -1;
    }
    return 0;
}

void process_unwatch_signals(struct process *p)
{
    if (reactor_remove(&p->signals) == -1 || close(p->signals.fd) == -1)
        log_errno("closing the signalfd");
}

/* Counts a reload that failed and says so: the generation in service
 * keeps serving. */
static void reload_refused(struct process *p, struct config *next)
{
    if (next != NULL)
        config_release(next);
    p->facts.reloads_failed++;
    log_msg("reload failed: %s is refused, generation %u keeps serving", p->config_path,
            generation_current()->generation);
}

/* A reload that failed: refused and counted, or for a follower (whose
 * master counted it) just said. */
static void reload_failed(struct process *p, const struct reload_ops *ops, struct config *next)
{
    if (!ops->follower) {
        reload_refused(p, next);
        return;
    }
    if (next != NULL)
        config_release(next);
    log_msg("reload failed: generation %u keeps serving", generation_current()->generation);
}

/* Two settings' texts (NULL: not set) are the same. */
static bool same_text(const char *a, const char *b)
{
    if ((a == NULL) != (b == NULL))
        return false;
    return a == NULL || strcmp(a, b) == 0;
}

/* process_reload, between the notifications. */
static void reload(struct process *p, const struct reload_ops *ops)
{
    struct config *current = generation_current(), *next;
    bool moved;

    if (!ops->follower)
        log_msg("SIGHUP: reloading the config");
    next = ops->load(p);
    if (next == NULL) {
        reload_failed(p, ops, NULL);
        return;
    }
    if (ops->restart_settings != NULL)
        ops->restart_settings(current, next);
    /* The old sockets stay until the new ones work: a typo in `listen`
     * must not leave rsp deaf. */
    moved = !same_listen(current, next);
    if (moved && (ops->open_moved == NULL || ops->open_moved(p, current, next) == -1)) {
        reload_failed(p, ops, next);
        return;
    }
    if (apply_access_log(p->config_path, next) == -1 || (!ops->follower && apply_status(p, next) == -1)) {
        if (moved)
            ops->close_moved(p);
        reload_failed(p, ops, next);
        return;
    }
    if (ops->follower) {
        log_msg("config reloaded: generation %u", generation_install(next, false));
        return;
    }
    if (!same_text(current->operations.user, next->operations.user))
        log_msg("setting 'user' changed: that takes a restart; the rest of the config is reloaded");
    if (!same_text(current->operations.pid_file, next->operations.pid_file))
        log_msg("setting 'pid_file' changed: that takes a restart; the rest of the config is reloaded");
    if (moved && ops->use_moved != NULL)
        ops->use_moved(p, next);
    p->facts.reloads_ok++;
    p->facts.loaded_at = clock_wall();
    log_msg("reloaded %s: generation %u", p->config_path, generation_install(next, true));
    if (ops->installed != NULL)
        ops->installed(p, next, moved);
}

void process_reload(struct process *p, const struct reload_ops *ops)
{
    /* systemd hears of the master's reload (a worker sends nothing). */
    notify_reloading();
    reload(p, ops);
    notify_ready();
}

int process_run(bool announce)
{
    int status;

    if (announce) {
        /* A log line like any other (timestamped, on stderr: the journal
         * under systemd); tests and demos wait for its words. */
        log_msg("Started. Listening on port %s.", generation_current()->listen_port);
        notify_ready();
    }
    status = reactor_run() == 0 ? 0 : 1;
    if (status == 0)
        log_msg("stopped");
    return status;
}

void process_clean_up(struct process *p)
{
    struct backend *b;

    generation_clear();
    status_stop(p->status);
    p->status = NULL;
    access_log_close();
    process_unwatch_signals(p);
    for (b = backend_first(); b != NULL; b = b->registry_next)
        health_check_stop(b);
    reactor_close();
}
