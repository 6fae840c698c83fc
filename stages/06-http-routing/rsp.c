/* rsp.c -- stage 06: rsp speaks HTTP: it parses each request head,
 * routes it by Host to a site's backends, and adds forwarded headers.
 *
 * Usage: rsp CONFIG.lua */
#include "config.h"
#include "listener.h"
#include "log.h"
#include "net.h"
#include "reactor.h"

#include <signal.h>
#include <stdio.h>

static const char *balance_name(const struct pool *pool)
{
    return pool->balance == BALANCE_LEAST_CONN ? "least_conn" : "round_robin";
}

/* Says what we serve: one line for the listener, one per site. */
static void log_startup(const struct config *config)
{
    log_msg("listening on %s port %s", config->listen_host ? config->listen_host : "every address,",
            config->listen_port);
    for (size_t i = 0; i < config->router.count; i++) {
        const struct site *site = &config->router.sites[i];
        log_msg("site %s%s: %zu backend%s, %s", site->wildcard ? "*" : "", site->name,
                site->pool.count, site->pool.count == 1 ? "" : "s", balance_name(&site->pool));
    }
    if (config->router.fallback != NULL)
        log_msg("default site: %zu backend%s, %s", config->default_pool.count,
                config->default_pool.count == 1 ? "" : "s", balance_name(&config->default_pool));
    else
        log_msg("no default site: requests for other hosts get 421");
}

int main(int argc, char *argv[])
{
    struct config config;
    int listen_fd;

    if (argc != 2) {
        fprintf(stderr, "usage: rsp CONFIG.lua\n");
        return 2;
    }
    if (config_load(argv[1], &config) == -1)
        return 1;

    /* A client that disconnects while we write to it must give us EPIPE,
     * not kill the whole proxy with SIGPIPE. */
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
        log_errno("signal");
        return 1;
    }
    if (reactor_init() == -1)
        return 1;
    listen_fd = net_listen(config.listen_host, config.listen_port);
    if (listen_fd == -1)
        return 1;
    if (listener_start(listen_fd, &config) == -1)
        return 1;
    log_startup(&config);
    printf("Started. Listening on port %s.\n", config.listen_port);
    fflush(stdout);

    reactor_run();
    return 1; /* reactor_run returns only when epoll itself fails */
}
