/* relay.c -- one client's request, from its first byte to the response's
 * last.
 *
 * A relay goes through these phases:
 *
 *   HEAD        read the request head into a buffer and parse it as it
 *               arrives; refuse it (4xx) if it is malformed or too large
 *   CONNECTING  route it to a pool (the config's route function decides,
 *               or else the Host header), and connect to a backend without
 *               blocking; the client is not read meanwhile, so failing over
 *               to another backend is always safe; 421 / 502 if impossible;
 *               route may also answer by itself, or fail (500)
 *   BODY        send our version of the head, then forward exactly the body
 *               the head announced (Content-Length or chunked) and not a
 *               byte more
 *   DRAIN       the request is complete (or was refused): whatever else the
 *               client sends is read and dropped, so that closing its
 *               socket never throws away our answer with a reset
 *
 * The response travels back as a plain stream of bytes, with the same
 * backpressure as chapter 04: the backend is not read while the client's
 * queue is above RELAY_HIGH_WATER. The backend closes the response
 * (we ask for Connection: close); then we pass the close on to the client.
 * The relay ends when the client has been answered and has finished, or is
 * gone.
 *
 * Every wait has a bound (chapter 08). One timer per relay is armed for
 * whichever deadline comes first of those that apply in its phase: the
 * head (header_timeout), a connect (connect_timeout), the gap between two
 * reads of the body (body_timeout), the start of the response
 * (response_timeout), silence both ways (idle_timeout), and a client that
 * was answered but does not hang up (RELAY_LINGER). */
#include "relay.h"
#include "relay_private.h"

#include "backend.h"
#include "config.h"
#include "connection.h"
#include "http.h"
#include "log.h"
#include "net.h"
#include "reply.h"
#include "request.h"
#include "route.h"
#include "router.h"
#include "timer.h"

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
#include <unistd.h>

static void relay_handle(struct epoll_event_handler *self, uint32_t events);
static void client_finished(struct relay *relay);

/* Closes the backend socket, if any, and gives its slot back. */
void relay_release_backend(struct relay *relay)
{
    if (relay->backend.handler.fd == -1)
        return;
    connection_close(&relay->backend);
    connection_init_none(&relay->backend);
    relay->current->active--;
}

/* True if the request's method is HEAD, as far as we know it: the parser
 * may have stopped before or after the request line. */
static bool is_head_request(const struct relay *relay)
{
    if (relay->head_method)
        return true;
    if (relay->request == NULL || relay->head.data == NULL)
        return false;
    return relay->request->method.length == 4 &&
           memcmp(relay->head.data + relay->request->method.offset, "HEAD", 4) == 0;
}

/* The request cannot go on: answer it ourselves with `status` (unless part
 * of a response was already sent: then there is nothing sensible to say and
 * the client is simply cut off), drop the backend, and drain the client. */
void relay_fail_request(struct relay *relay, int status)
{
    relay_release_backend(relay);
    relay->phase = PHASE_DRAIN;
    if (relay->response_started) {
        connection_fail(&relay->client);
        return;
    }
    reply_error(&relay->client, status, is_head_request(relay));
    relay->response_started = true;
    connection_shutdown_write(&relay->client);
}

/* The least time between two lines about a shortage of our own. */
#define SHORTAGE_REPORT_INTERVAL 1.0

/* Logs that a connect failed for a shortage of our own and the request
 * gets a 503: at most one line a second, with how many such requests there
 * were since the last line, as the listener counts the clients it turns
 * away (a shortage hits every request at once). */
static void report_shortage(const struct relay *relay, int error)
{
    static unsigned long answered;  /* requests answered 503 since the last line */
    static double reported_at = -SHORTAGE_REPORT_INTERVAL;
    double now = reactor_now();

    answered++;
    if (now - reported_at < SHORTAGE_REPORT_INTERVAL)
        return;
    log_msg("cannot connect to backend %s: %s; answered %lu request(s) with 503",
            relay->current->name, strerror(error), answered);
    answered = 0;
    reported_at = now;
}

/* A connect to relay->address failed with `error`. If that is our own
 * shortage (out of file descriptors, memory or local ports), no backend is
 * to blame and any other would fail the same way: returns false, and the
 * request is to get a 503. Otherwise marks the backend down once every
 * address of it has failed, and returns true: trying another backend makes
 * sense. */
bool relay_attempt_failed(struct relay *relay, int error)
{
    if (error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM ||
        error == EADDRNOTAVAIL) {
        report_shortage(relay, error);
        return false;
    }
    if (relay->address->ai_next == NULL)
        backend_failed(relay->pool, relay->current, error);
    return true;
}

/* Starts a connect to the next address of the current backend, or else to
 * the next backend the pool offers. Returns 0 when a connect is under way,
 * -1 when nothing is left to try, -2 when we are short of descriptors (or
 * memory, or local ports) ourselves. */
int relay_connect_next(struct relay *relay)
{
    for (;;) {
        int fd;

        if (relay->address != NULL)
            relay->address = relay->address->ai_next;
        if (relay->address == NULL) {
            relay->current = backend_pick(relay->pool, relay->tried);
            if (relay->current == NULL)
                return -1;
            relay->tried |= backend_bit(relay->pool, relay->current);
            relay->address = relay->current->addresses;
        }
        fd = net_connect_start(relay->address);
        if (fd == -1) {
            if (!relay_attempt_failed(relay, errno))
                return -2;
            continue;
        }
        connection_init(&relay->backend, fd, true, relay_handle, relay);
        relay->current->active++;
        relay->attempt_started = reactor_now();
        return 0;
    }
}

/* Starts the next connect; if none can start, answers 503 when the
 * shortage is our own (no backend is to blame), else 502: no backend of the
 * pool could be reached. */
static void connect_or_answer(struct relay *relay)
{
    int rc = relay_connect_next(relay);

    if (rc == -2) {
        relay_fail_request(relay, 503);
    } else if (rc == -1) {
        pool_unreachable(relay->pool);
        relay_fail_request(relay, 502);
    }
}

/* Passes body bytes to the backend, as far as the framing says the body
 * goes; anything after it (a pipelined request) is dropped. */
static void forward_body(struct relay *relay, const char *data, size_t len)
{
    ssize_t n = body_frame(&relay->info.body, data, len);

    if (n == -1) {
        relay_fail_request(relay, 400); /* invalid chunked framing */
        return;
    }
    connection_write(&relay->backend, data, (size_t)n);
    relay->last_body_read = reactor_now();
    if (relay->info.body.done) {
        relay->phase = PHASE_DRAIN;
        relay->drained += len - (size_t)n;
        relay->request_sent = reactor_now();
    }
}

/* route answered the request itself: send that answer, as relay_fail_request
 * sends ours, and take nothing more from the client. */
static void answer_from_route(struct relay *relay, struct buffer *answer)
{
    relay->phase = PHASE_DRAIN;
    connection_write(&relay->client, answer->data + answer->start, buffer_length(answer));
    relay->response_started = true;
    connection_shutdown_write(&relay->client);
}

/* Asks the config's route function. Returns true if the request is
 * settled (answered, by route or with 500); otherwise relay->pool is the
 * pool route chose, or NULL to route by Host. */
static bool ask_route(struct relay *relay)
{
    struct route_request rq = { relay->request, relay->head.data, &relay->info,
                                relay->client_address };
    struct buffer answer = BUFFER_INIT;
    struct pool *pool = NULL;

    switch (route_call(&relay->config->route, &rq, relay->head_method, &pool, &answer)) {
    case ROUTE_DEFAULT:
        return false;
    case ROUTE_POOL:
        relay->pool = pool;
        return false;
    case ROUTE_ANSWER:
        answer_from_route(relay, &answer);
        buffer_free(&answer);
        return true;
    case ROUTE_FAILED:
        break;
    }
    buffer_free(&answer);
    relay_fail_request(relay, 500);
    return true;
}

/* The head is complete: check it, route it, start connecting. */
static void request_ready(struct relay *relay)
{
    const char *buf = relay->head.data;
    int status = request_check(relay->request, buf, &relay->config->policy, &relay->info);

    relay->head_method = is_head_request(relay);
    if (status != 0) {
        relay_fail_request(relay, status);
        return;
    }
    if (relay->config->route.L != NULL && ask_route(relay))
        return;
    if (relay->pool == NULL)
        relay->pool = router_route(&relay->config->router, buf + relay->info.host.offset,
                                   relay->info.host.length);
    if (relay->pool == NULL) {
        relay_fail_request(relay, 421);
        return;
    }
    /* Active checks say every backend is down: do not make the client
     * wait for connects that will fail. */
    if (pool_all_failing(relay->pool)) {
        relay_fail_request(relay, 503);
        return;
    }
    relay->phase = PHASE_CONNECTING;
    connect_or_answer(relay);
}

/* Bytes of the head arrived: keep them and parse on. */
static void head_received(struct relay *relay, const char *data, size_t len)
{
    int rc;

    /* The parser's state (some 3 KiB, most of it room for 100 headers) is
     * allocated with the first byte, not with the connection: an idle
     * connection costs a few hundred bytes. */
    if (relay->request == NULL) {
        relay->request = malloc(sizeof *relay->request);
        if (relay->request == NULL) {
            log_msg("out of memory reading a request head");
            connection_fail(&relay->client);
            return;
        }
        http_request_init(relay->request);
    }
    if (buffer_append(&relay->head, data, len) == -1) {
        log_msg("out of memory reading a request head");
        connection_fail(&relay->client);
        return;
    }
    rc = http_parse_request(relay->request, relay->head.data, buffer_length(&relay->head),
                            &relay->config->limits);
    if (rc == HTTP_DONE)
        request_ready(relay);
    else if (rc != HTTP_INCOMPLETE)
        relay_fail_request(relay, rc);
}

/* The backend is connected: send it our head, then whatever body bytes
 * came in with the head. */
static void send_request(struct relay *relay)
{
    struct buffer head = BUFFER_INIT;
    size_t head_length = relay->request->head_length;

    if (request_write_head(relay->request, relay->head.data, &relay->info,
                           &relay->config->policy, relay->client_address, relay->server_port,
                           &head) == -1) {
        buffer_free(&head);
        log_msg("out of memory writing a request head");
        relay_fail_request(relay, 502);
        return;
    }
    connection_write(&relay->backend, head.data, buffer_length(&head));
    buffer_free(&head);

    relay->phase = relay->info.body.done ? PHASE_DRAIN : PHASE_BODY;
    if (relay->phase == PHASE_DRAIN)
        relay->request_sent = reactor_now();
    relay->last_body_read = reactor_now();
    if (buffer_length(&relay->head) > head_length) {
        const char *rest = relay->head.data + head_length;
        size_t rest_length = buffer_length(&relay->head) - head_length;
        if (relay->phase == PHASE_BODY)
            forward_body(relay, rest, rest_length);
        else
            relay->drained += rest_length;
    }
    /* The parsed request pointed into the head: done with both. */
    buffer_free(&relay->head);
    free(relay->request);
    relay->request = NULL;
    request_info_free(&relay->info);
    /* The client hung up while we were connecting (client_hung_up): what
     * it sent before is all the body there will be. */
    if (relay->phase == PHASE_BODY && relay->client.read_done)
        client_finished(relay);
}

/* The backend socket became writable (or failed) while connecting. */
static void connect_finished(struct relay *relay)
{
    int error = net_connect_result(relay->backend.handler.fd);

    if (error == 0) {
        relay->backend.connecting = false;
        backend_succeeded(relay->pool, relay->current);
        send_request(relay);
        return;
    }
    bool retry = relay_attempt_failed(relay, error);
    relay_release_backend(relay);
    if (retry)
        connect_or_answer(relay);
    else
        relay_fail_request(relay, 503);
}

/* Dispatches bytes from the client by phase. */
static void client_data(struct relay *relay, const char *data, size_t len)
{
    switch (relay->phase) {
    case PHASE_HEAD:
        head_received(relay, data, len);
        break;
    case PHASE_BODY:
        forward_body(relay, data, len);
        break;
    case PHASE_CONNECTING:
        /* Not read while connecting (see client_readable); should bytes
         * come anyway, they wait with the head for the backend. */
        if (buffer_append(&relay->head, data, len) == -1)
            connection_fail(&relay->client);
        break;
    case PHASE_DRAIN:
        relay->drained += len;
        break;
    }
}

/* The client finished sending. */
static void client_finished(struct relay *relay)
{
    relay->client.read_done = true;
    if (relay->phase == PHASE_HEAD && buffer_length(&relay->head) == 0) {
        /* Connected and left without a word: nothing to answer. */
        relay->phase = PHASE_DRAIN;
        connection_shutdown_write(&relay->client);
    } else if (relay->phase == PHASE_HEAD) {
        relay_fail_request(relay, 400); /* the head was cut short */
    } else if (relay->phase == PHASE_BODY) {
        /* The body was cut short. If the backend already answered, let its
         * answer through; otherwise the request is broken. */
        if (relay->response_started)
            relay->phase = PHASE_DRAIN;
        else
            relay_fail_request(relay, 400);
    }
}

static void client_readable(struct relay *relay)
{
    char buffer[RELAY_READ_SIZE];

    for (int i = 0; i < RELAY_READS_PER_EVENT; i++) {
        ssize_t n;

        /* Stop as soon as the head is complete: the rest waits in the
         * kernel until a backend is connected. */
        if (relay->client.read_done || relay->client.paused || relay->phase == PHASE_CONNECTING)
            return;
        n = connection_read(&relay->client, buffer, sizeof buffer);
        if (n > 0) {
            client_data(relay, buffer, (size_t)n);
        } else if (n == 0) {
            client_finished(relay);
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return;
        } else {
            connection_fail(&relay->client); /* reset: the client is gone */
        }
        /* Stop as soon as the backend's queue is full: backpressure. */
        if (relay->phase == PHASE_BODY && connection_queued(&relay->backend) > RELAY_HIGH_WATER)
            relay->client.paused = true;
    }
}

/* The backend finished its response (EOF), or broke. */
static void backend_finished(struct relay *relay, bool broken)
{
    if (broken)
        connection_fail(&relay->backend);
    relay->backend.read_done = true;
    if (!relay->response_started) {
        log_msg("backend %s closed the connection without answering", relay->current->name);
        relay_fail_request(relay, 502);
    } else {
        connection_shutdown_write(&relay->client);
    }
}

static void backend_readable(struct relay *relay)
{
    char buffer[RELAY_READ_SIZE];

    for (int i = 0; i < RELAY_READS_PER_EVENT; i++) {
        ssize_t n;

        if (relay->backend.read_done || relay->backend.paused)
            return;
        n = connection_read(&relay->backend, buffer, sizeof buffer);
        if (n > 0) {
            relay->response_started = true;
            connection_write(&relay->client, buffer, (size_t)n);
            if (connection_queued(&relay->client) > RELAY_HIGH_WATER)
                relay->backend.paused = true;
        } else if (n == 0) {
            backend_finished(relay, false);
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return;
        } else {
            backend_finished(relay, true);
        }
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

    free(relay);
    if (set->count == 0 && set->peak >= RELAY_TRIM_AFTER) {
        set->peak = 0;
        malloc_trim(0);
    }
}

/* Closes both sockets and hands the relay's memory to the reactor, which
 * frees it once no event of this batch can point at it any more. */
static void relay_close(struct relay *relay)
{
    if (relay->prev != NULL)
        relay->prev->next = relay->next;
    else
        relay->set->first = relay->next;
    if (relay->next != NULL)
        relay->next->prev = relay->prev;
    relay->set->count--;
    timer_disarm(&relay->timer);
    connection_close(&relay->client);
    relay_release_backend(relay);
    buffer_free(&relay->head);
    free(relay->request);
    request_info_free(&relay->info);
    relay->deferred.release = relay_release;
    reactor_defer(&relay->deferred);
}

/* Ends every event: applies the rules that link the two sides, then closes
 * the relay if it is finished, or else brings both epoll registrations up
 * to date. The relay may be freed when it returns. */
void relay_settle_or_close(struct relay *relay)
{
    struct connection *client = &relay->client, *backend = &relay->backend;

    /* A backend that stopped taking the request may still answer it. */
    if (relay->phase == PHASE_BODY && backend->write_done)
        relay->phase = PHASE_DRAIN;
    /* Reading the client: not while connecting; during the body only while
     * the backend keeps up; and a drain has a limit. */
    if (relay->phase == PHASE_CONNECTING)
        client->paused = true;
    else if (relay->phase != PHASE_BODY || connection_queued(backend) < RELAY_LOW_WATER)
        client->paused = false;
    if (relay->phase == PHASE_DRAIN && relay->drained > RELAY_DRAIN_LIMIT)
        client->read_done = true;
    /* Reading the backend: only while the client keeps up and is there. */
    if (client->write_done)
        backend->read_done = true;
    if (connection_queued(client) < RELAY_LOW_WATER)
        backend->paused = false;

    /* While its backend connect is pending the client is not read, but a
     * hang-up must still be noticed. */
    client->watch_hangup = relay->phase == PHASE_CONNECTING;

    /* A backend that answered before reading the whole body may still be
     * taking the rest we queued for it: let it have that before closing. */
    if (client->broken || (client->read_done && client->write_done && backend->read_done &&
                           (backend->write_done || connection_queued(backend) == 0))) {
        relay_close(relay);
        return;
    }
    if (connection_update(client) == -1 || connection_update(backend) == -1) {
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

    while (!relay->client.read_done) {
        ssize_t n = connection_read(&relay->client, buffer, sizeof buffer);

        if (n > 0)
            client_data(relay, buffer, (size_t)n);
        else if (n == 0)
            client_finished(relay);
        else if (errno == EAGAIN || errno == EWOULDBLOCK)
            return;
        else
            connection_fail(&relay->client);
    }
}

static void relay_handle(struct epoll_event_handler *self, uint32_t events)
{
    struct relay *relay = self->closure;

    relay->last_activity = reactor_now();

    if (self == &relay->backend.handler) {
        if (relay->backend.connecting) {
            connect_finished(relay);
        } else {
            if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
                connection_flush(&relay->backend);
            /* Read on hang-up and error too: the last bytes and the EOF may
             * still be waiting in the socket, and we must not lose them. */
            if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                backend_readable(relay);
        }
    } else {
        if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
            connection_flush(&relay->client);
        if (relay->phase == PHASE_CONNECTING && (events & (EPOLLRDHUP | EPOLLERR | EPOLLHUP)))
            client_hung_up(relay);
        else if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
            client_readable(relay);
    }
    relay_settle_or_close(relay); /* relay may be closed: touch nothing after */
}

/* Writes the client's IP address as text; an IPv4 client on our dual-stack
 * socket shows up as ::ffff:a.b.c.d, which we write as a.b.c.d. */
static void format_address(const struct sockaddr *address, char *out, size_t size)
{
    const void *raw = NULL;
    int family = address->sa_family;

    if (family == AF_INET) {
        raw = &((const struct sockaddr_in *)address)->sin_addr;
    } else if (family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)address)->sin6_addr;
        raw = a6;
        if (IN6_IS_ADDR_V4MAPPED(a6)) {
            family = AF_INET;
            raw = &a6->s6_addr[12];
        }
    }
    if (raw == NULL || inet_ntop(family, raw, out, (socklen_t)size) == NULL)
        snprintf(out, size, "unknown");
}

void relay_close_all(struct relay_set *set)
{
    while (set->first != NULL)
        relay_close(set->first);
}

int relay_start(int client_fd, const struct sockaddr *address, socklen_t length,
                const char *server_port, struct config *config, struct relay_set *set)
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
    relay->config = config;
    relay->phase = PHASE_HEAD;
    relay_time_start(relay);
    relay->head = (struct buffer)BUFFER_INIT;
    format_address(address, relay->client_address, sizeof relay->client_address);
    snprintf(relay->server_port, sizeof relay->server_port, "%s", server_port);
    connection_init(&relay->client, client_fd, false, relay_handle, relay);
    connection_init_none(&relay->backend);
    relay_settle_or_close(relay);
    return 0;
}
