/* rsp.c -- stage 08: rsp bounds every wait with a timeout, and checks
 * its backends' health by itself.
 *
 * Usage: rsp CONFIG.lua */
#include "config.h"
#include "generation.h"
#include "listener.h"
#include "log.h"
#include "net.h"
#include "reactor.h"
#include "relay.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
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

/* SIGTERM and SIGINT arrive as data on a signalfd, watched like any socket:
 * so they are handled between two events, never in the middle of one. */
static void stop_signal_handle(struct epoll_event_handler *self, uint32_t events)
{
    struct signalfd_siginfo info;
    ssize_t n = read(self->fd, &info, sizeof info);

    (void)events;
    if (n == -1 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n == (ssize_t)sizeof info)
        log_msg("%s: stopping", strsignal((int)info.ssi_signo));
    reactor_stop();
}

/* Routes SIGTERM and SIGINT to handler. Returns 0, or -1 after logging. */
static int watch_stop_signals(struct epoll_event_handler *handler)
{
    sigset_t signals;

    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    /* Blocked signals stay pending, where the signalfd can read them. */
    if (sigprocmask(SIG_BLOCK, &signals, NULL) == -1) {
        log_errno("sigprocmask");
        return -1;
    }
    handler->fd = signalfd(-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC);
    handler->handle = stop_signal_handle;
    handler->closure = NULL;
    if (handler->fd == -1 || reactor_add(handler, EPOLLIN) == -1) {
        log_errno("signalfd");
        if (handler->fd != -1)
            close(handler->fd);
        return -1;
    }
    return 0;
}

int main(int argc, char *argv[])
{
    struct config *config;
    struct relay_set relays = { NULL, 0, 0 };
    struct epoll_event_handler stopper;
    struct listener *listener;
    int listen_fd, status = 1;

    if (argc != 2) {
        fprintf(stderr, "usage: rsp CONFIG.lua\n");
        return 2;
    }
    config = config_open(argv[1]);
    if (config == NULL)
        return 1;

    /* A client that disconnects while we write to it must give us EPIPE,
     * not kill the whole proxy with SIGPIPE. */
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
        log_errno("signal");
        goto out_config;
    }
    if (reactor_init() == -1)
        goto out_config;
    if (watch_stop_signals(&stopper) == -1)
        goto out_reactor;
    listen_fd = net_listen(config->listen_host, config->listen_port);
    if (listen_fd == -1)
        goto out_signals;
    listener = listener_start(listen_fd, &relays);
    if (listener == NULL) {
        close(listen_fd);
        goto out_signals;
    }
    log_startup(config);
    /* The first generation: from here on the config belongs to it. */
    generation_install(config);
    config = NULL;
    printf("Started. Listening on port %s.\n", generation_current()->listen_port);
    fflush(stdout);

    status = reactor_run() == 0 ? 0 : 1;

    /* Stopping: every connection is closed where it stands (chapter 10
     * lets them finish first), and everything is freed, so that a leak
     * checker at exit sees only real leaks. The last generation takes its
     * backends with it: their health checks and idle connections. */
    relay_close_all(&relays);
    generation_clear();
    listener_stop(listener);
out_signals:
    if (reactor_remove(&stopper) == -1 || close(stopper.fd) == -1)
        log_errno("closing the signalfd");
out_reactor:
    reactor_close();
out_config:
    if (config != NULL)
        config_release(config);
    return status;
}
