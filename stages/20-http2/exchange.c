/* exchange.c -- one request and its response, from the request's first
 * byte to the response's last.
 *
 * The request goes through these phases:
 *
 *   HEAD        read the request head into the relay's buffer and parse
 *               it as it arrives; refuse it (4xx) if it is malformed or
 *               too large
 *   BUFFER      (chapter 17) routed: read the whole body into memory and a
 *               temporary file before any backend is chosen (buffering.c)
 *   CONNECTING  route it to a pool (the config's route function decides,
 *               or else the Host header), and get a backend connection: an
 *               idle one from the backend's pool, or a new connect; the
 *               client is not read meanwhile, so failing over to another
 *               backend is always safe; 421 / 502 if impossible; route may
 *               also answer by itself, or fail (500)
 *   BODY        send our version of the head (always HTTP/1.1), then
 *               forward exactly the body the head announced
 *               (Content-Length or chunked) and not a byte more
 *   SENT        the whole request is read; what the client sends next is
 *               its next request, left unread until this one is answered
 *   DRAIN       the connection closes after this response: whatever else
 *               the client sends is read and dropped, so that closing its
 *               socket never throws away our answer with a reset
 *   TUNNEL      the backend accepted an upgrade (101): bytes both ways
 *
 * The response is parsed too: its head (interim 1xx heads are passed on
 * and the next one read), then its body by the framing the head gives
 * (response.h), with the same backpressure as chapter 04: the backend is
 * not read while the client's queue is above RELAY_HIGH_WATER. When the
 * response has ended where its framing says, the backend connection goes
 * back to its pool and, if the client connection stays open, the next
 * exchange begins (relay.c calls exchange_next). */
#define _GNU_SOURCE /* memmem */
#include "relay_private.h"

#include "access_log.h"
#include "acme.h"
#include "buffering.h"

#include "backend.h"
#include "config.h"
#include "connection.h"
#include "http.h"
#include "https_redirect.h"
#include "log.h"
#include "net.h"
#include "reply.h"
#include "request.h"
#include "response.h"
#include "route.h"
#include "router.h"
#include "stats.h"
#include "upstream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>

/* What a backend's response head may be: as large as a client's may, and
 * no line longer than that either (long Set-Cookie lines exist). */
static const struct http_limits response_limits = { 65536, 65536 };

static void send_request(struct relay *relay);

/* Detaches the backend connection, if any, giving it back to its pool
 * when `reusable`. */
static void release_upstream(struct relay *relay, bool reusable)
{
    if (relay->x->upstream == NULL)
        return;
    upstream_release(relay->x->upstream, reusable, &relay->config->keepalive);
    relay->x->upstream = NULL;
}

void exchange_release_backend(struct relay *relay)
{
    release_upstream(relay, false);
}

/* The response is over and the exchange is done with its upstream. Bytes
 * of the request still queued for it go out first: a backend that
 * answered before the end of the body gets the rest of it, as a polite
 * client sends it, and its connection then closes. Otherwise it is pooled
 * if `reusable`. */
static void finish_upstream(struct relay *relay, bool reusable)
{
    struct exchange *x = relay->x;

    /* It answered before it had the whole buffered body: the rest goes
     * out first, from memory or the file, then the connection closes. */
    if (x->upstream != NULL && buffering_finish_after_body(relay))
        return;
    if (x->upstream != NULL && connection_queued(&x->upstream->conn) > 0) {
        upstream_finish(x->upstream, relay->config->timeouts.body);
        x->upstream = NULL;
        return;
    }
    release_upstream(relay, reusable);
}

/* True if the request's method is HEAD, as far as we know it: the parser
 * may have stopped before or after the request line. */
static bool is_head_request(const struct relay *relay)
{
    const struct exchange *x = relay->x;

    if (x->head_method)
        return true;
    if (x->request == NULL || relay->head.data == NULL)
        return false;
    return x->request->method.length == 4 &&
           memcmp(relay_bytes(relay) + x->request->method.offset, "HEAD", 4) == 0;
}

/* True if the client connection may carry another request after this
 * one: the client wants it, the config allows it, this is not the last
 * request keepalive_requests allows, and rsp is not stopping. */
static bool client_may_stay(const struct relay *relay)
{
    const struct keepalive *k = &relay->config->keepalive;

    return relay->x->client_keep_alive && k->timeout > 0 && relay->served + 1 < k->requests &&
           !relay->client.read_done && !relay->set->draining;
}

/* How the response must say the client connection goes on. */
static enum response_connection client_connection(const struct relay *relay)
{
    if (!relay->x->keep_client)
        return CONNECTION_CLOSE;
    return relay->x->minor_version == 0 ? CONNECTION_KEEP_ALIVE : CONNECTION_PERSIST;
}

/* The header lines that end rsp's own answers: how the connection goes
 * on, after the HSTS line on an HTTPS connection (tls.hsts). `room` holds
 * the two together when both are needed. */
static const char *own_lines(const struct relay *relay, char *room, size_t size)
{
    const char *connection = response_connection_line(client_connection(relay));
    const char *hsts = relay->config->tls.hsts_line;

    if (!relay->tls || hsts[0] == '\0')
        return connection;
    snprintf(room, size, "%s%s", hsts, connection);
    return room;
}

/* The request was read whole: the client's next bytes are its next
 * request, or are drained if this response is over and closes. */
static void request_read(struct relay *relay)
{
    struct exchange *x = relay->x;

    x->request_complete = true;
    x->request_sent = reactor_now();
    x->phase = x->response_done ? PHASE_DRAIN : PHASE_SENT;
    /* A backend that answered before the end of the body has it all now
     * (or soon: finish_upstream); its connection is not trusted with
     * another request. */
    if (x->response_done)
        finish_upstream(relay, false);
}

/* The last byte of the response is in the client's queue. */
static void response_finished(struct relay *relay)
{
    struct exchange *x = relay->x;

    x->response_done = true;
    x->response_ended = reactor_now();
    if (x->phase == PHASE_SENT || x->phase == PHASE_DRAIN)
        finish_upstream(relay, x->upstream_reusable);
    /* Otherwise the backend answered before it had the whole body: it
     * keeps its connection and takes the rest (request_read), unless the
     * client leaves first. */
    if (!x->keep_client) {
        /* After what still waits on disk for the client, if anything
         * does (buffering.c). */
        if (!buffering_response_pending(relay))
            connection_shutdown_write(&relay->client);
        if (x->phase == PHASE_SENT)
            x->phase = PHASE_DRAIN;
    }
}

static void consume_request(struct relay *relay, size_t used);

/* Appends one field for the log to x->log_fields, recording its length
 * in slot i (data NULL: not there). Returns 0 or -1. */
static int keep_field(struct exchange *x, int i, const char *data, size_t length)
{
    x->log_lengths[i] = data == NULL ? SIZE_MAX : length;
    return data == NULL ? 0 : buffer_append(&x->log_fields, data, length);
}

/* The value of the request header `name`, or NULL. */
static const char *request_header(const struct relay *relay, const char *name, size_t *length)
{
    const struct http_request *rq = relay->x->request;
    const char *buf = relay_bytes(relay);
    size_t n = strlen(name);

    for (size_t i = 0; i < rq->header_count; i++) {
        const struct http_header *h = &rq->headers[i];
        if (h->name.length == n && strncasecmp(buf + h->name.offset, name, n) == 0) {
            *length = h->value.length;
            return buf + h->value.offset;
        }
    }
    return NULL;
}

/* Copies what the access log needs of the request (its head is gone by
 * the time the response ends): the request line as far as it came (up to
 * its end of line, at most max_line bytes), and, from a whole head,
 * Referer, User-Agent and Host. Once per exchange; nothing without a log. */
static void log_request_fields(struct relay *relay)
{
    struct exchange *x = relay->x;
    const char *buf = relay_bytes(relay), *referer = NULL, *agent = NULL, *host = NULL, *eol;
    size_t have = buffer_length(&relay->head), line, referer_length = 0, agent_length = 0, host_length = 0;

    if (!access_log_enabled() || x->log_captured || have == 0)
        return;
    /* Empty lines before a request line are allowed (and skipped). */
    while (have > 0 && (*buf == '\r' || *buf == '\n')) {
        buf++;
        have--;
    }
    if (have > relay->config->limits.max_line)
        have = relay->config->limits.max_line;
    eol = memchr(buf, '\n', have);
    line = eol != NULL ? (size_t)(eol - buf) : have;
    if (line > 0 && buf[line - 1] == '\r')
        line--;
    if (x->request != NULL && x->request->head_length > 0) {
        referer = request_header(relay, "Referer", &referer_length);
        agent = request_header(relay, "User-Agent", &agent_length);
        host = request_header(relay, "Host", &host_length);
    }
    if (keep_field(x, 0, buf, line) == -1 || keep_field(x, 1, referer, referer_length) == -1 ||
        keep_field(x, 2, agent, agent_length) == -1 || keep_field(x, 3, host, host_length) == -1) {
        buffer_free(&x->log_fields);
        return; /* out of memory: this request goes unlogged */
    }
    x->log_captured = true;
}

/* Writes the exchange's access log line, if it had a request: with the
 * status the client got, or 499 (nginx's "client closed request") if it
 * left before any answer. */
static void log_exchange(struct relay *relay)
{
    struct exchange *x = relay->x;
    const char *fields = buffer_bytes(&x->log_fields);
    struct access_entry e;
    struct log_text text[4];

    if (!access_log_enabled() || !x->log_captured)
        return;
    for (int i = 0; i < 4; i++) {
        size_t length = x->log_lengths[i];
        text[i] = (struct log_text){ length == SIZE_MAX ? NULL : fields, length == SIZE_MAX ? 0 : length };
        if (length != SIZE_MAX)
            fields += length;
    }
    e = (struct access_entry){
        .client = relay->client_address,
        .host = text[3],
        .port = relay->server_port,
        .request = text[0],
        .status = x->status != 0 ? x->status : 499,
        .body_bytes = x->body_bytes,
        .referer = text[1],
        .agent = text[2],
        .seconds = (x->response_ended > 0 ? x->response_ended : reactor_now()) - x->head_started,
        .backend = x->status != 0 && x->response_began && x->current != NULL ? x->current->name : NULL,
    };
    access_log_write(&e);
}

/* Sends an answer of rsp's own instead of a backend's: data, a whole
 * response as reply_append writes it ("HTTP/1.1 NNN ...", head, body). */
static void answer_ourselves(struct relay *relay, const char *data, size_t length)
{
    struct exchange *x = relay->x;
    const char *end = memmem(data, length, "\r\n\r\n", 4);

    connection_write(&relay->client, data, length);
    x->status = length > 12 ? atoi(data + 9) : 0;
    x->body_bytes += end != NULL ? length - (size_t)(end + 4 - data) : 0;
    x->response_started = true;
    x->phase = x->keep_client ? PHASE_SENT : PHASE_DRAIN;
    /* The connection stays: the next request follows the head in the
     * buffer (there was no body, or keep_client would be false). */
    if (x->keep_client && x->request != NULL)
        consume_request(relay, x->request->head_length);
    response_finished(relay);
}

void exchange_fail_request(struct relay *relay, int status)
{
    struct exchange *x = exchange_begin(relay);
    struct buffer answer = BUFFER_INIT;
    char lines[128];

    if (x == NULL) {
        connection_fail(&relay->client);
        return;
    }

    /* A request refused while its head is read has not been captured for
     * the log yet (request_ready does it); later, the head is gone. */
    if (x->phase == PHASE_HEAD)
        log_request_fields(relay);
    exchange_release_backend(relay);
    if (x->response_started && connection_drop_held(&relay->client)) {
        /* The head is still held with the body bytes read with it
         * (connection_cork): the client has had nothing yet, and can
         * have a clean answer instead. */
        x->response_started = false;
        x->body_bytes = 0;
    }
    if (x->response_started) {
        /* Part of a response was sent: nothing sensible can follow it. */
        x->phase = PHASE_DRAIN;
        connection_fail(&relay->client);
        return;
    }
    x->keep_client = x->request_complete && client_may_stay(relay);
    if (!x->request_complete)
        x->phase = PHASE_DRAIN;
    if (reply_error(&answer, status, is_head_request(relay), own_lines(relay, lines, sizeof lines)) == -1) {
        log_msg("out of memory answering %d", status);
        buffer_free(&answer);
        x->phase = PHASE_DRAIN;
        connection_fail(&relay->client);
        return;
    }
    answer_ourselves(relay, buffer_bytes(&answer), buffer_length(&answer));
    buffer_free(&answer);
}

/* The least time between two lines about a shortage of our own. */
#define SHORTAGE_REPORT_INTERVAL 1.0

/* Logs that a connect failed for a shortage of our own and the request
 * gets a 503: at most one line a second, with how many such requests there
 * were since the last line, as the listener counts the clients it turns
 * away (a shortage hits every request at once). */
static void report_shortage(const struct exchange *x, int error)
{
    static unsigned long answered;  /* requests answered 503 since the last line */
    static double reported_at = -SHORTAGE_REPORT_INTERVAL;
    double now = reactor_now();

    answered++;
    if (now - reported_at < SHORTAGE_REPORT_INTERVAL)
        return;
    log_msg("cannot connect to backend %s: %s; answered %lu request(s) with 503",
            x->current->name, strerror(error), answered);
    answered = 0;
    reported_at = now;
}

/* A connect to x->address failed with `error`. If that is our own
 * shortage (out of file descriptors, memory or local ports), no backend is
 * to blame and any other would fail the same way: returns false, and the
 * request is to get a 503. Otherwise marks the backend down once every
 * address of it has failed, and returns true: trying another backend makes
 * sense. */
bool exchange_attempt_failed(struct relay *relay, int error)
{
    struct exchange *x = relay->x;

    if (error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM ||
        error == EADDRNOTAVAIL) {
        report_shortage(x, error);
        return false;
    }
    if (x->address->ai_next == NULL)
        backend_failed(x->pool, x->current, error);
    return true;
}

/* Gets an idle connection of the next backend, or starts a connect to the
 * next address of the current backend or else to the next backend the pool
 * offers. Returns 1 with a connection ready, 0 when a connect is under
 * way, -1 when nothing is left to try, -2 when we are short of descriptors
 * (or memory, or local ports) ourselves. */
static int connect_next(struct relay *relay)
{
    struct exchange *x = relay->x;

    for (;;) {
        if (x->address != NULL)
            x->address = x->address->ai_next;
        if (x->address == NULL) {
            x->current = backend_pick(x->pool, x->tried);
            if (x->current == NULL)
                return -1;
            x->tried |= backend_bit(x->pool, x->current);
            x->address = x->current->addresses;
            /* After the pooling race, a new connection: another idle one
             * may be just as stale. */
            if (!x->retried) {
                x->upstream = upstream_take_idle(x->current, exchange_upstream_event, relay);
                if (x->upstream != NULL) {
                    x->reused = true;
                    return 1;
                }
            }
        }
        x->reused = false;
        x->upstream = upstream_connect(x->current, x->address, exchange_upstream_event, relay);
        if (x->upstream == NULL) {
            if (!exchange_attempt_failed(relay, errno))
                return -2;
            continue;
        }
        x->attempt_started = reactor_now();
        return 0;
    }
}

/* Writes the request we kept to a new connection: the pooling race. */
static void send_again(struct relay *relay)
{
    struct exchange *x = relay->x;

    connection_write(&x->upstream->conn, buffer_bytes(&x->replay), buffer_length(&x->replay));
    buffer_free(&x->replay);
    x->phase = PHASE_SENT;
    x->request_sent = reactor_now();
    buffering_send_body(relay);
}

void exchange_connect(struct relay *relay, int status)
{
    struct exchange *x = relay->x;

    x->phase = PHASE_CONNECTING;
    switch (connect_next(relay)) {
    case 1:
        if (buffer_length(&x->replay) > 0)
            send_again(relay);
        else
            send_request(relay);
        break;
    case 0:
        break;
    case -2: /* our own shortage: no backend is to blame */
        exchange_fail_request(relay, 503);
        break;
    default:
        if (status == 502)
            pool_unreachable(x->pool);
        exchange_fail_request(relay, status);
    }
}

/* Passes body bytes to the backend, as far as the framing says the body
 * goes; what follows it is the client's next request. */
static void forward_body(struct relay *relay, const char *data, size_t len)
{
    struct exchange *x = relay->x;
    ssize_t n = body_frame(&x->info.body, data, len);

    if (n == -1) {
        exchange_fail_request(relay, 400); /* invalid chunked framing */
        return;
    }
    /* A chunked body streamed (request_buffering = false) is bounded too,
     * its framing counted with it (chapter 17). */
    x->body_streamed += (uint64_t)n;
    if (relay->config->buffering.max_body > 0 && x->body_streamed > relay->config->buffering.max_body) {
        exchange_fail_request(relay, 413);
        return;
    }
    connection_write(&x->upstream->conn, data, (size_t)n);
    x->last_body_read = reactor_now();
    if (x->info.body.done) {
        request_read(relay);
        if ((size_t)n < len && buffer_append(&relay->head, data + n, len - (size_t)n) == -1)
            connection_fail(&relay->client);
    }
}

/* Asks the config's route function. Returns true if the request is
 * settled (answered, by route or with 500); otherwise x->pool is the
 * pool route chose, or NULL to route by Host. */
static bool ask_route(struct relay *relay)
{
    struct exchange *x = relay->x;
    struct route_request rq = { x->request, relay_bytes(relay), &x->info, relay->client_address };
    struct buffer answer = BUFFER_INIT;
    struct pool *pool = NULL;
    char lines[128];

    x->keep_client = x->request_complete && client_may_stay(relay);
    switch (route_call(&relay->config->route, &rq, x->head_method, own_lines(relay, lines, sizeof lines),
                       &pool, &answer)) {
    case ROUTE_DEFAULT:
        return false;
    case ROUTE_POOL:
        x->pool = pool;
        return false;
    case ROUTE_ANSWER:
        if (!x->request_complete)
            x->phase = PHASE_DRAIN;
        answer_ourselves(relay, buffer_bytes(&answer), buffer_length(&answer));
        buffer_free(&answer);
        return true;
    case ROUTE_FAILED:
        break;
    }
    buffer_free(&answer);
    exchange_fail_request(relay, 500);
    return true;
}

/* On the plain port of a site that serves HTTPS: an ACME challenge, or a
 * redirect to https (https_redirect.h). Returns true if rsp answered. */
static bool answer_plain_http(struct relay *relay)
{
    struct exchange *x = relay->x;
    struct buffer answer = BUFFER_INIT;
    bool keep = x->request_complete && client_may_stay(relay);
    int rc;

    x->keep_client = keep;
    rc = https_plain_answer(relay->config, x->request, relay_bytes(relay), &x->info, x->head_method,
                            response_connection_line(client_connection(relay)), &answer);
    x->keep_client = false;
    if (rc == 0)
        return false;
    if (rc == -1) {
        buffer_free(&answer);
        log_msg("out of memory answering a plain HTTP request");
        exchange_fail_request(relay, 500);
        return true;
    }
    x->keep_client = keep;
    if (!x->request_complete)
        x->phase = PHASE_DRAIN;
    answer_ourselves(relay, buffer_bytes(&answer), buffer_length(&answer));
    buffer_free(&answer);
    return true;
}

/* The head is complete: check it, route it, get a backend connection. */
static void request_ready(struct relay *relay)
{
    struct exchange *x = relay->x;
    const char *buf = relay_bytes(relay);
    int status = request_check(x->request, buf, &relay->config->policy, &x->info);

    log_request_fields(relay);
    x->head_method = is_head_request(relay);
    /* A target rsp refuses (an encoded slash, ...) under the ACME path is
     * one more name that is not a token there: 404, as for the others. */
    if (status == 400 && !relay->tls && relay->config->tls.acme_webroot != NULL &&
        x->request->target.length >= sizeof ACME_PREFIX - 1 &&
        memcmp(buf + x->request->target.offset, ACME_PREFIX, sizeof ACME_PREFIX - 1) == 0)
        status = 404;
    if (status != 0) {
        exchange_fail_request(relay, status);
        return;
    }
    /* It counts for the site its Host names, whether route or the Host
     * then chooses the pool. */
    x->site = router_site_stats(&relay->config->router, buf + x->info.host.offset,
                                x->info.host.length);
    x->minor_version = x->request->minor_version;
    x->client_keep_alive = x->info.keep_alive;
    x->upgrade = x->info.upgrade.length > 0;
    /* With no body, the head is the whole request. */
    x->request_complete = x->info.body.done;
    if (!relay->tls && answer_plain_http(relay))
        return;
    if (relay->config->route.L != NULL && ask_route(relay))
        return;
    if (x->pool == NULL)
        x->pool = router_route(&relay->config->router, buf + x->info.host.offset,
                               x->info.host.length);
    if (x->pool == NULL) {
        exchange_fail_request(relay, 421);
        return;
    }
    /* Active checks say every backend is down: do not make the client
     * wait for connects that will fail. */
    if (pool_all_failing(x->pool)) {
        exchange_fail_request(relay, 503);
        return;
    }
    buffering_begin(relay);
}

/* Parses what the buffer holds of the head (new bytes were appended). */
static void parse_head(struct relay *relay)
{
    struct exchange *x = exchange_begin(relay);
    int rc;

    if (x == NULL) {
        connection_fail(&relay->client);
        return;
    }

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
    if (x->head_started == 0) {
        x->head_started = reactor_now();
        relay_use_current_config(relay);
        stats_gauge_own(&stats_row()->in_flight, 1);
    }
    rc = http_parse_request(x->request, relay_bytes(relay), buffer_length(&relay->head),
                            &relay->config->limits);
    if (rc == HTTP_DONE)
        request_ready(relay);
    else if (rc != HTTP_INCOMPLETE)
        exchange_fail_request(relay, rc);
}

/* The parsed request pointed into the buffer: done with both. What is
 * left in the buffer is the client's next request. */
static void consume_request(struct relay *relay, size_t used)
{
    struct exchange *x = relay->x;

    buffer_consume(&relay->head, used);
    free(x->request);
    x->request = NULL;
    request_info_free(&x->info);
}

/* The backend connection is ready: send it our head, then whatever body
 * bytes came in with the head. */
static void send_request(struct relay *relay)
{
    struct exchange *x = relay->x;
    struct buffer head = BUFFER_INIT;
    size_t head_length = x->request->head_length, used = head_length;
    bool keep_backend = relay->config->keepalive.backend_idle > 0;

    if (request_write_head(x->request, relay_bytes(relay), &x->info, &relay->config->policy,
                           relay->client_address, relay->server_port, relay->tls, keep_backend,
                           &head) == -1) {
        buffer_free(&head);
        log_msg("out of memory writing a request head");
        exchange_fail_request(relay, 502);
        return;
    }
    x->phase = PHASE_BODY;
    x->last_body_read = reactor_now();
    if (!x->info.body.done && buffer_length(&relay->head) > head_length) {
        const char *rest = relay_bytes(relay) + head_length;
        ssize_t n = body_frame(&x->info.body, rest, buffer_length(&relay->head) - head_length);
        if (n == -1) {
            buffer_free(&head);
            exchange_fail_request(relay, 400); /* invalid chunked framing */
            return;
        }
        if (buffer_append(&head, rest, (size_t)n) == -1) {
            buffer_free(&head);
            log_msg("out of memory writing a request");
            exchange_fail_request(relay, 502);
            return;
        }
        used += (size_t)n;
    }
    connection_write(&x->upstream->conn, head.data, buffer_length(&head));
    stats_add(&x->current->stats->requests, 1);
    /* A connection from the pool may turn out to have been closed by the
     * backend as we wrote: keep what we sent, to send it again once. */
    if (x->info.body.done && x->reused && !x->retried)
        x->replay = head;
    else
        buffer_free(&head);
    consume_request(relay, used);
    if (x->info.body.done)
        request_read(relay);
    /* The client hung up while we were connecting: what it sent before is
     * all the body there will be. */
    else if (relay->client.read_done)
        exchange_client_finished(relay);
    buffering_send_body(relay);
}

/* The backend socket became writable (or failed) while connecting. */
static void connect_finished(struct relay *relay)
{
    struct exchange *x = relay->x;
    int error = net_connect_result(x->upstream->conn.handler.fd);

    if (error == 0) {
        x->upstream->conn.connecting = false;
        backend_succeeded(x->pool, x->current);
        if (buffer_length(&x->replay) > 0)
            send_again(relay);
        else
            send_request(relay);
        return;
    }
    bool retry = exchange_attempt_failed(relay, error);
    exchange_release_backend(relay);
    if (retry)
        exchange_connect(relay, 502);
    else
        exchange_fail_request(relay, 503);
}

void exchange_client_data(struct relay *relay, const char *data, size_t len)
{
    struct exchange *x = exchange_begin(relay);

    if (x == NULL) {
        connection_fail(&relay->client);
        return;
    }

    switch (x->phase) {
    case PHASE_HEAD:
        if (buffer_append(&relay->head, data, len) == -1) {
            log_msg("out of memory reading a request head");
            connection_fail(&relay->client);
            return;
        }
        parse_head(relay);
        break;
    case PHASE_BODY:
        forward_body(relay, data, len);
        break;
    case PHASE_BUFFER:
        buffering_client_data(relay, data, len);
        break;
    case PHASE_CONNECTING:
    case PHASE_SENT:
        /* Not read now (see relay.c), except to learn of a hang-up: the
         * bytes wait in the buffer, for the backend or as the next
         * request. */
        if (buffer_append(&relay->head, data, len) == -1)
            connection_fail(&relay->client);
        break;
    case PHASE_DRAIN:
        x->drained += len;
        break;
    case PHASE_TUNNEL:
        connection_write(&x->upstream->conn, data, len);
        break;
    }
}

void exchange_client_finished(struct relay *relay)
{
    struct exchange *x = exchange_begin(relay);

    if (x == NULL) {
        connection_fail(&relay->client);
        return;
    }

    relay->client.read_done = true;
    if (x->phase == PHASE_HEAD && buffer_length(&relay->head) == 0) {
        /* Connected (or done) and left without a word: nothing to answer. */
        x->phase = PHASE_DRAIN;
        connection_shutdown_write(&relay->client);
    } else if (x->phase == PHASE_HEAD || x->phase == PHASE_BUFFER) {
        exchange_fail_request(relay, 400); /* the head, or the body, was cut short */
    } else if (x->phase == PHASE_BODY) {
        /* The body was cut short. If the backend already answered, let its
         * answer through; otherwise the request is broken. */
        if (!x->response_started) {
            exchange_fail_request(relay, 400);
        } else {
            x->phase = PHASE_DRAIN;
            if (x->response_done)
                exchange_release_backend(relay);
        }
    } else if (x->phase == PHASE_TUNNEL && x->upstream != NULL) {
        connection_shutdown_write(&x->upstream->conn);
    }
}

const struct exchange exchange_idle = { .phase = PHASE_HEAD };

struct exchange *exchange_begin(struct relay *relay)
{
    struct exchange *x;

    if (relay->x != &exchange_idle)
        return relay->x;
    /* Zeroed: PHASE_HEAD, no request yet, every buffer BUFFER_INIT. */
    x = calloc(1, sizeof *x);
    if (x == NULL) {
        log_msg("out of memory starting a request");
        return NULL;
    }
    relay->x = x;
    return x;
}

void exchange_next(struct relay *relay)
{
    exchange_free(relay);
    exchange_release(relay); /* an idle connection holds no exchange */
    relay->served++;
    relay->idle_since = reactor_now();
    if (buffer_length(&relay->head) > 0)
        parse_head(relay); /* a pipelined request */
    else if (relay->client.read_done)
        exchange_client_finished(relay);
}

/* The backend's response cannot be passed on: a 502 if the client has
 * not had a byte of it yet, and the backend connection is not reused. */
static void bad_response(struct relay *relay, const char *what)
{
    log_msg("backend %s: %s", relay->x->current->name, what);
    exchange_fail_request(relay, 502);
}

/* Bytes of a response body (or of a tunnel) for the client, counted for
 * the access log. */
static void to_client(struct relay *relay, const char *data, size_t len)
{
    relay->x->body_bytes += len;
    if (relay->x->response_buffered)
        buffering_to_client(relay, data, len);
    else
        connection_write(&relay->client, data, len);
}

/* Takes the chunked coding off for an HTTP/1.0 client (body.h's on_data). */
static void dechunked_data(void *context, const char *data, size_t len)
{
    struct relay *relay = context;

    to_client(relay, data, len);
}

/* Bytes of the response body. */
static void response_body(struct relay *relay, const char *data, size_t len)
{
    struct exchange *x = relay->x;
    ssize_t n;

    if (x->framing == FRAMING_CLOSE) {
        to_client(relay, data, len);
        return;
    }
    if (x->response_done) {
        x->upstream_reusable = false; /* more than it announced: not to be trusted */
        return;
    }
    n = body_frame(&x->response_body, data, len);
    if (n == -1) {
        log_msg("backend %s: malformed chunked response body; cut off", x->current->name);
        x->upstream_reusable = false;
        exchange_fail_request(relay, 502);
        return;
    }
    if (!x->dechunk)
        to_client(relay, data, (size_t)n);
    if (x->response_body.done) {
        if ((size_t)n < len)
            x->upstream_reusable = false;
        response_finished(relay);
    }
}

/* A 1xx other than 101: passed on to an HTTP/1.1 client, dropped for
 * HTTP/1.0 ones, which do not know them. */
static int forward_interim(struct relay *relay, const char *buf)
{
    struct buffer out = BUFFER_INIT;

    if (relay->x->minor_version == 0)
        return 0;
    if (response_write_head(relay->x->response, buf, CONNECTION_PERSIST, false, NULL, &out) == -1)
        return -1;
    connection_write(&relay->client, out.data, buffer_length(&out));
    buffer_free(&out);
    return 0;
}

/* The final head is parsed: decide how the response ends and how the
 * client connection goes on, and send the client our version of it. */
static int start_response(struct relay *relay, const char *buf)
{
    struct exchange *x = relay->x;
    struct response_info info;
    struct buffer out = BUFFER_INIT;
    bool upgrading = x->response->status == 101;
    enum response_connection mode;

    if (upgrading && !x->upgrade)
        return 502; /* a 101 nobody asked for */
    if (response_check(x->response, buf, x->head_method, &info) != 0)
        return 502;
    x->framing = info.framing;
    x->upstream_reusable = !info.backend_closes && !upgrading;
    x->dechunk = x->minor_version == 0 && info.framing == FRAMING_CHUNKED;
    x->keep_client = x->phase == PHASE_SENT && info.framing != FRAMING_CLOSE && !x->dechunk &&
                     !upgrading && client_may_stay(relay);
    mode = upgrading ? CONNECTION_UPGRADE : client_connection(relay);
    buffering_response_start(relay, upgrading);
    if (response_write_head(x->response, buf, mode, x->dechunk,
                            relay->tls ? relay->config->tls.hsts_line : NULL, &out) == -1) {
        log_msg("out of memory writing a response head");
        return 502;
    }
    connection_write(&relay->client, out.data, buffer_length(&out));
    buffer_free(&out);
    x->response_started = true;
    x->status = x->response->status;
    if (info.framing == FRAMING_LENGTH)
        body_framer_init_length(&x->response_body, info.length);
    else if (info.framing == FRAMING_CHUNKED)
        body_framer_init_chunked(&x->response_body);
    if (x->dechunk) {
        x->response_body.on_data = dechunked_data;
        x->response_body.context = relay;
    }
    if (upgrading) {
        /* From here on, bytes both ways; what the client sent after its
         * request goes first. */
        x->phase = PHASE_TUNNEL;
        if (buffer_length(&relay->head) > 0) {
            connection_write(&x->upstream->conn, relay_bytes(relay), buffer_length(&relay->head));
            buffer_free(&relay->head);
        }
    }
    return 0;
}

/* Bytes of the response head arrived: parse on; pass on interim heads,
 * and begin the body after the final one. */
static void response_head(struct relay *relay, const char *data, size_t len)
{
    struct exchange *x = relay->x;

    if (buffer_append(&x->response_head, data, len) == -1) {
        bad_response(relay, "out of memory reading a response head");
        return;
    }
    for (;;) {
        const char *buf = buffer_bytes(&x->response_head);
        size_t have = buffer_length(&x->response_head), used;
        int rc;

        if (x->response == NULL) {
            x->response = malloc(sizeof *x->response);
            if (x->response == NULL) {
                bad_response(relay, "out of memory reading a response head");
                return;
            }
            http_request_init(x->response);
        }
        rc = http_parse_response(x->response, buf, have, &response_limits);
        if (rc == HTTP_INCOMPLETE)
            return;
        if (rc != HTTP_DONE) {
            bad_response(relay, "sent something that is not an HTTP/1.x response head");
            return;
        }
        used = x->response->head_length;
        if (x->response->status < 200 && x->response->status != 101) {
            if (forward_interim(relay, buf) == -1) {
                bad_response(relay, "out of memory passing on an interim response");
                return;
            }
            free(x->response);
            x->response = NULL;
            buffer_consume(&x->response_head, used);
            continue;
        }
        if (start_response(relay, buf) != 0) {
            bad_response(relay, "sent a response whose framing is broken (Content-Length or "
                                "Transfer-Encoding)");
            return;
        }
        free(x->response);
        x->response = NULL;
        /* The rest, if any, is the body: keep it from the buffer we free. */
        struct buffer rest = x->response_head;
        x->response_head = (struct buffer)BUFFER_INIT;
        if (x->phase == PHASE_TUNNEL) {
            to_client(relay, buffer_bytes(&rest) + used, have - used);
        } else if (x->framing == FRAMING_NONE) {
            if (have > used)
                x->upstream_reusable = false; /* bytes after a response without a body */
            response_finished(relay);
        } else if (have > used) {
            response_body(relay, buffer_bytes(&rest) + used, have - used);
        }
        buffer_free(&rest);
        return;
    }
}

/* True if the backend has not started the final response's head yet:
 * the response is still ahead of us. */
static bool head_pending(const struct exchange *x)
{
    return !x->response_started;
}

static void response_data(struct relay *relay, const char *data, size_t len)
{
    struct exchange *x = relay->x;

    if (!x->response_began) {
        x->response_began = true;
        buffer_free(&x->replay); /* the connection was alive after all */
    }
    if (x->phase == PHASE_TUNNEL) {
        to_client(relay, data, len);
    } else if (head_pending(x)) {
        /* The head and the body bytes read with it leave in one writev:
         * one packet instead of two (chapter 16). */
        connection_cork(&relay->client);
        response_head(relay, data, len);
        connection_uncork(&relay->client);
    } else {
        response_body(relay, data, len);
    }
}

/* The backend closed its side (EOF), or broke. */
static void backend_finished(struct relay *relay, bool broken)
{
    struct exchange *x = relay->x;

    if (broken)
        connection_fail(&x->upstream->conn);
    x->upstream->conn.read_done = true;
    x->upstream_reusable = false;
    if (!x->response_began && buffer_length(&x->replay) > 0) {
        /* The pooling race: the backend closed this idle connection as we
         * sent the request. It never saw it; send it again, once, on a new
         * connection. */
        x->retried = true;
        exchange_release_backend(relay);
        x->address = NULL;
        x->tried = 0;
        exchange_connect(relay, 502);
    } else if (!x->response_began) {
        bad_response(relay, "closed the connection without answering");
    } else if (x->phase == PHASE_TUNNEL) {
        connection_shutdown_write(&relay->client);
    } else if (head_pending(x)) {
        bad_response(relay, "closed the connection in the middle of a response head");
    } else if (x->framing == FRAMING_CLOSE) {
        response_finished(relay); /* its end is the close */
    } else if (!x->response_done) {
        log_msg("backend %s closed the connection before the end of its response; cut off",
                x->current->name);
        x->phase = PHASE_DRAIN;
        connection_fail(&relay->client);
    }
}

/* True when the next bytes from the backend may go to the client without
 * rsp looking at them, spliced (chapter 16): body bytes of a response
 * framed by its length or by the backend's close, after the head, for a
 * client on plain HTTP, with `splice` on. A chunked body is read, to find
 * its end; a TLS client's bytes must be encrypted by us. */
static bool response_splices(const struct relay *relay)
{
    const struct exchange *x = relay->x;

    return relay->config->scaling.splice && !relay->tls && x->response_started &&
           !x->response_done && x->phase != PHASE_TUNNEL && !x->dechunk &&
           buffering_may_splice(relay) &&
           (x->framing == FRAMING_CLOSE ||
            (x->framing == FRAMING_LENGTH &&
             body_framer_remaining(&x->response_body) > RELAY_SPLICE_TAIL));
}

/* What a splice of the response did: SPLICE_MORE and SPLICE_STOP as
 * backend_read_once's true and false, or SPLICE_COPY when the bytes must
 * be read and copied after all (no pipe to be had, or the client has
 * bytes queued). */
enum { SPLICE_STOP, SPLICE_MORE, SPLICE_COPY };

static int response_splice(struct relay *relay, struct connection *backend)
{
    struct exchange *x = relay->x;
    size_t len = SIZE_MAX;
    ssize_t n;

    /* The last bytes of a body framed by its length are read, not
     * spliced: a read asks for more than is left, and so sees whatever
     * a backend sends after the end, which makes its connection unfit to
     * carry another request (response_body). A splice of exactly what is
     * left would leave such bytes in the socket, to be taken for the
     * answer to the next request. */
    if (x->framing == FRAMING_LENGTH)
        len = (size_t)(body_framer_remaining(&x->response_body) - RELAY_SPLICE_TAIL);
    n = connection_splice_from(&relay->client, backend, len);
    if (n > 0) {
        x->body_bytes += (uint64_t)n;
        if (x->framing == FRAMING_LENGTH) {
            body_framer_skip(&x->response_body, (uint64_t)n);
            if (x->response_body.done)
                response_finished(relay);
        }
        return SPLICE_MORE;
    }
    if (n == 0)
        backend_finished(relay, false);
    else if (errno == ENOBUFS)
        return SPLICE_COPY;
    else if (errno != EAGAIN && errno != EWOULDBLOCK)
        backend_finished(relay, true);
    return SPLICE_STOP;
}

/* One read from the backend, handed on (or one splice). Returns false
 * when there is nothing more to read now (EAGAIN, end of file, failure). */
static bool backend_read_once(struct relay *relay, struct connection *backend)
{
    char buffer[RELAY_READ_SIZE];
    ssize_t n;

    if (response_splices(relay)) {
        int rc = response_splice(relay, backend);
        if (rc != SPLICE_COPY)
            return rc == SPLICE_MORE;
    }
    n = connection_read(backend, buffer, sizeof buffer);
    if (n > 0) {
        response_data(relay, buffer, (size_t)n);
        return true;
    }
    if (n == 0)
        backend_finished(relay, false);
    else if (errno != EAGAIN && errno != EWOULDBLOCK)
        backend_finished(relay, true);
    return false;
}

static void backend_readable(struct relay *relay)
{
    for (int i = 0; i < RELAY_READS_PER_EVENT; i++) {
        struct connection *backend = relay_backend(relay);

        if (backend == NULL || backend->read_done || backend->paused)
            return;
        bool more = backend_read_once(relay, backend);

        /* The client is not keeping up: wait until it has taken what it
         * has. Spliced bytes left in the pipe mean its socket is full. */
        if (relay_backend(relay) == backend && buffering_client_full(relay))
            backend->paused = true;
        if (!more)
            return;
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
    struct exchange *x = relay->x;

    if (x == &exchange_idle)
        return;

    log_exchange(relay);
    if (x->head_started > 0) {
        /* Counted as logged: 499 for a client that left before any answer. */
        stats_gauge_own(&stats_row()->in_flight, -1);
        stats_count_request(x->site != NULL ? x->site : relay->config->router.unknown_stats,
                            x->status != 0 ? x->status : 499);
    }
    buffer_free(&x->log_fields);
    exchange_release_backend(relay);
    free(x->request);
    x->request = NULL;
    request_info_free(&x->info);
    free(x->response);
    x->response = NULL;
    buffer_free(&x->response_head);
    buffer_free(&x->replay);
    buffering_free(relay);
}

void exchange_release(struct relay *relay)
{
    if (relay->x != &exchange_idle)
        free(relay->x);
    relay->x = (struct exchange *)&exchange_idle;
}
