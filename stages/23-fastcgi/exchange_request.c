/* exchange_request.c -- the request side of an exchange (exchange.c has
 * the phases): the head parsed as it arrives and checked, the request
 * routed (the config's route function, the plain port's own answers, or
 * the Host), a backend connection got (an idle one, or a connect, failing
 * over to the next address and backend), and the request sent on, head
 * then body, as the pool's protocol writes them (backend_protocol.h). */
#include "exchange_private.h"

#include "accept_encoding.h"
#include "acme.h"
#include "backend.h"
#include "backend_protocol.h"
#include "buffering.h"
#include "connection.h"
#include "filter_compress.h"
#include "https_redirect.h"
#include "limit.h"
#include "log.h"
#include "net.h"
#include "request.h"
#include "route.h"
#include "router.h"
#include "stats.h"
#include "upstream.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void send_request(struct relay *relay);

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
            x->current = backend_pick_keyed(x->pool, x->tried, x->balance_key);
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
    x->head_sent = reactor_now();
    x->request_sent = reactor_now();
    buffering_send_body(relay);
}

void exchange_connect(struct relay *relay, int status)
{
    struct exchange *x = relay->x;

    x->phase = PHASE_CONNECTING;
    x->producer = &exchange_backend_producer;
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

/* Out of memory writing the request for the backend: 502. */
static void request_unwritable(struct relay *relay)
{
    log_msg("out of memory writing a request");
    exchange_fail_request(relay, 502);
}

int exchange_write_body(struct relay *relay, const char *data, size_t len)
{
    const struct backend_protocol *protocol = relay->x->pool->protocol;
    struct buffer out = BUFFER_INIT;

    /* Unchanged bytes need no copy. */
    if (protocol->passes_through) {
        connection_write(&relay->x->upstream->conn, data, len);
        return 0;
    }
    if (protocol->request_body(data, len, &out) == -1) {
        buffer_free(&out);
        request_unwritable(relay);
        return -1;
    }
    connection_write(&relay->x->upstream->conn, buffer_bytes(&out), buffer_length(&out));
    buffer_free(&out);
    return 0;
}

int exchange_write_body_end(struct relay *relay)
{
    struct buffer out = BUFFER_INIT;

    if (relay->x->pool->protocol->request_end(&out) == -1) {
        buffer_free(&out);
        request_unwritable(relay);
        return -1;
    }
    if (buffer_length(&out) > 0)
        connection_write(&relay->x->upstream->conn, buffer_bytes(&out), buffer_length(&out));
    buffer_free(&out);
    return 0;
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
    if (x->max_body > 0 && x->body_streamed > x->max_body) {
        stats_count_refused(x->site, REFUSED_BODY_SIZE);
        exchange_fail_request(relay, 413);
        return;
    }
    if (exchange_write_body(relay, data, (size_t)n) == -1)
        return;
    x->last_body_read = reactor_now();
    if (x->info.body.done) {
        if (exchange_write_body_end(relay) == -1)
            return;
        exchange_request_read(relay);
        if ((size_t)n < len && buffer_append(&relay->head, data + n, len - (size_t)n) == -1)
            relay->client_ops->fail(relay);
    }
}

/* The value of the cookie called `name` in the Cookie headers of view
 * ("a=1; b=2"), in *value; false if none has it. */
static bool find_cookie(const struct request_view *view, const char *name, struct http_span *value)
{
    size_t name_length = strlen(name);

    for (size_t i = request_find_header(view, "cookie", 0); i < view->header_count;
         i = request_find_header(view, "cookie", i + 1)) {
        const char *p = view->buf + view->headers[i].value.offset;
        const char *end = p + view->headers[i].value.length;

        while (p < end) {
            const char *pair_end = memchr(p, ';', (size_t)(end - p));
            if (pair_end == NULL)
                pair_end = end;
            while (p < pair_end && (*p == ' ' || *p == '\t'))
                p++;
            if ((size_t)(pair_end - p) > name_length && memcmp(p, name, name_length) == 0 &&
                p[name_length] == '=') {
                const char *v = p + name_length + 1, *v_end = pair_end;
                while (v_end > v && (v_end[-1] == ' ' || v_end[-1] == '\t'))
                    v_end--;
                value->offset = (size_t)(v - view->buf);
                value->length = (size_t)(v_end - v);
                return true;
            }
            p = pair_end + 1;
        }
    }
    return false;
}

/* The hash of what the pool's hash_key names for this request: its path
 * (without the query), a header's or a cookie's value, or else its
 * client's address (exchange_client: trusted_proxies and PROXY apply). */
static uint64_t balance_key(const struct relay *relay)
{
    const struct exchange *x = relay->x;
    const struct pool *pool = x->pool;
    struct request_view view = relay_request_view(relay);
    const char *client = exchange_client(relay);
    struct http_span value;
    size_t i;

    switch (pool->hash_key) {
    case HASH_KEY_PATH:
        if (x->info.path != NULL) /* NULL: OPTIONS * */
            return pool_hash_of(x->info.path, x->info.path_length);
        break;
    case HASH_KEY_HEADER:
        i = request_find_header(&view, pool->hash_name, 0);
        if (i < view.header_count)
            return pool_hash_of(view.buf + view.headers[i].value.offset, view.headers[i].value.length);
        break;
    case HASH_KEY_COOKIE:
        if (find_cookie(&view, pool->hash_name, &value))
            return pool_hash_of(view.buf + value.offset, value.length);
        break;
    case HASH_KEY_CLIENT:
        break;
    }
    return pool_hash_of(client, strlen(client));
}

/* Asks the config's route function. Returns true if the request is
 * settled (answered, by route or with 500); otherwise x->pool is the
 * pool route chose, or NULL to route by Host. */
static bool ask_route(struct relay *relay)
{
    struct exchange *x = relay->x;
    struct request_view view = relay_request_view(relay);
    struct route_request rq = { &view, &x->info, exchange_client(relay) };
    struct buffer answer = BUFFER_INIT;
    struct pool *pool = NULL;

    x->keep_client = x->request_complete && exchange_client_may_stay(relay);
    switch (route_call(&relay->config->route, &rq, x->head_method, "",
                       &pool, &answer)) {
    case ROUTE_DEFAULT:
        return false;
    case ROUTE_POOL:
        x->pool = pool;
        return false;
    case ROUTE_ANSWER:
        if (!x->request_complete)
            x->phase = PHASE_DRAIN;
        exchange_answer_ourselves(relay, buffer_bytes(&answer), buffer_length(&answer));
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
    struct request_view view = relay_request_view(relay);
    struct buffer answer = BUFFER_INIT;
    int rc = https_plain_answer(relay->config, &view, &x->info, x->head_method, "", &answer);

    if (rc == 0)
        return false;
    if (rc == -1) {
        buffer_free(&answer);
        log_msg("out of memory answering a plain HTTP request");
        exchange_fail_request(relay, 500);
        return true;
    }
    x->keep_client = x->request_complete && exchange_client_may_stay(relay);
    if (!x->request_complete)
        x->phase = PHASE_DRAIN;
    exchange_answer_ourselves(relay, buffer_bytes(&answer), buffer_length(&answer));
    buffer_free(&answer);
    return true;
}

/* limit_conn: a connection over it is answered 429 and closed (HTTP/2:
 * GOAWAY). Returns true if so. */
static bool refuse_connection(struct relay *relay)
{
    const struct relay *conn = relay->parent != NULL ? relay->parent : relay;

    if (!conn->over_conn_limit)
        return false;
    stats_count_refused(relay->x->site, REFUSED_LIMIT_CONN);
    exchange_refuse(relay, 429, NULL, true);
    /* HTTP/2: the stream gets its 429, the client a GOAWAY (no new
     * streams); those in flight finish, with 429s too. */
    if (relay->parent != NULL)
        h2_relay_goaway(relay->parent);
    return true;
}

/* The head is complete: check it, route it, get a backend connection. */
static void request_ready(struct relay *relay)
{
    struct exchange *x = relay->x;
    struct request_view view = relay_request_view(relay);
    const char *buf = view.buf;
    int status = request_check(&view, &relay->config->policy, &x->info);

    exchange_find_client(relay);
    access_log_capture(relay);
    x->head_method = exchange_is_head_request(relay);
    /* The head is gone when the response starts: the coding is chosen now. */
    x->accepted = filter_compress_accepted(&view, ENCODING_ALL);
    /* A target rsp refuses (an encoded slash, ...) under the ACME path is
     * one more name that is not a token there: 404, as for the others. */
    if (status == 400 && !relay->tls && relay->config->tls.acme_webroot != NULL &&
        view.target.length >= sizeof ACME_PREFIX - 1 &&
        memcmp(buf + view.target.offset, ACME_PREFIX, sizeof ACME_PREFIX - 1) == 0)
        status = 404;
    if (status != 0) {
        exchange_fail_request(relay, status);
        return;
    }
    /* It counts for the site its Host names, whether route or the Host
     * then chooses the pool. */
    x->site = router_site_stats(&relay->config->router, buf + x->info.host.offset,
                                x->info.host.length);
    /* And its line goes to that site's log, if it has one of its own. */
    /* And its output settings (response_output.h) are that site's, if any. */
    x->output_site = router_find(&relay->config->router, buf + x->info.host.offset, x->info.host.length);
    if (relay->config->operations.site_logs)
        x->log_site = x->output_site;
    x->minor_version = view.minor_version;
    x->client_keep_alive = x->info.keep_alive;
    x->upgrade = x->info.upgrade.length > 0;
    /* With no body, the head is the whole request. */
    x->request_complete = x->info.body.done;
    if (refuse_connection(relay))
        return;
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
    if (!exchange_admit(relay))
        return;
    if (x->pool->fastcgi != NULL && !exchange_fastcgi_route(relay))
        return;
    if (x->pool->root_fd >= 0) {
        exchange_serve_file(relay); /* a pool of files: no backend */
        return;
    }
    /* Active checks say every backend is down: do not make the client
     * wait for connects that will fail. */
    if (pool_all_failing(x->pool)) {
        exchange_fail_request(relay, 503);
        return;
    }
    if (x->pool->balance == BALANCE_HASH)
        x->balance_key = balance_key(relay);
    buffering_begin(relay);
}

/* Parses what the buffer holds of the head (new bytes were appended). */
void exchange_parse_head(struct relay *relay)
{
    struct exchange *x = exchange_begin(relay);
    int rc;

    if (x == NULL) {
        relay->client_ops->fail(relay);
        return;
    }

    /* The parser's state (some 3 KiB, most of it room for 100 headers) is
     * allocated with the first byte, not with the connection: an idle
     * connection costs a few hundred bytes. */
    if (x->request == NULL) {
        x->request = malloc(sizeof *x->request);
        if (x->request == NULL) {
            log_msg("out of memory reading a request head");
            relay->client_ops->fail(relay);
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
void exchange_consume_request(struct relay *relay, size_t used)
{
    struct exchange *x = relay->x;

    buffer_consume(&relay->head, used);
    free(x->request);
    x->request = NULL;
    request_info_free(&x->info);
}

/* The backend connection is ready: send it our head, then whatever body
 * bytes came in with the head, as the pool's protocol writes them. */
static void send_request(struct relay *relay)
{
    struct exchange *x = relay->x;
    const struct backend_protocol *protocol = x->pool->protocol;
    struct buffer head = BUFFER_INIT;
    size_t head_length = x->request->head_length, used = head_length;
    bool keep_backend = relay->config->keepalive.backend_idle > 0;

    if (protocol->request_head(relay, keep_backend, &head) == -1) {
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
        if (protocol->request_body(rest, (size_t)n, &head) == -1) {
            buffer_free(&head);
            request_unwritable(relay);
            return;
        }
        used += (size_t)n;
    }
    if (x->info.body.done && x->body_buffer == NULL && protocol->request_end(&head) == -1) {
        buffer_free(&head);
        request_unwritable(relay);
        return;
    }
    connection_write(&x->upstream->conn, head.data, buffer_length(&head));
    x->head_sent = reactor_now();
    stats_add(&x->current->stats->requests, 1);
    /* A connection from the pool may turn out to have been closed by the
     * backend as we wrote: keep what we sent, to send it again once. */
    if (x->info.body.done && x->reused && !x->retried)
        x->replay = head;
    else
        buffer_free(&head);
    exchange_consume_request(relay, used);
    if (x->info.body.done)
        exchange_request_read(relay);
    /* The client hung up while we were connecting: what it sent before is
     * all the body there will be. */
    else if (relay->client.read_done)
        exchange_client_finished(relay);
    buffering_send_body(relay);
}

/* The backend socket became writable (or failed) while connecting. */
void exchange_connect_finished(struct relay *relay)
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
        relay->client_ops->fail(relay);
        return;
    }

    switch (x->phase) {
    case PHASE_HEAD:
        if (buffer_append(&relay->head, data, len) == -1) {
            log_msg("out of memory reading a request head");
            relay->client_ops->fail(relay);
            return;
        }
        exchange_parse_head(relay);
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
            relay->client_ops->fail(relay);
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
        relay->client_ops->fail(relay);
        return;
    }

    relay->client.read_done = true;
    if (x->phase == PHASE_HEAD && buffer_length(&relay->head) == 0) {
        /* Connected (or done) and left without a word: nothing to answer. */
        x->phase = PHASE_DRAIN;
        relay->client_ops->end(relay);
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
