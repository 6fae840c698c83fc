/* h2_relay.c -- HTTP/2 to clients: a TLS connection whose handshake chose
 * ALPN h2 is a relay whose bytes go to an HTTP/2 session (h2.h), and each
 * stream of that session is a relay of its own, with one exchange, as a
 * request of an HTTP/1.1 connection has.
 *
 * A stream's relay has no socket (connection_init_none): its client side
 * is the session (h2_stream_client below). Its request head, checked by
 * the session (RFC 9113), is written as the HTTP/1.1 head it stands for
 * ("GET /p HTTP/1.1", Host: from :authority, the fields as they came, the
 * cookie crumbs joined, Content-Length, or Transfer-Encoding: chunked when
 * a body of unknown length follows) and handed to the exchange as an
 * HTTP/1.1 client's bytes would be: so the same parser, limits, checks,
 * routing, route(), forwarded headers, buffering, timeouts and access log
 * apply to it, and what the backend gets is what rsp would send for that
 * HTTP/1.1 request. The session refused every field such a head could not
 * carry (CR, LF, NUL, connection-specific fields), so nothing can be
 * smuggled through the translation; the parser checks it again.
 *
 * Flow control is backpressure both ways. Request body bytes are given
 * back to the client's window (h2_consume) only once they have moved on:
 * into the backend's queue while it is below RELAY_LOW_WATER, or into the
 * body buffer (chapter 17). A response body waits in the stream's buffer
 * in the session; the backend is not read while that buffer is above
 * RELAY_HIGH_WATER (the client_ops queued figure), as for an HTTP/1
 * client's socket queue.
 *
 * A stream ends when the session says it closed (on_stream_closed): its
 * exchange is freed then (logged, counted; a backend connection still in
 * the middle of a response is closed, never pooled). The connection ends
 * when the session is done, the client leaves, or its own timeout fires:
 * with no stream, keepalive_timeout after the last one ended; a stream's
 * own waits have their own deadlines (relay_time.c), as a request's. */
#include "relay_private.h"

#include "access_log.h"
#include "buffering.h"
#include "generation.h"
#include "h2.h"
#include "log.h"
#include "reactor.h"
#include "response.h"
#include "stats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

/* RFC 9113, 7: the error codes rsp resets streams with. */
#define H2_NO_ERROR 0x0
#define H2_INTERNAL_ERROR 0x2

/* An HTTP/2 connection: its session and its streams' relays. */
struct h2_client {
    struct h2_session *session;
    struct relay *streams;           /* a list through prev/next */
    size_t stream_count;
    bool leaving;                    /* rsp told the client to go (reload, stop) */
    bool over;                       /* the session ended at once (a fatal error) */
    size_t drained;                  /* bytes read and dropped after the session's end */
};

static const struct client_ops h2_stream_client;

/* The stream relay of id on conn, or NULL. */
static struct relay *stream_of(struct relay *conn, int32_t id)
{
    for (struct relay *s = conn->h2->streams; s != NULL; s = s->next)
        if (s->stream_id == id)
            return s;
    return NULL;
}

static struct h2_session *session_of(const struct relay *stream)
{
    return stream->parent->h2->session;
}

/* Frees a stream's relay at the end of the reactor's batch (its exchange
 * is freed already). */
static void stream_release(struct reactor_deferred *deferred)
{
    struct relay *stream = (struct relay *)deferred; /* its first member */

    exchange_release(stream);
    free(stream);
}

/* Ends a stream's relay: its exchange is logged, counted and freed (its
 * backend connection closed if it still has one), and the relay is
 * unlinked from its connection. */
static void stream_end(struct relay *stream)
{
    struct relay *conn = stream->parent;

    if (stream->prev != NULL)
        stream->prev->next = stream->next;
    else
        conn->h2->streams = stream->next;
    if (stream->next != NULL)
        stream->next->prev = stream->prev;
    conn->h2->stream_count--;
    stats_gauge_own(&stats_row()->h2_streams, -1);
    if (conn->h2->stream_count == 0)
        conn->idle_since = reactor_now();
    timer_disarm(&stream->timer);
    exchange_free(stream);
    buffer_free(&stream->head);
    generation_release(stream->config);
    stream->deferred.release = stream_release;
    reactor_defer(&stream->deferred);
}

/* Writes the HTTP/1.1 head a stream's request stands for into out. A body
 * without content-length goes chunked (*chunked set). Returns 0 or -1. */
static int request_text(const struct h2_request_head *head, struct buffer *out, bool *chunked)
{
    char length[32];
    int rc = 0;

    *chunked = !head->has_content_length && !head->end_stream;
    rc |= buffer_append(out, head->method.data, head->method.length);
    rc |= buffer_append(out, " ", 1);
    rc |= buffer_append(out, head->path.data, head->path.length);
    rc |= buffer_append(out, " HTTP/1.1\r\nHost: ", 17);
    rc |= buffer_append(out, head->authority.data, head->authority.length);
    rc |= buffer_append(out, "\r\n", 2);
    for (size_t i = 0; i < head->header_count; i++) {
        const struct h2_header *h = &head->headers[i];
        rc |= buffer_append(out, h->name.data, h->name.length);
        rc |= buffer_append(out, ": ", 2);
        if (h->value.length > 0)
            rc |= buffer_append(out, h->value.data, h->value.length);
        rc |= buffer_append(out, "\r\n", 2);
    }
    if (head->has_content_length) {
        int n = snprintf(length, sizeof length, "Content-Length: %" PRIu64 "\r\n", head->content_length);
        rc |= buffer_append(out, length, (size_t)n);
    } else if (*chunked) {
        rc |= buffer_append(out, "Transfer-Encoding: chunked\r\n", 28);
    }
    rc |= buffer_append(out, "\r\n", 2);
    return rc == 0 ? 0 : -1;
}

/* A new stream: a relay of its own, like its connection's but without a
 * socket. Returns it, or NULL if out of memory. */
static struct relay *stream_new(struct relay *conn, int32_t id)
{
    struct relay *stream = calloc(1, sizeof *stream);

    if (stream == NULL)
        return NULL;
    stream->parent = conn;
    stream->stream_id = id;
    stream->set = conn->set;
    stream->tls = true;
    stream->config = config_hold(conn->config);
    stream->x = (struct exchange *)&exchange_idle;
    stream->head = (struct buffer)BUFFER_INIT;
    memcpy(stream->client_address, conn->client_address, sizeof stream->client_address);
    stream->client_port = conn->client_port;
    memcpy(stream->server_port, conn->server_port, sizeof stream->server_port);
    connection_init_none(&stream->client);
    stream->client.read_done = stream->client.write_done = false;
    stream->client_ops = &h2_stream_client;
    relay_time_start(stream);
    stream->next = conn->h2->streams;
    if (stream->next != NULL)
        stream->next->prev = stream;
    conn->h2->streams = stream;
    conn->h2->stream_count++;
    stats_gauge_own(&stats_row()->h2_streams, 1);
    return stream;
}

static void on_request(void *closure, int32_t id, const struct h2_request_head *head)
{
    struct relay *conn = closure, *stream = stream_new(conn, id);
    struct buffer text = BUFFER_INIT;

    if (stream == NULL || request_text(head, &text, &stream->chunked_body) == -1) {
        log_msg("out of memory starting an HTTP/2 stream for %s", conn->client_address);
        buffer_free(&text);
        if (stream != NULL)
            stream_end(stream);
        h2_reset_stream(conn->h2->session, id, H2_INTERNAL_ERROR);
        return;
    }
    stream->last_activity = reactor_now();
    exchange_client_data(stream, buffer_bytes(&text), buffer_length(&text));
    buffer_free(&text);
    if (head->end_stream)
        exchange_client_finished(stream);
}

static void on_data(void *closure, int32_t id, const char *data, size_t len, bool end)
{
    struct relay *stream = stream_of(closure, id);
    char size[24];

    if (stream == NULL)
        return;
    stream->last_activity = reactor_now();
    if (len > 0) {
        stream->unconsumed += len;
        if (stream->chunked_body) {
            int n = snprintf(size, sizeof size, "%zx\r\n", len);
            exchange_client_data(stream, size, (size_t)n);
            exchange_client_data(stream, data, len);
            exchange_client_data(stream, "\r\n", 2);
        } else {
            exchange_client_data(stream, data, len);
        }
    }
    if (end) {
        if (stream->chunked_body)
            exchange_client_data(stream, "0\r\n\r\n", 5);
        exchange_client_finished(stream);
    }
}

static void on_stream_closed(void *closure, int32_t id, uint32_t error_code)
{
    struct relay *stream = stream_of(closure, id);

    (void)error_code;
    if (stream != NULL)
        stream_end(stream);
}

static void on_drained(void *closure, int32_t id)
{
    /* The backend is let go on by the settle that follows every flush. */
    (void)closure;
    (void)id;
}

static void on_goaway(void *closure, bool from_client, uint32_t error_code, const char *reason)
{
    struct relay *conn = closure;

    if (!from_client && error_code != H2_NO_ERROR)
        log_msg("HTTP/2 client %s: GOAWAY (error %" PRIu32 "): %s", conn->client_address, error_code,
                reason != NULL ? reason : "");
}

/* A request the session answered itself (431: its head too large; 405:
 * CONNECT) and no exchange saw: counted and logged as an HTTP/1.1 request
 * refused before its head was read whole is, with the site unknown and
 * the request line "-". A stream only reset (status 0) was not answered. */
static void on_rejected(void *closure, int32_t id, int status, const char *reason)
{
    struct relay *conn = closure;
    const struct operations *o = &conn->config->operations;
    struct access_entry e = { .client = conn->client_address, .port = conn->server_port, .status = status };

    (void)id;
    (void)reason;
    if (status == 0)
        return;
    stats_count_request(conn->config->router.unknown_stats, status);
    stats_count_protocol(true);
    if (o->log != NULL)
        access_log_write(o->log, (enum access_format)o->access_log_format, &e);
}

/* The client side of a stream (struct client_ops). */

/* Sends a response head as the stream's HEADERS: its fields, and rsp's
 * HSTS field (relay_hsts_line, split at its colon). HTTP/2 has no
 * Connection field: mode is HTTP/1's. Returns 0, or -1 if out of memory. */
static int stream_head(struct relay *stream, const struct response_head *head, enum response_connection mode)
{
    const char *hsts = relay_hsts_line(stream, head), *colon = strchr(hsts, ':');
    struct h2_header *fields = malloc((head->count + 1) * sizeof *fields);
    size_t n = 0;
    int rc;

    (void)mode;
    if (fields == NULL)
        return -1;
    for (size_t i = 0; i < head->count; i++)
        fields[n++] = (struct h2_header){
            { head->fields[i].name, head->fields[i].name_length },
            { head->fields[i].value, head->fields[i].value_length },
        };
    if (colon != NULL) /* "Name: value\r\n" */
        fields[n++] = (struct h2_header){ { hsts, (size_t)(colon - hsts) },
                                          { colon + 2, strlen(colon + 2) - 2 } };
    rc = h2_respond(session_of(stream), stream->stream_id, head->status, fields, n,
                    head->body != RESPONSE_BODY_NONE);
    free(fields);
    return rc;
}

static void stream_fail(struct relay *stream)
{
    if (!stream->client.broken)
        h2_reset_stream(session_of(stream), stream->stream_id,
                        stream->x->response_done ? H2_NO_ERROR : H2_INTERNAL_ERROR);
    stream->client.broken = stream->client.read_done = stream->client.write_done = true;
}

static void stream_proceed(struct relay *stream)
{
    h2_respond(session_of(stream), stream->stream_id, 100, NULL, 0, false);
}

static void stream_write(struct relay *stream, const char *data, size_t length)
{
    if (stream->client.write_done || length == 0)
        return;
    if (h2_write_body(session_of(stream), stream->stream_id, data, length) == -1)
        stream_fail(stream);
}

static size_t stream_queued(const struct relay *stream)
{
    return h2_stream_queued(session_of(stream), stream->stream_id);
}

static void stream_end_response(struct relay *stream)
{
    if (stream->client.write_done)
        return;
    stream->client.write_done = true;
    /* A response without a body (HEAD, 204, 304) ended with its head: then
     * this is refused, harmlessly. */
    h2_end_body(session_of(stream), stream->stream_id);
}

static bool stream_take_back(struct relay *stream)
{
    (void)stream;
    return false; /* submitted is sent */
}

/* A stream's body goes as DATA frames, never chunked, never spliced. */
static const struct client_ops h2_stream_client = {
    .head = stream_head, .proceed = stream_proceed, .write = stream_write,
    .queued = stream_queued, .end = stream_end_response, .fail = stream_fail,
    .take_back = stream_take_back, .hold = NULL, .splice_from = NULL, .is_stream = true,
};

/* Applies the rules that link a stream to its backend after anything
 * happened (relay_settle_or_close's, for a stream). */
static void stream_settle(struct relay *stream)
{
    struct exchange *x;
    struct connection *backend;

    buffering_settle(stream);
    x = stream->x;
    backend = relay_backend(stream);
    if (x->phase == PHASE_BODY && (backend == NULL || backend->write_done))
        x->phase = PHASE_DRAIN;
    /* Body bytes that moved on open the client's window again: not while
     * they wait for a backend, nor while the backend's queue is full. */
    if (stream->unconsumed > 0 && x->phase != PHASE_CONNECTING &&
        (x->phase != PHASE_BODY || backend == NULL || connection_queued(backend) < RELAY_LOW_WATER)) {
        h2_consume(session_of(stream), stream->stream_id, stream->unconsumed);
        stream->unconsumed = 0;
    }
    /* While its window stays shut, the client's silence is not its fault
     * (relay_time.c: body_timeout). */
    stream->client.paused = stream->unconsumed > 0;
    if (backend != NULL && stream->client.write_done && x->response_done)
        backend->read_done = true;
    if (stream->client.broken) {
        exchange_release_backend(stream);
        backend = NULL;
    }
    exchange_resume_producer(stream);
    if ((backend != NULL && connection_update(backend) == -1) || relay_time_arm(stream) == -1) {
        log_msg("out of memory serving an HTTP/2 stream of %s", stream->client_address);
        stream_fail(stream);
        exchange_release_backend(stream);
    }
}

/* True once the session has nothing more to say or hear: a fatal error,
 * or its last GOAWAY sent with no stream left. */
static bool session_finished(const struct h2_client *h)
{
    return h->over || h2_session_done(h->session);
}

/* Reads what the client sent into the session, while it wants it; after
 * the session's end, reads and drops it (the lingering close, below), up
 * to RELAY_DRAIN_LIMIT. */
static void client_readable(struct relay *conn)
{
    struct h2_client *h = conn->h2;
    char buffer[RELAY_READ_SIZE];

    for (int i = 0; i < RELAY_READS_PER_EVENT; i++) {
        bool finished = session_finished(h);
        ssize_t n;

        if (conn->client.read_done || (!finished && !h2_session_want_read(h->session)))
            return;
        n = connection_read(&conn->client, buffer, sizeof buffer);
        if (n > 0 && finished) {
            h->drained += (size_t)n;
            if (h->drained > RELAY_DRAIN_LIMIT)
                conn->client.read_done = true;
        } else if (n > 0) {
            if (h2_session_receive(h->session, buffer, (size_t)n) == -1)
                h->over = true;
        } else if (n == 0) {
            conn->client.read_done = true; /* the client left: its streams end */
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return;
        } else {
            connection_fail(&conn->client);
        }
    }
}

void h2_relay_settle_or_close(struct relay *relay)
{
    struct relay *conn = relay->parent != NULL ? relay->parent : relay;
    struct h2_client *h = conn->h2;
    struct relay *stream, *next;

    if (relay != conn && relay->last_activity > conn->last_activity)
        conn->last_activity = relay->last_activity;
    if (conn->set->draining && !h->leaving) {
        h->leaving = true;
        h2_goaway(h->session, true); /* rsp stops: streams in flight finish */
    }
    /* Told to go, with no stream left: the end, without waiting for the
     * answer to the notice's PING, which some clients never send (python's
     * h2 drops it with the GOAWAY it read). A stream the client opened
     * meanwhile is above the final GOAWAY's last stream id: it knows that
     * rsp never saw it, and may send it again on a new connection. */
    if (h->leaving && h->stream_count == 0 && !h->over)
        h2_goaway(h->session, false);
    if (!h->over && h2_session_flush(h->session) == -1)
        h->over = true;
    for (stream = h->streams; stream != NULL; stream = next) {
        next = stream->next;
        stream_settle(stream);
    }
    if (!h->over && h2_session_flush(h->session) == -1)
        h->over = true;
    /* A session that ended at once (a flood, a connection error) has no
     * stream left to answer: their exchanges end now, their backends too. */
    if (session_finished(h))
        while (h->streams != NULL)
            stream_end(h->streams);
    if (conn->client.broken || conn->client.read_done) {
        relay_close(conn);
        return;
    }
    /* The session's last GOAWAY is out: FIN after it, then a lingering
     * close, as relay.c's after an answer. A client still sending (a
     * flood) would otherwise have its unread bytes turn our close into a
     * reset, which can destroy the GOAWAY at the client before it read
     * it; so what it sends is read and dropped until its end of file, or
     * RELAY_LINGER (relay_time.c). */
    if (session_finished(h) && connection_queued(&conn->client) == 0 && !conn->client.write_done &&
        !conn->client.shutdown_pending) {
        connection_shutdown_write(&conn->client);
        conn->give_up_at = reactor_now() + RELAY_LINGER;
    }
    conn->client.paused = !session_finished(h) && !h2_session_want_read(h->session);
    if (connection_update(&conn->client) == -1 || relay_time_arm(conn) == -1) {
        log_msg("out of memory serving HTTP/2 to %s", conn->client_address);
        relay_close(conn);
    }
}

void h2_relay_handle(struct relay *conn, uint32_t events)
{
    events = connection_events(&conn->client, events);
    conn->last_activity = reactor_now();
    if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
        connection_flush(&conn->client);
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
        client_readable(conn);
    h2_relay_settle_or_close(conn); /* conn may be closed: touch nothing after */
}

int h2_relay_begin(struct relay *conn, const char *data, size_t len)
{
    static const struct h2_callbacks callbacks = {
        .on_request = on_request, .on_data = on_data, .on_stream_closed = on_stream_closed,
        .on_drained = on_drained, .on_goaway = on_goaway, .on_rejected = on_rejected,
    };
    struct h2_settings settings;

    conn->h2 = calloc(1, sizeof *conn->h2);
    if (conn->h2 == NULL)
        return -1;
    h2_settings_default(&settings);
    settings.max_concurrent_streams = conn->config->http2.max_streams;
    conn->h2->session = h2_session_new(&conn->client, &settings, &callbacks, conn);
    if (conn->h2->session == NULL) {
        free(conn->h2);
        conn->h2 = NULL;
        return -1;
    }
    conn->idle_since = reactor_now();
    stats_gauge_own(&stats_row()->h2_connections, 1);
    if (h2_session_receive(conn->h2->session, data, len) == -1)
        conn->h2->over = true;
    return 0;
}

void h2_relay_goaway(struct relay *conn)
{
    if (!conn->h2->leaving) {
        conn->h2->leaving = true;
        h2_goaway(conn->h2->session, true);
    }
}

void h2_relay_end(struct relay *conn)
{
    struct h2_client *h = conn->h2;

    while (h->streams != NULL)
        stream_end(h->streams);
    h2_session_free(h->session);
    free(h);
    stats_gauge_own(&stats_row()->h2_connections, -1);
    conn->h2 = NULL;
}

double h2_relay_deadline(const struct relay *conn, bool *idle)
{
    *idle = conn->h2->stream_count > 0;
    if (*idle)
        return conn->last_activity + conn->config->timeouts.idle;
    return conn->idle_since + conn->config->keepalive.timeout;
}
