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
 * With one worker (the default) this process serves clients itself
 * (worker.c); with more it becomes the master (master.c) and each worker
 * it forks runs worker_run (worker.c): the same loop, the same signals.
 * What they all share, the reload first, is process.c's. This file reads
 * the command line and sets the process up.
 *
 * Usage: rsp CONFIG.lua | rsp -t CONFIG.lua | rsp -v | rsp -h (rsp(8)) */
#include "access_log.h"
#include "acme_client.h"
#include "clock.h"
#include "limit.h"
#include "config.h"
#include "fastcgi_script.h"
#include "generation.h"
#include "log.h"
#include "notify.h"
#include "pid_file.h"
#include "privileges.h"
#include "process.h"
#include "proctitle.h"
#include "reactor.h"
#include "stats.h"
#include "ticket_keys.h"
#include "version.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *balance_name(const struct pool *pool)
{
    return pool_balance_name(pool);
}

/* Says what we serve: one line for the listener, one per pool and site,
 * one for route. */
static void log_startup(const struct config *config)
{
    log_listening(config);
    for (size_t i = 0; i < config->pool_count; i++) {
        const struct named_pool *named = &config->pools[i];
        if (named->pool.root != NULL)
            log_msg("pool %s: files from %s", named->name, named->pool.root);
        else
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
        else if (site->pool->root != NULL)
            log_msg("site %s%s: files from %s", site->wildcard ? "*" : "", site->name, site->pool->root);
        else
            log_msg("site %s%s: %zu backend%s, %s", site->wildcard ? "*" : "", site->name,
                    site->pool->count, site->pool->count == 1 ? "" : "s", balance_name(site->pool));
        if (pool_name == NULL && site->pool->fastcgi != NULL) {
            const struct pool *scripts = &site->pool->fastcgi->pool;
            log_msg("site %s%s: scripts on %zu FastCGI backend%s, %s", site->wildcard ? "*" : "", site->name,
                    scripts->count, scripts->count == 1 ? "" : "s", balance_name(scripts));
        }
    }
    if (config->router.fallback != NULL && config->default_pool.root != NULL)
        log_msg("default site: files from %s", config->default_pool.root);
    else if (config->router.fallback != NULL)
        log_msg("default site: %zu backend%s, %s", config->default_pool.count,
                config->default_pool.count == 1 ? "" : "s", balance_name(&config->default_pool));
    else if (config->route.L != NULL)
        log_msg("no default site: a request that route leaves to Host and no site takes gets 421");
    else
        log_msg("no default site: requests for other hosts get 421");
    if (config->route.L != NULL)
        log_msg("route(req) chooses for every request (time limit %g s)", config->route_time_limit);
}

/* This process: what main sets up, which worker.c (serving clients) and
 * master.c (keeping workers) take over. */
static struct process process;

/* Started as root with `user`: a log file rsp creates becomes that
 * user's, group adm's (or the user's own group), 0640, as logrotate
 * creates the next ones. */
static void set_log_owner(const struct config *c)
{
    uid_t uid;
    gid_t gid;

    if (c->operations.user != NULL && privileges_log_owner(c->operations.user, &uid, &gid) == 0)
        access_log_set_owner(uid, gid);
}

/* rsp -t CONFIG: the config loads (and its access logs can be opened);
 * as root with `user`, that user can use its files. */
static int check_config(const char *path)
{
    struct config *c = config_open(path);

    if (c == NULL)
        return 1;
    /* As nginx -t does: a log that cannot be opened fails the check (a
     * file it creates is made as the start would make it). */
    set_log_owner(c);
    if (apply_access_log(path, c) == -1) {
        config_release(c);
        return 1;
    }
    if (config_check_user(path, c) == -1) {
        config_release(c);
        return 1;
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
    /* The master and the workers retitle themselves (ps shows which is
     * which): argv's memory is cleared for that first. */
    if (proctitle_init(argc, argv) == -1)
        return 1;
    notify_init();
    process.config_path = argv[1];
    /* The shared counters come first: the config finds its backends' and
     * sites' slots in them, and every worker forked later shares them. */
    if (stats_init() == -1)
        return 1;
    /* And limit_req's and limit_conn's table, one budget per client. */
    if (limit_init() == -1) {
        stats_close();
        return 1;
    }
    /* So are the session-ticket keys: a worker resumes what another issued. */
    if (ticket_keys_init() == -1)
        goto out_stats;
    config = config_open(process.config_path);
    if (config == NULL)
        goto out_stats;
    /* What rsp -t checks: the files, as the user rsp becomes below. */
    if (config_check_user(process.config_path, config) == -1)
        goto out_config;
    if (config->operations.pid_file != NULL && pid_file_check(config->operations.pid_file) == -1)
        goto out_config;

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
    if (process_watch_signals(&process, config->scaling.workers > 1,
                              config->scaling.workers > 1 ? master_signal : worker_signal) == -1)
        goto out_reactor;
    if (sockets_open(&process.sockets, config,
                     config->scaling.workers > 1 && config->scaling.reuseport ? config->scaling.workers : 1) == -1)
        goto out_signals;
    process.facts.started_at = process.facts.loaded_at = clock_wall();
    process.facts.workers = config->scaling.workers;
    /* As root, the log is opened and the ports bound before root is given
     * up (the directory may be root's); reopening later needs the user's
     * rights. */
    set_log_owner(config);
    if (apply_access_log(process.config_path, config) == -1 || apply_status(&process, config) == -1)
        goto out_sockets;
    /* The ACME storage too: made as root, given to the user. */
    if (acme_client_prepare(config->tls.acme, config->operations.user) == -1)
        goto out_sockets;
    /* The pid file is root's, as nginx's: written before root is given up. */
    if (config->operations.pid_file != NULL && pid_file_write(config->operations.pid_file) == -1)
        goto out_sockets;
    if (config->operations.user != NULL) {
        /* The log file becomes the user's, as nginx does it: after a
         * SIGUSR1 rsp opens it again with that user's rights. */
        long uid = privileges_future_uid(config->operations.user);
        if (uid != -1)
            access_log_give_to((uid_t)uid);
        if (privileges_drop(config->operations.user) == -1)
            goto out_pid_file;
    }
    /* The master (or rsp alone) rotates the keys; a worker forgets the timer. */
    if (ticket_keys_start(config->operations.ticket_key_lifetime) == -1)
        goto out_pid_file;
    log_startup(config);
    log_msg("file descriptor limit: %llu", fd_limit);
    limit_log_size();
    /* The first generation: from here on the config belongs to it. */
    generation_install(config, true);
    config = NULL;

    if (generation_current()->scaling.workers > 1) {
        status = config_share_init() == 0 ? master_run(&process) : 1;
        sockets_close(&process.sockets);
        config_share_close();
    } else {
        struct listen_fds fds = process.sockets.fds[0];

        process.sockets.count = 0; /* the listeners own them now */
        status = worker_serve(&process, fds, false, true);
    }
    ticket_keys_close(); /* its timer, before the reactor goes */
    pid_file_remove();
    process_clean_up(&process);
    limit_close();
    stats_close();
    return status;

out_pid_file:
    pid_file_remove();
out_sockets:
    status_stop(process.status);
    access_log_close();
    sockets_close(&process.sockets);
out_signals:
    process_unwatch_signals(&process);
out_reactor:
    reactor_close();
out_config:
    if (config != NULL)
        config_release(config);
out_stats:
    ticket_keys_close();
    limit_close();
    stats_close();
    return status;
}
