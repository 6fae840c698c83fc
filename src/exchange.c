/* exchange.c -- one request and its response, from the request's first
 * byte to the response's last.
 *
 * The request goes through these phases:
 *
 *   HEAD        read the request head into the relay's buffer and parse
 *               it as it arrives; refuse it (4xx) if it is malformed or
 *               too large
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
 * (we ask for Connection: close); then we pass the close on to the
 * client. */
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
#include "upstream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

void relay_release_backend(struct relay *relay)
{
    if (relay->x.upstream == NULL)
        return;
    upstream_release(relay->x.upstream);
    relay->x.upstream = NULL;
}

/* True if the request's method is HEAD, as far as we know it: the parser
 * may have stopped before or after the request line. */
static bool is_head_request(const struct relay *relay)
{
    const struct exchange *x = &relay->x;

    if (x->head_method)
        return true;
    if (x->request == NULL || relay->head.data == NULL)
        return false;
    return x->request->method.length == 4 &&
           memcmp(relay->head.data + x->request->method.offset, "HEAD", 4) == 0;
}

/* The request cannot go on: answer it ourselves with `status` (unless part
 * of a response was already sent: then there is nothing sensible to say and
 * the client is simply cut off), drop the backend, and drain the client. */
void relay_fail_request(struct relay *relay, int status)
{
    relay_release_backend(relay);
    relay->x.phase = PHASE_DRAIN;
    if (relay->x.response_started) {
        connection_fail(&relay->client);
        return;
    }
    reply_error(&relay->client, status, is_head_request(relay));
    relay->x.response_started = true;
    connection_shutdown_write(&relay->client);
}

/* A connect to x->address failed with `error`. If that is our own
 * shortage (out of file descriptors, memory or local ports), no backend is
 * to blame and any other would fail the same way: returns false. Otherwise
 * marks the backend down once every address of it has failed, and returns
 * true: trying another backend makes sense. */
bool relay_attempt_failed(struct relay *relay, int error)
{
    struct exchange *x = &relay->x;

    if (error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM ||
        error == EADDRNOTAVAIL) {
        errno = error;
        log_errno("cannot connect to backend %s", x->current->name);
        return false;
    }
    if (x->address->ai_next == NULL)
        backend_failed(x->pool, x->current, error);
    return true;
}

/* Starts a connect to the next address of the current backend, or else to
 * the next backend the pool offers. Returns 0 when a connect is under way,
 * -1 when nothing is left to try. */
int relay_connect_next(struct relay *relay)
{
    struct exchange *x = &relay->x;

    for (;;) {
        if (x->address != NULL)
            x->address = x->address->ai_next;
        if (x->address == NULL) {
            x->current = backend_pick(x->pool, x->tried);
            if (x->current == NULL)
                return -1;
            x->tried |= backend_bit(x->pool, x->current);
            x->address = x->current->addresses;
        }
        x->upstream = upstream_connect(x->current, x->address, exchange_upstream_event, relay);
        if (x->upstream == NULL) {
            if (!relay_attempt_failed(relay, errno))
                return -1;
            continue;
        }
        x->attempt_started = reactor_now();
        return 0;
    }
}

/* No backend of the pool could be reached. */
static void answer_bad_gateway(struct relay *relay)
{
    pool_unreachable(relay->x.pool);
    relay_fail_request(relay, 502);
}

/* Passes body bytes to the backend, as far as the framing says the body
 * goes; anything after it (a pipelined request) is dropped. */
static void forward_body(struct relay *relay, const char *data, size_t len)
{
    struct exchange *x = &relay->x;
    ssize_t n = body_frame(&x->info.body, data, len);

    if (n == -1) {
        relay_fail_request(relay, 400); /* invalid chunked framing */
        return;
    }
    connection_write(&x->upstream->conn, data, (size_t)n);
    x->last_body_read = reactor_now();
    if (x->info.body.done) {
        x->phase = PHASE_DRAIN;
        x->drained += len - (size_t)n;
        x->request_sent = reactor_now();
    }
}

/* route answered the request itself: send that answer, as relay_fail_request
 * sends ours, and take nothing more from the client. */
static void answer_from_route(struct relay *relay, struct buffer *answer)
{
    relay->x.phase = PHASE_DRAIN;
    connection_write(&relay->client, answer->data + answer->start, buffer_length(answer));
    relay->x.response_started = true;
    connection_shutdown_write(&relay->client);
}

/* Asks the config's route function. Returns true if the request is
 * settled (answered, by route or with 500); otherwise x->pool is the
 * pool route chose, or NULL to route by Host. */
static bool ask_route(struct relay *relay)
{
    struct exchange *x = &relay->x;
    struct route_request rq = { x->request, relay->head.data, &x->info, relay->client_address };
    struct buffer answer = BUFFER_INIT;
    struct pool *pool = NULL;

    switch (route_call(&relay->config->route, &rq, x->head_method, &pool, &answer)) {
    case ROUTE_DEFAULT:
        return false;
    case ROUTE_POOL:
        x->pool = pool;
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
    struct exchange *x = &relay->x;
    const char *buf = relay->head.data;
    int status = request_check(x->request, buf, &relay->config->policy, &x->info);

    x->head_method = is_head_request(relay);
    if (status != 0) {
        relay_fail_request(relay, status);
        return;
    }
    if (relay->config->route.L != NULL && ask_route(relay))
        return;
    if (x->pool == NULL)
        x->pool = router_route(&relay->config->router, buf + x->info.host.offset,
                               x->info.host.length);
    if (x->pool == NULL) {
        relay_fail_request(relay, 421);
        return;
    }
    /* Active checks say every backend is down: do not make the client
     * wait for connects that will fail. */
    if (pool_all_failing(x->pool)) {
        relay_fail_request(relay, 503);
        return;
    }
    x->phase = PHASE_CONNECTING;
    if (relay_connect_next(relay) == -1)
        answer_bad_gateway(relay);
}

/* Bytes of the head arrived: keep them and parse on. */
static void head_received(struct relay *relay, const char *data, size_t len)
{
    struct exchange *x = &relay->x;
    int rc;

    /* The parser's state (some 3 KiB, most of it room for 100 headers) is
     * allocated with the first byte, not with the connection: an idle
     * connection costs a few hundred bytes. */
    if (x->request == NULL) {
        x->request = malloc(sizeof *x->request);
        if (x->request == NULL) {
            log_msg("out of memory reading a request head");
            connection_fail(&relay->client);
            return;
        }
        http_request_init(x->request);
    }
    if (buffer_append(&relay->head, data, len) == -1) {
        log_msg("out of memory reading a request head");
        connection_fail(&relay->client);
        return;
    }
    rc = http_parse_request(x->request, relay->head.data, buffer_length(&relay->head),
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
    struct exchange *x = &relay->x;
    struct buffer head = BUFFER_INIT;
    size_t head_length = x->request->head_length;

    if (request_write_head(x->request, relay->head.data, &x->info, &relay->config->policy,
                           relay->client_address, &head) == -1) {
        buffer_free(&head);
        log_msg("out of memory writing a request head");
        relay_fail_request(relay, 502);
        return;
    }
    connection_write(&x->upstream->conn, head.data, buffer_length(&head));
    buffer_free(&head);

    x->phase = x->info.body.done ? PHASE_DRAIN : PHASE_BODY;
    if (x->phase == PHASE_DRAIN)
        x->request_sent = reactor_now();
    x->last_body_read = reactor_now();
    if (buffer_length(&relay->head) > head_length) {
        const char *rest = relay->head.data + head_length;
        size_t rest_length = buffer_length(&relay->head) - head_length;
        if (x->phase == PHASE_BODY)
            forward_body(relay, rest, rest_length);
        else
            x->drained += rest_length;
    }
    /* The parsed request pointed into the head: done with both. */
    buffer_free(&relay->head);
    free(x->request);
    x->request = NULL;
    request_info_free(&x->info);
    /* The client hung up while we were connecting: what it sent before is
     * all the body there will be. */
    if (x->phase == PHASE_BODY && relay->client.read_done)
        exchange_client_finished(relay);
}

/* The backend socket became writable (or failed) while connecting. */
static void connect_finished(struct relay *relay)
{
    struct exchange *x = &relay->x;
    int error = net_connect_result(x->upstream->conn.handler.fd);

    if (error == 0) {
        x->upstream->conn.connecting = false;
        backend_succeeded(x->pool, x->current);
        send_request(relay);
        return;
    }
    bool retry = relay_attempt_failed(relay, error);
    relay_release_backend(relay);
    if (!retry || relay_connect_next(relay) == -1)
        answer_bad_gateway(relay);
}

void exchange_client_data(struct relay *relay, const char *data, size_t len)
{
    switch (relay->x.phase) {
    case PHASE_HEAD:
        head_received(relay, data, len);
        break;
    case PHASE_BODY:
        forward_body(relay, data, len);
        break;
    case PHASE_CONNECTING:
        /* Not read while connecting (see relay.c); should bytes come
         * anyway, they wait with the head for the backend. */
        if (buffer_append(&relay->head, data, len) == -1)
            connection_fail(&relay->client);
        break;
    case PHASE_DRAIN:
        relay->x.drained += len;
        break;
    }
}

void exchange_client_finished(struct relay *relay)
{
    struct exchange *x = &relay->x;

    relay->client.read_done = true;
    if (x->phase == PHASE_HEAD && buffer_length(&relay->head) == 0) {
        /* Connected and left without a word: nothing to answer. */
        x->phase = PHASE_DRAIN;
        connection_shutdown_write(&relay->client);
    } else if (x->phase == PHASE_HEAD) {
        relay_fail_request(relay, 400); /* the head was cut short */
    } else if (x->phase == PHASE_BODY) {
        /* The body was cut short. If the backend already answered, let its
         * answer through; otherwise the request is broken. */
        if (x->response_started)
            x->phase = PHASE_DRAIN;
        else
            relay_fail_request(relay, 400);
    }
}

/* The backend finished its response (EOF), or broke. */
static void backend_finished(struct relay *relay, bool broken)
{
    struct exchange *x = &relay->x;

    if (broken)
        connection_fail(&x->upstream->conn);
    x->upstream->conn.read_done = true;
    if (!x->response_started) {
        log_msg("backend %s closed the connection without answering", x->current->name);
        relay_fail_request(relay, 502);
    } else {
        connection_shutdown_write(&relay->client);
    }
}

static void backend_readable(struct relay *relay)
{
    struct exchange *x = &relay->x;
    char buffer[RELAY_READ_SIZE];

    for (int i = 0; i < RELAY_READS_PER_EVENT; i++) {
        struct connection *backend = relay_backend(relay);
        ssize_t n;

        if (backend == NULL || backend->read_done || backend->paused)
            return;
        n = connection_read(backend, buffer, sizeof buffer);
        if (n > 0) {
            x->response_started = true;
            connection_write(&relay->client, buffer, (size_t)n);
            if (connection_queued(&relay->client) > RELAY_HIGH_WATER)
                backend->paused = true;
        } else if (n == 0) {
            backend_finished(relay, false);
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return;
        } else {
            backend_finished(relay, true);
        }
    }
}

void exchange_upstream_event(void *owner, uint32_t events)
{
    struct relay *relay = owner;
    struct connection *backend = relay_backend(relay);

    relay->last_activity = reactor_now();
    if (backend->connecting) {
        connect_finished(relay);
    } else {
        if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
            connection_flush(backend);
        /* Read on hang-up and error too: the last bytes and the EOF may
         * still be waiting in the socket, and we must not lose them. */
        if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
            backend_readable(relay);
    }
    relay_settle_or_close(relay); /* relay may be closed: touch nothing after */
}

void exchange_free(struct relay *relay)
{
    relay_release_backend(relay);
    free(relay->x.request);
    relay->x.request = NULL;
    request_info_free(&relay->x.info);
}
