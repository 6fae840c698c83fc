/* exchange.c -- one request and its response, from the request's first
 * byte to the response's last: its life (begin, next, free), failing it,
 * and the answers rsp gives itself. The request side (parsing, routing,
 * connecting, sending) is exchange_request.c; the response side (the
 * head, the body, splice, the backend's end) is exchange_response.c; a
 * request to a pool of files is answered by exchange_file.c; what the
 * access log keeps of it is access_log_capture.c.
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
#include "exchange_private.h"

#include "buffering.h"
#include "connection.h"
#include "log.h"
#include "reply.h"
#include "response_output.h"
#include "stats.h"
#include "upstream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
bool exchange_is_head_request(const struct relay *relay)
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
 * request keepalive_requests allows, and rsp is not stopping. An HTTP/2
 * stream carries one request. */
bool exchange_client_may_stay(const struct relay *relay)
{
    const struct keepalive *k = &relay->config->keepalive;

    return !relay->client_ops->is_stream && relay->x->client_keep_alive && k->timeout > 0 && relay->served + 1 < k->requests &&
           !relay->client.read_done && !relay->set->draining;
}

/* How the response must say the client connection goes on. */
enum response_connection exchange_client_connection(const struct relay *relay)
{
    if (!relay->x->keep_client)
        return CONNECTION_CLOSE;
    return relay->x->minor_version == 0 ? CONNECTION_KEEP_ALIVE : CONNECTION_PERSIST;
}

/* The request was read whole: the client's next bytes are its next
 * request, or are drained if this response is over and closes. */
void exchange_request_read(struct relay *relay)
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
void exchange_response_finished(struct relay *relay)
{
    struct exchange *x = relay->x;

    if (!x->response_done)
        body_filter_end(relay, x->filters);
    x->response_done = true;
    x->response_ended = reactor_now();
    if (x->phase == PHASE_SENT || x->phase == PHASE_DRAIN)
        finish_upstream(relay, x->upstream_reusable);
    /* Otherwise the backend answered before it had the whole body: it
     * keeps its connection and takes the rest (exchange_request_read), unless the
     * client leaves first. */
    if (!x->keep_client) {
        /* After what still waits on disk for the client, if anything
         * does (buffering.c). */
        if (!buffering_response_pending(relay))
            relay->client_ops->end(relay);
        if (x->phase == PHASE_SENT)
            x->phase = PHASE_DRAIN;
    }
}
/* rsp's own answer (exchange_answer_ourselves) goes out whole at once:
 * nothing to resume, nothing held. */
static const struct producer_ops own_answer = { .resume = NULL, .stop = NULL };

/* Stops the exchange's producer, if it has one. */
static void stop_producer(struct relay *relay)
{
    const struct producer_ops *producer = relay->x->producer;

    if (producer != NULL && producer->stop != NULL)
        producer->stop(relay);
}

void exchange_resume_producer(struct relay *relay)
{
    const struct producer_ops *producer = relay->x->producer;

    if (producer != NULL && producer->resume != NULL && buffering_client_ready(relay))
        producer->resume(relay);
}

int exchange_send_head(struct relay *relay, struct response_head *head)
{
    struct exchange *x = relay->x;

    if (body_filter_head(relay, head) == -1 ||
        relay->client_ops->head(relay, head, exchange_client_connection(relay)) == -1)
        return -1;
    x->status = head->status;
    x->response_started = true;
    return 0;
}

/* Sends rsp's own head and body (head->body NONE: none) through the
 * filters. Returns 0, or -1 if out of memory. */
static int send_own(struct relay *relay, struct response_head *head, const char *body)
{
    struct exchange *x = relay->x;

    if (exchange_send_head(relay, head) == -1)
        return -1;
    if (head->body != RESPONSE_BODY_NONE)
        body_filter_data(relay, x->filters, body, (size_t)head->length);
    return 0;
}

/* Sends an answer of rsp's own instead of a backend's: data, a whole
 * response as reply_append writes it ("HTTP/1.1 NNN ...", head, body),
 * without the Connection and HSTS lines, which the client side adds. */
void exchange_answer_ourselves(struct relay *relay, const char *data, size_t length)
{
    struct exchange *x = relay->x;
    struct response_head head;
    size_t body = 0;
    int rc;

    x->producer = &own_answer;
    /* The head and the body leave together, in one write. */
    if (relay->client_ops->hold != NULL)
        relay->client_ops->hold(relay, true);
    rc = response_head_parse(&head, data, length, &body);
    if (rc == 0) {
        const char *bytes = data + body;
        /* An error with a page of the operator's (error_pages): the page,
         * status kept. */
        const struct error_page *page = head.status >= 400 ? response_output_page(relay, head.status) : NULL;

        if (page != NULL) {
            rc = response_output_page_head(&head, page, exchange_is_head_request(relay));
            bytes = page->body;
        }
        if (rc == 0)
            rc = send_own(relay, &head, bytes);
    }
    response_head_free(&head);
    if (relay->client_ops->hold != NULL)
        relay->client_ops->hold(relay, false);
    if (rc == -1) {
        log_msg("out of memory answering %s", relay->client_address);
        x->phase = PHASE_DRAIN;
        relay->client_ops->fail(relay);
        return;
    }
    x->phase = x->keep_client ? PHASE_SENT : PHASE_DRAIN;
    /* The connection stays: the next request follows the head in the
     * buffer (there was no body, or keep_client would be false). */
    if (x->keep_client && x->request != NULL)
        exchange_consume_request(relay, x->request->head_length);
    exchange_response_finished(relay);
}

void exchange_fail_request(struct relay *relay, int status)
{
    exchange_refuse(relay, status, NULL, false);
}

void exchange_refuse(struct relay *relay, int status, const char *headers, bool close)
{
    struct exchange *x = exchange_begin(relay);
    struct buffer answer = BUFFER_INIT;

    if (x == NULL) {
        relay->client_ops->fail(relay);
        return;
    }

    /* A request refused while its head is read has not been captured for
     * the log yet (request_ready does it); later, the head is gone. */
    if (x->phase == PHASE_HEAD)
        access_log_capture(relay);
    stop_producer(relay);
    if (x->response_started && relay->client_ops->take_back(relay)) {
        /* The head is still held with the body bytes read with it
         * (connection_cork): the client has had nothing yet, and can
         * have a clean answer instead. */
        x->response_started = false;
        x->body_bytes = 0;
    }
    if (x->response_started) {
        /* Part of a response was sent: nothing sensible can follow it. */
        x->phase = PHASE_DRAIN;
        relay->client_ops->fail(relay);
        return;
    }
    x->keep_client = !close && x->request_complete && exchange_client_may_stay(relay);
    if (!x->request_complete)
        x->phase = PHASE_DRAIN;
    if (reply_error_with(&answer, status, exchange_is_head_request(relay), headers, "") == -1) {
        log_msg("out of memory answering %d", status);
        buffer_free(&answer);
        x->phase = PHASE_DRAIN;
        relay->client_ops->fail(relay);
        return;
    }
    exchange_answer_ourselves(relay, buffer_bytes(&answer), buffer_length(&answer));
    buffer_free(&answer);
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
        exchange_parse_head(relay); /* a pipelined request */
    else if (relay->client.read_done)
        exchange_client_finished(relay);
}
double exchange_seconds(const struct exchange *x)
{
    return (x->response_ended > 0 ? x->response_ended : reactor_now()) - x->head_started;
}

void exchange_free(struct relay *relay)
{
    struct exchange *x = relay->x;

    if (x == &exchange_idle)
        return;

    access_log_exchange(relay);
    if (x->head_started > 0) {
        /* Counted as logged: 499 for a client that left before any answer. */
        stats_gauge_own(&stats_row()->in_flight, -1);
        struct stats_site *site = x->site != NULL ? x->site : relay->config->router.unknown_stats;

        stats_count_request(site, x->status != 0 ? x->status : 499);
        stats_count_protocol(relay->client_ops->is_stream);
        stats_observe(&site->duration, exchange_seconds(x));
    }
    buffer_free(&x->log_fields);
    stop_producer(relay);
    body_filter_free_all(relay);
    free(x->request);
    x->request = NULL;
    request_info_free(&x->info);
    free(x->response);
    x->response = NULL;
    free(x->fastcgi);
    x->fastcgi = NULL;
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
