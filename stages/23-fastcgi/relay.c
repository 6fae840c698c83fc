/* relay.c -- one client connection: reading it, writing to it, and
 * closing it when everything is done.
 *
 * The relay owns the client's socket and the buffer its request heads
 * arrive in; the request it is serving and that request's response are an
 * exchange (exchange.c), which has the backend connection, an upstream
 * (upstream.c). The relay ends when the client has been answered and has
 * finished, or is gone. A TLS client whose handshake chose h2 speaks
 * HTTP/2: from its first bytes on, h2_relay.c serves it, each stream a
 * relay of its own.
 *
 * Every wait has a bound (chapter 08). One timer per relay is armed for
 * whichever deadline comes first of those that apply in its phase: the
 * head (header_timeout), a connect (connect_timeout), the gap between two
 * reads of the body (body_timeout), the start of the response
 * (response_timeout), silence both ways (idle_timeout), and a client that
 * was answered but does not hang up (RELAY_LINGER) while it may still be
 * sending (client_may_send). */
#include "relay.h"
#include "relay_private.h"

#include "buffering.h"
#include "generation.h"

#include "connection.h"
#include "log.h"
#include "net.h"
#include "pipe_pool.h"
#include "stats.h"
#include "timer.h"
#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

static void relay_handle(struct epoll_event_handler *self, uint32_t events);

/* A TLS read returns at most one record's plaintext, 16 KiB: with buffers
 * this large, none is ever left inside OpenSSL (tls_transport.c). */
_Static_assert(RELAY_READ_SIZE >= 16384, "a TLS record's plaintext fits in one read");

static void client_readable(struct relay *relay)
{
    char buffer[RELAY_READ_SIZE];

    for (int i = 0; i < RELAY_READS_PER_EVENT; i++) {
        struct connection *backend;
        ssize_t n;

        /* Stop as soon as the head is complete: the rest waits in the
         * kernel until a backend is connected, and after the whole
         * request, until it is answered. */
        if (relay->client.read_done || relay->client.paused || relay->x->phase == PHASE_CONNECTING ||
            relay->x->phase == PHASE_SENT)
            return;
        n = connection_read(&relay->client, buffer, sizeof buffer);
        if (n > 0 && relay->x == &exchange_idle && relay->served == 0 && tls_chose_h2(&relay->client)) {
            /* The handshake chose HTTP/2: these are its first bytes. */
            if (h2_relay_begin(relay, buffer, (size_t)n) == -1) {
                log_msg("out of memory starting HTTP/2 for %s", relay->client_address);
                connection_fail(&relay->client);
            }
            return;
        } else if (n > 0) {
            exchange_client_data(relay, buffer, (size_t)n);
        } else if (n == 0) {
            exchange_client_finished(relay);
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return;
        } else {
            connection_fail(&relay->client); /* reset: the client is gone */
        }
        /* Stop as soon as the backend's queue is full: backpressure. */
        backend = relay_backend(relay);
        if ((relay->x->phase == PHASE_BODY || relay->x->phase == PHASE_TUNNEL) && backend != NULL &&
            connection_queued(backend) > RELAY_HIGH_WATER)
            relay->client.paused = true;
    }
}

/* After a crowd of connections has gone (a slowloris wave, a burst of
 * downloads), malloc keeps the memory they freed for reuse: the process
 * stays as large as at the peak. When the last relay of a crowd of at
 * least this many is gone, we ask malloc to give its free memory back. */
#define RELAY_TRIM_AFTER 256

static void relay_release(struct reactor_deferred *deferred)
{
    struct relay *relay = (struct relay *)deferred; /* its first member */
    struct relay_set *set = relay->set;

    exchange_release(relay);
    free(relay);
    if (set->count == 0)
        pipe_pool_trim(); /* no client left to splice for */
    if (set->count == 0 && set->peak >= RELAY_TRIM_AFTER) {
        set->peak = 0;
        malloc_trim(0);
    }
}

int relay_client_key(const struct relay *relay, uint32_t level, struct limit_key *key)
{
    return limit_key_of(exchange_client(relay), level, key);
}

/* limit_conn: counts the new connection relay under its client's address;
 * one over the limit is marked, to be answered 429 and closed. */
static void count_connection(struct relay *relay)
{
    unsigned limit = relay->config->limit_conn;

    if (limit == 0 || relay_client_key(relay, LIMIT_LEVEL_CONN, &relay->conn_key) == -1)
        return;
    relay->conn_counted = true;
    relay->over_conn_limit = limit_conn_open(&relay->conn_key, limit_now()) > limit;
}

/* Closes both sockets and hands the relay's memory to the reactor, which
 * frees it once no event of this batch can point at it any more. */
void relay_close(struct relay *relay)
{
    if (relay->prev != NULL)
        relay->prev->next = relay->next;
    else
        relay->set->first = relay->next;
    if (relay->next != NULL)
        relay->next->prev = relay->prev;
    relay->set->count--;
    stats_gauge_own(&stats_row()->connections, -1);
    if (relay->conn_counted)
        limit_conn_close(&relay->conn_key);
    timer_disarm(&relay->timer);
    if (relay->h2 != NULL)
        h2_relay_end(relay);
    connection_close(&relay->client);
    exchange_free(relay);
    buffer_free(&relay->head);
    generation_release(relay->config);
    relay->deferred.release = relay_release;
    reactor_defer(&relay->deferred);
    if (relay->set->draining && relay->set->count == 0)
        reactor_stop();
}

/* Waiting for a request, with nothing of one yet: a keep-alive
 * connection between requests, or a new one that has said nothing. */
static bool relay_waiting(const struct relay *relay)
{
    return relay->x->phase == PHASE_HEAD && buffer_length(&relay->head) == 0;
}

/* While rsp drains: a relay waiting for a request is done. */
static bool relay_drained(struct relay *relay)
{
    /* HTTP/2: a GOAWAY, and the end once the streams in flight end. */
    if (!relay->set->draining || relay->h2 != NULL || !relay_waiting(relay))
        return false;
    if (connection_queued(&relay->client) == 0)
        return true;
    /* The end of the last response is still queued: FIN after it. */
    connection_shutdown_write(&relay->client);
    if (exchange_begin(relay) == NULL)
        return true; /* out of memory: closed now rather than drained */
    relay->x->phase = PHASE_DRAIN;
    return false;
}

/* A client we answered and whose write side is shut (PHASE_DRAIN): true
 * if it may still be sending, so that we must read on until its end of
 * file or RELAY_LINGER. It may when we did not read all of its request (a
 * body we answered without reading), or when bytes of a next request came
 * already, here or waiting in the socket. Closing a socket with unread
 * bytes sends a reset, and a reset can destroy the end of our answer at
 * the client before it read it. Otherwise we close at once. */
static bool client_may_send(const struct relay *relay)
{
    int waiting = 0;

    if (!relay->x->request_complete || buffer_length(&relay->head) > 0 || relay->x->drained > 0)
        return true;
    if (ioctl(relay->client.handler.fd, FIONREAD, &waiting) == -1)
        return true; /* cannot tell: linger, as before */
    return waiting > 0;
}

/* Ends every event: applies the rules that link the two sides, then closes
 * the relay if it is finished, or else brings both epoll registrations up
 * to date. The relay may be freed when it returns. */
void relay_settle_or_close(struct relay *relay)
{
    struct connection *client = &relay->client, *backend;
    enum phase phase;
    bool waiting;

    if (relay->h2 != NULL || relay->parent != NULL) {
        h2_relay_settle_or_close(relay);
        return;
    }
    buffering_settle(relay); /* what waits in rsp moves on as each side drains */
    /* Before the next exchange can begin: a producer resumed here may
     * finish its response (a file's last bytes). */
    exchange_resume_producer(relay);
    /* An exchange is over and the connection stays: on to the next one,
     * and to the one after if the client sent it already (pipelining) and
     * rsp answers it at once; but only once the client has taken what we
     * queued for it down to the low-water mark, and all a pipe held for
     * it. Queued is not delivered: a client that pipelines and never
     * reads would otherwise have every answer piled up in our memory. Its
     * EPOLLOUT brings us back here. */
    while (relay->x->response_done && relay->x->keep_client && relay->x->phase == PHASE_SENT &&
           !client->broken && connection_queued(client) < RELAY_LOW_WATER && client->piped == 0 &&
           !buffering_busy(relay))
        exchange_next(relay);
    if (relay_drained(relay)) {
        relay_close(relay);
        return;
    }
    backend = relay_backend(relay);
    phase = relay->x->phase;

    /* A backend that stopped taking the request may still answer it. */
    if (phase == PHASE_BODY && (backend == NULL || backend->write_done))
        relay->x->phase = phase = PHASE_DRAIN;
    /* Reading the client: not while connecting, nor while a whole request
     * waits for its answer; during the body (or a tunnel) only while the
     * backend keeps up; and a drain has a limit. */
    waiting = phase == PHASE_CONNECTING || phase == PHASE_SENT;
    if (waiting)
        client->paused = true;
    else if ((phase != PHASE_BODY && phase != PHASE_TUNNEL) || backend == NULL ||
             connection_queued(backend) < RELAY_LOW_WATER)
        client->paused = false;
    if (phase == PHASE_DRAIN && relay->x->drained > RELAY_DRAIN_LIMIT)
        client->read_done = true;
    /* Reading the backend: only while the client keeps up and is there. */
    if (backend != NULL && client->write_done)
        backend->read_done = true;

    /* While it is not read the client must still be noticed if it hangs
     * up, up to a limit on what it may send meanwhile. */
    client->watch_hangup = waiting && buffer_length(&relay->head) < relay->config->limits.max_head;

    /* Answered and shut: a client that cannot be sending anything more
     * is not waited for (lingering close only when it is needed). */
    if (phase == PHASE_DRAIN && client->write_done && !client->read_done && !client_may_send(relay))
        client->read_done = true;
    /* A backend that answered before reading the whole body may still be
     * taking the rest we queued for it: let it have that before closing. */
    if (client->broken ||
        (client->read_done && client->write_done &&
         (backend == NULL ||
          (backend->read_done && (backend->write_done || connection_queued(backend) == 0))))) {
        relay_close(relay);
        return;
    }
    if (connection_update(client) == -1 || (backend != NULL && connection_update(backend) == -1)) {
        relay_close(relay);
        return;
    }
    if (relay_time_arm(relay) == -1) {
        log_msg("out of memory arming a timer; closing a connection of %s", relay->client_address);
        relay_close(relay);
    }
}

/* The client hung up (or reset) while we were connecting for it, when it
 * is not being read: read now, to learn which. An end of file is a client
 * that finished sending (a half-close: the request goes on); a reset is a
 * client that is gone, and the relay closes. */
static void client_hung_up(struct relay *relay)
{
    char buffer[RELAY_READ_SIZE];

    while (!relay->client.read_done &&
           buffer_length(&relay->head) < relay->config->limits.max_head) {
        ssize_t n = connection_read(&relay->client, buffer, sizeof buffer);

        if (n > 0)
            exchange_client_data(relay, buffer, (size_t)n);
        else if (n == 0)
            exchange_client_finished(relay);
        else if (errno == EAGAIN || errno == EWOULDBLOCK)
            return;
        else
            connection_fail(&relay->client);
    }
}

static void relay_handle(struct epoll_event_handler *self, uint32_t events)
{
    struct relay *relay = self->closure;

    if (relay->h2 != NULL) {
        h2_relay_handle(relay, events);
        return;
    }
    events = connection_events(&relay->client, events);
    relay->last_activity = reactor_now();
    if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
        connection_flush(&relay->client);
    /* EPOLLIN too: while waiting, the client's registration may keep it
     * (connection_update), and it then says what EPOLLRDHUP would. */
    if ((relay->x->phase == PHASE_CONNECTING || relay->x->phase == PHASE_SENT) &&
        (events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)))
        client_hung_up(relay);
    else if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
        client_readable(relay);
    relay_settle_or_close(relay); /* relay may be closed: touch nothing after */
}

/* The client side of an HTTP/1 connection (struct client_ops): its
 * socket's queue. */

static int http1_head(struct relay *relay, const struct response_head *head, enum response_connection mode)
{
    struct buffer out = BUFFER_INIT;
    char extra[256];

    snprintf(extra, sizeof extra, "%s%s", relay_hsts_line(relay, head), response_connection_line(mode));
    if (response_head_write(head, extra, &out) == -1) {
        buffer_free(&out);
        return -1;
    }
    connection_write(&relay->client, out.data, buffer_length(&out));
    buffer_free(&out);
    return 0;
}

static void http1_write(struct relay *relay, const char *data, size_t length)
{
    connection_write(&relay->client, data, length);
}

static void http1_proceed(struct relay *relay)
{
    connection_write(&relay->client, "HTTP/1.1 100 Continue\r\n\r\n", 25);
}

static size_t http1_queued(const struct relay *relay)
{
    return connection_queued(&relay->client);
}

static void http1_end(struct relay *relay)
{
    connection_shutdown_write(&relay->client);
}

static void http1_fail(struct relay *relay)
{
    connection_fail(&relay->client);
}

static bool http1_take_back(struct relay *relay)
{
    return connection_drop_held(&relay->client);
}

static void http1_hold(struct relay *relay, bool on)
{
    if (on)
        connection_cork(&relay->client);
    else
        connection_uncork(&relay->client);
}

static ssize_t http1_splice_from(struct relay *relay, struct connection *from, size_t len)
{
    return connection_splice_from(&relay->client, from, len);
}

static ssize_t http1_send_file(struct relay *relay, int fd, off_t *offset, size_t len)
{
    return connection_sendfile(&relay->client, fd, offset, len);
}

/* Plain HTTP splices (chapter 16) and sends files with sendfile(2); TLS
 * bytes must be encrypted by us. */
static const struct client_ops http1_client = {
    .head = http1_head, .proceed = http1_proceed, .write = http1_write,
    .queued = http1_queued, .end = http1_end, .fail = http1_fail, .take_back = http1_take_back,
    .hold = http1_hold, .splice_from = http1_splice_from, .send_file = http1_send_file,
};
static const struct client_ops http1_tls_client = {
    .head = http1_head, .proceed = http1_proceed, .write = http1_write,
    .queued = http1_queued, .end = http1_end, .fail = http1_fail, .take_back = http1_take_back,
    .hold = http1_hold, .splice_from = NULL,
};

void relay_use_current_config(struct relay *relay)
{
    struct config *current = generation_current();

    if (relay->config == current)
        return;
    generation_release(relay->config);
    relay->config = config_hold(current);
}

void relay_close_all(struct relay_set *set)
{
    while (set->first != NULL)
        relay_close(set->first);
}

void relay_reloaded(struct relay_set *set)
{
    struct relay *relay = set->first, *next;

    for (; relay != NULL; relay = next) {
        next = relay->next;
        if (relay->h2 != NULL) {
            h2_relay_goaway(relay);
            relay_settle_or_close(relay); /* relay may be closed */
        }
    }
}

void relay_drain_all(struct relay_set *set)
{
    struct relay *relay = set->first, *next;

    set->draining = true;
    for (; relay != NULL; relay = next) {
        next = relay->next;
        if (relay_drained(relay))
            relay_close(relay);
        else
            relay_settle_or_close(relay);
    }
    if (set->count == 0)
        reactor_stop();
}

int relay_start(int client_fd, const struct sockaddr *address, socklen_t length,
                const char *server_port, struct config *config, struct relay_set *set, bool tls)
{
    struct relay *relay = calloc(1, sizeof *relay);

    (void)length;
    if (relay == NULL) {
        log_msg("out of memory accepting a client");
        return -1;
    }
    relay->set = set;
    relay->next = set->first;
    if (set->first != NULL)
        set->first->prev = relay;
    set->first = relay;
    if (++set->count > set->peak)
        set->peak = set->count;
    relay->config = config_hold(config);
    relay->x = (struct exchange *)&exchange_idle;
    relay_time_start(relay);
    relay->head = (struct buffer)BUFFER_INIT;
    net_address_text(address, relay->client_address, sizeof relay->client_address);
    relay->client_port = address->sa_family == AF_INET6 ? ntohs(((const struct sockaddr_in6 *)address)->sin6_port)
                         : address->sa_family == AF_INET ? ntohs(((const struct sockaddr_in *)address)->sin_port)
                                                         : 0;
    snprintf(relay->server_port, sizeof relay->server_port, "%s", server_port);
    connection_init(&relay->client, client_fd, false, relay_handle, relay);
    relay->client_ops = tls ? &http1_tls_client : &http1_client;
    /* Accepted here and never shared: a process with clients never forks
     * (only the master does, and it serves none). */
    relay->client.sole = true;
    relay->client.bytes_read = &stats_row()->bytes_in;
    relay->client.bytes_written = &stats_row()->bytes_out;
    stats_gauge_own(&stats_row()->connections, 1);
    count_connection(relay);
    if (tls) {
        /* A generation without `tls` has no HTTPS listener: a client
         * accepted by the old one just as a reload removed it goes. */
        relay->tls = true;
        if (config->tls.context == NULL || tls_attach(&relay->client, config->tls.context, config->tls.http2) == -1) {
            if (config->tls.context != NULL)
                log_msg("out of memory setting up TLS for %s", relay->client_address);
            relay_close(relay);
            return 0;
        }
    }
    relay_settle_or_close(relay);
    return 0;
}
