/* relay_private.h -- what relay.c and relay_time.c share: the relay
 * itself. Private to those two files. */
#ifndef RSP_RELAY_PRIVATE_H
#define RSP_RELAY_PRIVATE_H

#include "backend.h"
#include "buffer.h"
#include "config.h"
#include "connection.h"
#include "http.h"
#include "reactor.h"
#include "relay.h"
#include "request.h"
#include "timer.h"

#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#define RELAY_READ_SIZE 16384
#define RELAY_READS_PER_EVENT 4          /* then let other connections run */
#define RELAY_HIGH_WATER (64 * 1024)
#define RELAY_LOW_WATER (16 * 1024)
#define RELAY_DRAIN_LIMIT (1024 * 1024)  /* most we drop before giving up on a client */
enum phase { PHASE_HEAD, PHASE_CONNECTING, PHASE_BODY, PHASE_DRAIN };

struct relay {
    struct reactor_deferred deferred; /* first: frees the relay at the end of the batch */
    struct relay_set *set;           /* the relays alive, a list through prev/next */
    struct relay *prev, *next;
    struct connection client;
    struct connection backend;       /* no socket until a connect starts */
    struct config *config;
    enum phase phase;
    struct buffer head;              /* the request head as received, and what followed it */
    struct http_request *request;    /* from the first byte until the head is sent; else NULL */
    struct request_info info;
    struct pool *pool;               /* chosen by route, or by Host */
    struct backend *current;         /* the backend tried or in use, or NULL */
    const struct addrinfo *address;  /* which of its addresses */
    uint64_t tried;                  /* backends tried for this request */
    bool response_started;           /* a byte of the response reached the client's queue */
    bool head_method;                /* a HEAD request: answers carry no body */
    size_t drained;                  /* bytes dropped in PHASE_DRAIN */
    char client_address[INET6_ADDRSTRLEN];
    char server_port[6];             /* the port the client connected to */

    /* Time (reactor_now() seconds): see relay_time.c. */
    struct timer timer;
    double accepted;                 /* the client connected */
    double attempt_started;          /* the connect under way started */
    double last_body_read;           /* body bytes last came from the client */
    double request_sent;             /* the whole request was queued for the backend; 0: not yet */
    double last_activity;            /* an event on either socket */
    double give_up_at;               /* a timeout answered: close by then; 0: none */
};

/* relay.c */

/* The request cannot go on: answers it with `status` (or cuts the client
 * off if part of a response was already sent), drops the backend, and
 * drains the client. */
void relay_fail_request(struct relay *relay, int status);

/* A connect to the current backend failed with `error`: returns false if
 * the shortage is ours (out of fds, memory, ports), true if trying another
 * backend makes sense (and then marks this one down once every address of
 * it has failed). */
bool relay_attempt_failed(struct relay *relay, int error);

/* Closes the backend socket, if any, and gives its slot back. */
void relay_release_backend(struct relay *relay);

/* Starts a connect to the next address or backend. Returns 0 when one is
 * under way, -1 when nothing is left to try, -2 when we are short of
 * descriptors (or memory, or local ports) ourselves. */
int relay_connect_next(struct relay *relay);

/* Applies the rules that link the two sides after anything happened, then
 * closes the relay if it is finished, or else brings both epoll
 * registrations and the timer up to date. */
void relay_settle_or_close(struct relay *relay);

/* relay_time.c */

/* Starts the clock of a relay whose client was just accepted. */
void relay_time_start(struct relay *relay);

/* Arms the relay's timer for the earliest deadline that applies now.
 * Returns 0, or -1 if out of memory. */
int relay_time_arm(struct relay *relay);

#endif
