/* process.h -- what rsp.c (serving clients) and master.c (keeping the
 * workers) share: the sockets rsp listens on, the status listener and
 * the facts it shows, and the steps of a reload both of them take. */
#ifndef RSP_PROCESS_H
#define RSP_PROCESS_H

#include "status.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define PROCESS_MAX_SOCKETS 64

struct config;

/* What one worker (or rsp alone) listens on: the plain HTTP socket and
 * the HTTPS one (-1 without `tls`). */
struct listen_fds {
    int plain;
    int tls;
};

/* The listening sockets of the public listeners: one pair, shared by
 * every worker (or used by rsp alone), or with reuseport one per worker. */
struct sockets {
    struct listen_fds fds[PROCESS_MAX_SOCKETS];
    size_t count;
};

struct process {
    const char *config_path;
    struct sockets sockets;         /* held by the master for the workers it starts */
    struct status_server *status;   /* NULL: no status listener (or a worker) */
    struct status_facts facts;
};

/* Opens what c's `listen` and `tls.listen` ask for: `count` pairs of
 * sockets (SO_REUSEPORT when more than one). Returns 0, or -1 after
 * logging (nothing left open). */
int sockets_open(struct sockets *s, const struct config *c, size_t count);

/* The same, for a reload from config `was` whose sockets are `had`: an
 * address that did not move gets a duplicate of its socket instead of a
 * new one (which could not bind: the port is taken). */
int sockets_reopen(struct sockets *s, const struct config *c, size_t count, const struct config *was,
                   const struct sockets *had);

/* Closes them all. */
void sockets_close(struct sockets *s);

/* True if both configs listen on the same addresses and ports, plain and
 * HTTPS. */
bool same_listen(const struct config *a, const struct config *b);

/* Says where c listens: "listening on ...", and "listening for HTTPS on
 * ..." with `tls`. */
void log_listening(const struct config *c);

/* Opens the access log c asks for (or closes it if c has none). Returns
 * 0, or -1 after saying why, as a config error does. */
int apply_access_log(const char *path, const struct config *c);

/* Brings the status listener in line with c: started, moved (the new one
 * opened before the old closes) or stopped. Returns 0, or -1 if the new
 * one could not be opened (the old one stays). */
int apply_status(struct process *p, const struct config *c);

/* Counts a reload that failed and says so: the generation in service
 * keeps serving. */
void reload_refused(struct process *p, struct config *next);

/* The master (master.c): starts c->scaling.workers workers on p's
 * sockets, keeps them running, passes signals on, and serves the status
 * listener. Returns the exit status once every worker is gone. */
int master_run(struct process *p);

/* A signal the master's signalfd delivered (SIGHUP, SIGTERM, SIGINT,
 * SIGUSR1, SIGCHLD). */
void master_signal(int signo);

/* In a worker just forked: frees the master's table of workers and its
 * timers' owners, without touching the master's reactor. */
void master_forget(void);

/* In a worker just forked (rsp.c) by the master `master`: serves clients
 * on the sockets fds, counting in row `row` of the shared counters, until
 * told to stop; then exits. Never returns. */
void worker_run(int slot, int row, struct listen_fds fds, bool shared, pid_t master);

#endif
