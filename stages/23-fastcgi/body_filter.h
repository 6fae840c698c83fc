/* body_filter.h -- the short chain a response passes between its producer
 * and the client, like nginx's output filters.
 *
 * A filter sees the final head first (and may edit it), then the body's
 * bytes, a flush at the end of each batch of input (the producer has no
 * more for now: what the filter holds should reach the client), and the
 * end. Each passes its output to the next step with the same calls,
 * naming f->next; the last step (next NULL) is the client: the body's
 * bytes are counted for the access log, framed as chunks when rsp frames
 * a body of unknown length for an HTTP/1.1 client, and queued (or spooled,
 * chapter 17). With no filter (x->filters NULL) the bytes go straight to
 * that last step.
 *
 * A filter that changes the body (its length, its coding) says so in the
 * head: it removes Content-Length and sets head->body to
 * RESPONSE_BODY_UNKNOWN; the producer then hands it the body's bytes alone
 * (a backend's chunked body dechunked), splice is off, and the client side
 * frames it: chunked for HTTP/1.1, until the close for HTTP/1.0 (the
 * connection is not kept), DATA frames for HTTP/2. */
#ifndef RSP_BODY_FILTER_H
#define RSP_BODY_FILTER_H

#include "response_head.h"

#include <stddef.h>

struct relay;
struct body_filter;

struct body_filter_ops {
    /* The final head (never a 1xx): may edit it. Returns 0, or -1 if the
     * response cannot go on (out of memory): the exchange fails it. Called
     * again, for rsp's own answer, when a backend's head was taken back
     * before the client had a byte of it (exchange_fail_request): the
     * filter starts over. */
    int (*head)(struct body_filter *f, struct relay *relay, struct response_head *head);
    /* Bytes of the body: what comes of them goes to body_filter_data(relay, f->next, ...). */
    void (*data)(struct body_filter *f, struct relay *relay, const char *data, size_t len);
    /* The end of a batch of input: passes on what it holds, then
     * body_filter_flush(relay, f->next). */
    void (*flush)(struct body_filter *f, struct relay *relay);
    /* The end of the body: passes on the rest, then body_filter_end(relay, f->next). */
    void (*end)(struct body_filter *f, struct relay *relay);
    /* Frees the filter (the exchange ends). */
    void (*free)(struct body_filter *f);
};

/* A filter of an exchange's chain (x->filters, a list through next). */
struct body_filter {
    const struct body_filter_ops *ops;
    struct body_filter *next;
};

/* Passes the final head through the exchange's filters (first attaching
 * those the request's output settings call for, and after them making the
 * settings' header edits: response_output.h), then decides how
 * the client side frames the body: chunked (Transfer-Encoding: chunked is
 * set) for an HTTP/1.1 client of a body of unknown length; for an HTTP/1.0
 * one the connection closes after it. Returns 0, or -1 (a filter failed). */
int body_filter_head(struct relay *relay, struct response_head *head);

/* Bytes of the body for step `to` of the chain (x->filters from the
 * producer, f->next from a filter; NULL: the client). */
void body_filter_data(struct relay *relay, struct body_filter *to, const char *data, size_t len);

/* The producer has no more input for now (step `to` and those after it). */
void body_filter_flush(struct relay *relay, struct body_filter *to);

/* The body ends (step `to` and those after it): filters pass on what they
 * hold, and a chunked body gets its last chunk. */
void body_filter_end(struct relay *relay, struct body_filter *to);

/* Frees the exchange's filters. */
void body_filter_free_all(struct relay *relay);

#endif
