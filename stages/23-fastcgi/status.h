/* status.h -- the status listener: what rsp is doing, for a person (an
 * HTML page), for a script (/status.json) and for Prometheus (/metrics).
 *
 * It has a listener of its own (status_listen), never the public one, and
 * is served by the process that sees the whole proxy: rsp itself with one
 * worker, the master with several. Everything it shows comes from the
 * current config generation (names), the shared counters (stats.h) and a
 * few facts its owner keeps up to date (struct status_facts). */
#ifndef RSP_STATUS_H
#define RSP_STATUS_H

#include "buffer.h"

struct config;
struct stats;

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define STATUS_MAX_PIDS 64
#define STATUS_HISTORY 300          /* seconds of requests-per-second history */

/* What only the serving process knows; its owner fills it in. */
struct status_facts {
    double started_at;              /* wall clock, seconds since 1970 */
    double loaded_at;               /* when the generation in service was installed */
    uint64_t reloads_ok, reloads_failed;
    unsigned workers;               /* configured; 1: no separate worker processes */
    pid_t pids[STATUS_MAX_PIDS];    /* the workers' */
    size_t pid_count;
    uint64_t restarts;              /* workers started again after dying */
};

/* Everything one page shows, gathered once per request (status_render.c). */
struct status_view {
    const struct status_facts *facts;
    struct config *config;          /* the generation in service */
    const struct stats *stats;
    double now;                     /* wall clock */
    const uint32_t *history;        /* requests per second, oldest first */
    size_t history_count;
};

struct status_server;

/* Starts serving on host:port. Returns the server, or NULL after logging
 * why. facts must outlive it. */
struct status_server *status_start(const char *host, const char *port,
                                   const struct status_facts *facts);

/* True if the server listens on host:port. */
bool status_listens_on(const struct status_server *s, const char *host, const char *port);

/* Closes the listener and every status connection. Safe with NULL. */
void status_stop(struct status_server *s);

/* In a worker just forked from the master: closes the server's sockets
 * and frees it without touching the master's reactor. Safe with NULL. */
void status_forget(struct status_server *s);

/* The three documents; each returns 0, or -1 if memory ran out. */
int status_render_html(struct buffer *out, const struct status_view *v);
int status_render_json(struct buffer *out, const struct status_view *v);
int status_render_metrics(struct buffer *out, const struct status_view *v);

#endif
