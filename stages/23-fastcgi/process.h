/* process.h -- what rsp alone, the master and the workers share
 * (process.c): the sockets rsp listens on, the status listener and the
 * facts it shows, the signals, and the one reload all three take, each
 * with its own few steps (struct reload_ops). rsp.c's main makes the
 * process; worker.c serves clients in it (rsp alone, or a worker);
 * master.c keeps the workers. */
#ifndef RSP_PROCESS_H
#define RSP_PROCESS_H

#include "reactor.h"
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
    struct epoll_event_handler signals; /* the signalfd */
    void (*on_signal)(int signo);   /* what each signal read from it goes to */
    pid_t signal_sender;            /* during on_signal: who sent it (0: the kernel) */
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

/* Says where c listens: "listening on ...", and "listening for HTTPS on
 * ..." with `tls`. */
void log_listening(const struct config *c);

/* Opens the access logs c asks for, the top-level one and the sites'
 * own, each held by c until it is freed (a log open already is shared,
 * not opened again; one no generation holds any more is closed). Returns
 * 0, or -1 after saying which setting and file, as a config error does
 * (what was opened is closed with c). */
int apply_access_log(const char *path, struct config *c);

/* Brings the status listener in line with c: started, moved (the new one
 * opened before the old closes) or stopped. Returns 0, or -1 if the new
 * one could not be opened (the old one stays). */
int apply_status(struct process *p, const struct config *c);

/* Routes SIGTERM, SIGINT, SIGHUP and SIGUSR1 (and with master, SIGCHLD)
 * to a signalfd the reactor watches: each signal is read between two
 * events, never in the middle of one, and handed to on_signal. Returns
 * 0, or -1 after logging. */
int process_watch_signals(struct process *p, bool master, void (*on_signal)(int signo));

/* Stops watching the signalfd and closes it. */
void process_unwatch_signals(struct process *p);

/* What differs between the reloads of rsp alone, of the master and of a
 * worker; process_reload does the rest, the same way for all three. */
struct reload_ops {
    /* A worker follows its master, which has announced the reload and
     * has warned, counted and refused for everyone: a follower reloads
     * without a word but its own result, and has no status listener. */
    bool follower;
    /* Reads the new config. Returns it, or NULL after saying why. */
    struct config *(*load)(struct process *p);
    /* Warns about the settings a reload cannot change (NULL: none). */
    void (*restart_settings)(const struct config *current, struct config *next);
    /* `listen` moved: opens what is to serve the new addresses, kept
     * aside until the reload is through. Returns 0, or -1 after logging
     * (nothing left open). NULL: a reload that moves `listen` fails. */
    int (*open_moved)(struct process *p, const struct config *current, const struct config *next);
    /* Closes what open_moved opened: the reload failed after all. */
    void (*close_moved)(struct process *p);
    /* `listen` moved: what open_moved opened takes over, just before the
     * new generation is installed (NULL: installed does it). */
    void (*use_moved)(struct process *p, const struct config *next);
    /* The new generation is installed (NULL: nothing more to do). */
    void (*installed)(struct process *p, const struct config *next, bool moved);
};

/* SIGHUP: reads the config again. Anything wrong (the file, a setting, a
 * port that cannot be had, a log that cannot be opened) and the running
 * generation keeps serving; otherwise the new one takes the next
 * request, and requests in flight finish on theirs. */
void process_reload(struct process *p, const struct reload_ops *ops);

/* Releases what main set up for p, in reverse: the generation, the
 * status listener, the access log, the signalfd, the health checks and
 * the reactor. */
void process_clean_up(struct process *p);

/* Runs the reactor until the process stops: first, when `announce`, the
 * "Started." line and systemd's READY=1. Returns the exit status (0 for a
 * clean stop, logged as "stopped"; 1 when the reactor failed). */
int process_run(bool announce);

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

/* Serves clients on the sockets fds (which it owns from here on) until
 * told to stop: rsp alone, or a worker (worker.c). With announce, prints
 * the Started line once the listeners are up (what scripts and the tests
 * wait for; a worker leaves that to its master). Returns the exit
 * status. */
int worker_serve(struct process *p, struct listen_fds fds, bool shared, bool announce);

/* A signal of a process serving clients (rsp alone, or a worker):
 * SIGHUP, SIGUSR1, SIGTERM, SIGINT. A worker reloads on its master's
 * SIGHUP alone (another is logged and ignored), and stops gracefully on
 * a SIGTERM or SIGINT from either side (a second from the same side:
 * at once). */
void worker_signal(int signo);

/* In a worker just forked (worker.c) by the master `master`: serves
 * clients on the sockets fds, counting in row `row` of the shared
 * counters, until told to stop; then exits. Never returns. */
void worker_run(struct process *p, int slot, int row, struct listen_fds fds, bool shared, pid_t master);

#endif
