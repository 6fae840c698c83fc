/* exchange_response.c -- the response side of an exchange (exchange.c has
 * the phases): the backend's bytes read, and given to its protocol
 * (backend_protocol.h), which hands back the head (interim 1xx heads
 * passed on, the next one read) and the body; our version of the head
 * sent to the client, then the body, copied, or spliced (chapter 16) when
 * the protocol passes it through, with the backpressure of chapter 04;
 * and what the backend's end (its close, or a failure) means for the
 * response. */
#include "exchange_private.h"

#include "backend_protocol.h"
#include "body.h"
#include "buffering.h"
#include "connection.h"
#include "log.h"
#include "response.h"
#include "response_output.h"
#include "upstream.h"

#include <errno.h>
#include <sys/epoll.h>

void exchange_backend_broken(struct relay *relay, const char *what)
{
    log_msg("backend %s: %s", relay->x->current->name, what);
    exchange_fail_request(relay, 502);
}

void exchange_to_client(struct relay *relay, const char *data, size_t len)
{
    relay->x->body_bytes += len;
    if (relay->x->response_buffered)
        buffering_to_client(relay, data, len);
    else
        relay->client_ops->write(relay, data, len);
}

/* Bytes of the body for the filters and the client. */
static void to_filters(struct relay *relay, const char *data, size_t len)
{
    body_filter_data(relay, relay->x->filters, data, len);
}

/* The body's bytes alone, the chunked coding taken off: for an HTTP/1.0
 * client, an HTTP/2 stream, or filters that change the body (body.h's
 * on_data). */
static void dechunked_data(void *context, const char *data, size_t len)
{
    struct relay *relay = context;

    to_filters(relay, data, len);
}

void exchange_backend_body(struct relay *relay, const char *data, size_t len)
{
    struct exchange *x = relay->x;

    /* A replaced answer's body is dropped; a dechunked one goes through
     * the framer's on_data, unless the protocol gave its bytes alone. */
    if ((!x->dechunk || !x->pool->protocol->passes_through) && !x->replaced)
        to_filters(relay, data, len);
}

/* A 1xx other than 101: passed on to an HTTP/1.1 client, dropped for
 * HTTP/1.0 ones, which do not know them. */
int exchange_backend_interim(struct relay *relay, const char *buf)
{
    static const struct response_head_options interim = { false, false, false };
    struct response_head head;
    int rc;

    if (relay->x->minor_version == 0)
        return 0;
    if (response_head_from_backend(&head, relay->x->response, buf, FRAMING_NONE, 0, &interim) == -1)
        return -1;
    rc = relay->client_ops->head(relay, &head, CONNECTION_PERSIST);
    response_head_free(&head);
    return rc;
}

/* The final head is parsed: decide how the client connection goes on,
 * and send the client our version of it. */
int exchange_backend_head(struct relay *relay, const char *buf, const struct response_info *framing)
{
    struct exchange *x = relay->x;
    struct response_info info = *framing;
    struct response_head head;
    bool upgrading = x->response->status == 101;
    enum response_connection mode;
    int rc;

    /* A 101 nobody asked for, or from a backend whose protocol cannot
     * carry a tunnel's bytes. */
    if (upgrading && (!x->upgrade || !x->pool->protocol->passes_through))
        return 502;
    x->framing = info.framing;
    x->upstream_reusable = !info.backend_closes && !upgrading;
    struct response_head_options options = {
        .upgrade = upgrading,
        /* A protocol that does not pass the body through gives its bytes
         * alone: rsp frames them for every client. */
        .dechunk = (x->minor_version == 0 || relay->client_ops->is_stream || !x->pool->protocol->passes_through) &&
                   info.framing == FRAMING_CHUNKED,
        .replace_hsts = relay->tls && relay->config->tls.hsts_line[0] != '\0',
    };
    x->keep_client = x->phase == PHASE_SENT && info.framing != FRAMING_CLOSE && !upgrading &&
                     exchange_client_may_stay(relay);
    /* An error answer the operator has a page for (error_pages with
     * backends = true): the page goes out instead, status kept. */
    const struct error_page *page = NULL;
    if (!upgrading && x->response->status >= 400 && response_output(relay)->error_pages_backends)
        page = response_output_page(relay, x->response->status);
    x->replaced = page != NULL;
    if (page != NULL) {
        /* The backend's body is read and dropped where its framing says
         * it ends; one ended by the backend's close is not waited for:
         * the connection is closed instead. */
        if (info.framing == FRAMING_CLOSE) {
            x->framing = info.framing = FRAMING_NONE;
            x->upstream_reusable = false;
        }
        x->keep_client = x->phase == PHASE_SENT && exchange_client_may_stay(relay);
        response_head_init(&head, x->response->status);
        if (response_output_page_head(&head, page, x->head_method) == -1) {
            response_head_free(&head);
            log_msg("out of memory writing a response head");
            return 502;
        }
    } else if (response_head_from_backend(&head, x->response, buf, info.framing, info.length, &options) == -1) {
        log_msg("out of memory writing a response head");
        return 502;
    }
    /* A tunnel's bytes are no body: the filters see none of it. */
    rc = upgrading ? 0 : body_filter_head(relay, &head);
    /* A body of unknown length now (HTTP/1.0 client, stream, or filters
     * that change it): its bytes alone. */
    x->dechunk = info.framing == FRAMING_CHUNKED && head.body == RESPONSE_BODY_UNKNOWN;
    mode = upgrading ? CONNECTION_UPGRADE : exchange_client_connection(relay);
    buffering_response_start(relay, upgrading);
    if (rc == 0)
        rc = relay->client_ops->head(relay, &head, mode);
    if (rc == 0 && page != NULL && head.body != RESPONSE_BODY_NONE)
        body_filter_data(relay, x->filters, page->body, page->length);
    response_head_free(&head);
    if (rc == -1) {
        log_msg("out of memory writing a response head");
        return 502;
    }
    x->response_started = true;
    x->status = x->response->status;
    /* The body's framer is the protocol's, set up before this head. */
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
        exchange_to_client(relay, data, len);
    } else if (head_pending(x)) {
        /* The head and the body bytes read with it leave in one writev:
         * one packet instead of two (chapter 16). */
        if (relay->client_ops->hold != NULL)
            relay->client_ops->hold(relay, true);
        x->pool->protocol->response_data(relay, data, len);
        if (relay->client_ops->hold != NULL)
            relay->client_ops->hold(relay, false);
    } else {
        x->pool->protocol->response_data(relay, data, len);
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
        exchange_backend_broken(relay, "closed the connection without answering");
    } else if (x->phase == PHASE_TUNNEL) {
        relay->client_ops->end(relay);
    } else if (head_pending(x)) {
        exchange_backend_broken(relay, "closed the connection in the middle of a response head");
    } else if (x->framing == FRAMING_CLOSE) {
        exchange_response_finished(relay); /* its end is the close */
    } else if (!x->response_done) {
        log_msg("backend %s closed the connection before the end of its response; cut off",
                x->current->name);
        x->phase = PHASE_DRAIN;
        relay->client_ops->fail(relay);
    }
}

/* True when the next bytes from the backend may go to the client without
 * rsp looking at them, spliced (chapter 16): body bytes of a response
 * framed by its length or by the backend's close, after the head, from a
 * backend whose protocol passes the body through unchanged, for a
 * client whose transport splices (plain HTTP), with `splice` on. A chunked
 * body is read, to find its end; a TLS client's bytes must be encrypted
 * by us (its transport has no splice). */
static bool response_splices(const struct relay *relay)
{
    const struct exchange *x = relay->x;

    return relay->config->scaling.splice && relay->client_ops->splice_from != NULL &&
           x->pool->protocol->passes_through && x->response_started && !x->response_done && x->phase != PHASE_TUNNEL && !x->dechunk &&
           x->filters == NULL && !x->replaced &&
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
     * carry another request (backend_http1.c). A splice of exactly what is
     * left would leave such bytes in the socket, to be taken for the
     * answer to the next request. */
    if (x->framing == FRAMING_LENGTH)
        len = (size_t)(body_framer_remaining(&x->response_body) - RELAY_SPLICE_TAIL);
    n = relay->client_ops->splice_from(relay, backend, len);
    if (n > 0) {
        x->body_bytes += (uint64_t)n;
        if (x->framing == FRAMING_LENGTH) {
            body_framer_skip(&x->response_body, (uint64_t)n);
            if (x->response_body.done)
                exchange_response_finished(relay);
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

/* Reads the backend while it has bytes and the client keeps up, a few
 * reads at most. */
static void read_batch(struct relay *relay)
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

/* A batch of reads from the backend: then the filters pass on what they
 * hold (the backend has no more for now). */
static void backend_readable(struct relay *relay)
{
    read_batch(relay);
    if (!relay->x->response_done)
        body_filter_flush(relay, relay->x->filters);
}

/* The backend is read again (exchange_resume_producer). */
static void backend_resume(struct relay *relay)
{
    struct connection *backend = relay_backend(relay);

    if (backend != NULL)
        backend->paused = false;
}

const struct producer_ops exchange_backend_producer = {
    .resume = backend_resume, .stop = exchange_release_backend,
};

void exchange_upstream_event(void *owner, uint32_t events)
{
    struct relay *relay = owner;
    struct connection *backend = relay_backend(relay);

    relay->last_activity = reactor_now();
    if (backend->connecting) {
        exchange_connect_finished(relay);
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
