/* backend_protocol.h -- the language a pool's backends speak, as the
 * exchange sees it.
 *
 * The exchange (exchange_request.c, exchange_response.c, buffering.c)
 * reaches the backend's protocol only through these operations. It hands
 * over the request as a head, then pieces of its body, then the body's
 * end, and each is written here in the form the backend reads; and it
 * hands over the bytes the backend sends, which come back to it as a
 * response head, then body bytes, then the response's end:
 *
 *     exchange --head, body, end--> protocol --bytes--> backend
 *     exchange <--head, body, end-- protocol <--bytes-- backend
 *
 * A pool says which protocol its backends speak (struct pool's
 * protocol): HTTP/1.1 (backend_http1.c), or FastCGI (backend_fastcgi.c). */
#ifndef RSP_BACKEND_PROTOCOL_H
#define RSP_BACKEND_PROTOCOL_H

#include "buffer.h"

#include <stdbool.h>
#include <stddef.h>

struct relay;

struct backend_protocol {
    const char *name;           /* for messages: "HTTP/1.1" */
    /* Body bytes pass through unchanged, both ways: the request body goes
     * as the client framed it (chunked too), the response body may be
     * spliced from socket to socket (chapter 16), and a 101 turns the
     * connection into a tunnel. When false, the exchange gives
     * request_body the body's bytes alone (a chunked body is read whole
     * first, chapter 17), never splices, and answers a 101 with 502. */
    bool passes_through;

    /* Writes the head of the exchange's request (relay->x's parsed
     * request) to out as the backend is to get it; keep: ask the backend
     * to keep the connection open after the response. Returns 0, or -1 if
     * out of memory. */
    int (*request_head)(const struct relay *relay, bool keep, struct buffer *out);
    /* Writes len bytes of the request body to out, framed for the
     * backend. Returns 0, or -1 if out of memory. */
    int (*request_body)(const char *data, size_t len, struct buffer *out);
    /* The request body is complete: writes what tells the backend so
     * (maybe nothing). Returns 0, or -1 if out of memory. */
    int (*request_end)(struct buffer *out);

    /* Bytes the backend sent, in order, from the first on, until the
     * response ends. They come back to the exchange as calls of
     * exchange_backend_interim and exchange_backend_head (a head parsed
     * into relay->x->response, its text in relay->x->response_head), then
     * exchange_backend_body (the body's bytes, as the client may get
     * them) and exchange_response_finished; or exchange_backend_broken
     * when they make no sense. Bytes that say the connection cannot carry
     * another request clear relay->x->upstream_reusable. */
    void (*response_data)(struct relay *relay, const char *data, size_t len);
};

/* HTTP/1.1 (backend_http1.c). */
extern const struct backend_protocol backend_http1;

/* FastCGI (backend_fastcgi.c): a site's `fastcgi` pool. */
extern const struct backend_protocol backend_fastcgi;

#endif
