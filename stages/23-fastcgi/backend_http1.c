/* backend_http1.c -- HTTP/1.1 as a backend protocol (backend_protocol.h):
 * the request head as request.c writes it, the body as the client framed
 * it; the response head parsed by http.c (interim 1xx heads, then the
 * final one), and the body framed as its head says (RFC 9112, section
 * 6.3: response.h). */
#include "backend_protocol.h"
#include "exchange_private.h"

#include "body.h"
#include "http.h"
#include "log.h"
#include "request.h"
#include "response.h"
#include "stats.h"

#include <stdlib.h>

/* What a backend's response head may be: as large as a client's may, and
 * no line longer than that either (long Set-Cookie lines exist). */
static const struct http_limits response_limits = { 65536, 65536 };

/* The request head, rewritten for the backend (request.h). */
static int http1_request_head(const struct relay *relay, bool keep, struct buffer *out)
{
    const struct exchange *x = relay->x;
    struct request_view view = relay_request_view(relay);
    struct request_origin origin = { exchange_client(relay), relay->client_address,
                                     x->chain_believed };

    return request_write_head(&view, &x->info, &relay->config->policy, &origin,
                              relay->server_port, relay->tls, keep, out);
}

/* Body bytes go as they are: the client's framing is the backend's. */
static int http1_request_body(const char *data, size_t len, struct buffer *out)
{
    return buffer_append(out, data, len);
}

/* The body's framing (its length, or its last chunk) says where it ends. */
static int http1_request_end(struct buffer *out)
{
    (void)out;
    return 0;
}

/* Bytes of the response body. */
static void response_body(struct relay *relay, const char *data, size_t len)
{
    struct exchange *x = relay->x;
    ssize_t n;

    if (x->framing == FRAMING_CLOSE) {
        exchange_backend_body(relay, data, len);
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
    exchange_backend_body(relay, data, (size_t)n);
    if (x->response_body.done) {
        if ((size_t)n < len)
            x->upstream_reusable = false;
        exchange_response_finished(relay);
    }
}

/* The final head in buf is parsed: its framing decided, the body's
 * framer set up, the exchange told. Returns 0, or 502. */
static int final_head(struct relay *relay, const char *buf)
{
    struct exchange *x = relay->x;
    struct response_info info;

    stats_observe(&x->current->stats->response_time, reactor_now() - x->head_sent);
    if (response_check(x->response, buf, x->head_method, &info) != 0)
        return 502;
    if (info.framing == FRAMING_LENGTH)
        body_framer_init_length(&x->response_body, info.length);
    else if (info.framing == FRAMING_CHUNKED)
        body_framer_init_chunked(&x->response_body);
    return exchange_backend_head(relay, buf, &info);
}

/* Bytes of the response head arrived: parse on; pass on interim heads,
 * and begin the body after the final one. */
static void response_head(struct relay *relay, const char *data, size_t len)
{
    struct exchange *x = relay->x;

    if (buffer_append(&x->response_head, data, len) == -1) {
        exchange_backend_broken(relay, "out of memory reading a response head");
        return;
    }
    for (;;) {
        const char *buf = buffer_bytes(&x->response_head);
        size_t have = buffer_length(&x->response_head), used;
        int rc;

        if (x->response == NULL) {
            x->response = malloc(sizeof *x->response);
            if (x->response == NULL) {
                exchange_backend_broken(relay, "out of memory reading a response head");
                return;
            }
            http_request_init(x->response);
        }
        rc = http_parse_response(x->response, buf, have, &response_limits);
        if (rc == HTTP_INCOMPLETE)
            return;
        if (rc != HTTP_DONE) {
            exchange_backend_broken(relay, "sent something that is not an HTTP/1.x response head");
            return;
        }
        used = x->response->head_length;
        if (x->response->status < 200 && x->response->status != 101) {
            if (exchange_backend_interim(relay, buf) == -1) {
                exchange_backend_broken(relay, "out of memory passing on an interim response");
                return;
            }
            free(x->response);
            x->response = NULL;
            buffer_consume(&x->response_head, used);
            continue;
        }
        if (final_head(relay, buf) != 0) {
            exchange_backend_broken(relay, "sent a response whose framing is broken (Content-Length or "
                                           "Transfer-Encoding)");
            return;
        }
        free(x->response);
        x->response = NULL;
        /* The rest, if any, is the body: keep it from the buffer we free. */
        struct buffer rest = x->response_head;
        x->response_head = (struct buffer)BUFFER_INIT;
        if (x->phase == PHASE_TUNNEL) {
            exchange_to_client(relay, buffer_bytes(&rest) + used, have - used);
        } else if (x->framing == FRAMING_NONE) {
            if (have > used)
                x->upstream_reusable = false; /* bytes after a response without a body */
            exchange_response_finished(relay);
        } else if (have > used) {
            response_body(relay, buffer_bytes(&rest) + used, have - used);
        }
        buffer_free(&rest);
        return;
    }
}

/* Bytes from the backend: its head until the final one is in, then the
 * body. */
static void http1_response_data(struct relay *relay, const char *data, size_t len)
{
    if (!relay->x->response_started)
        response_head(relay, data, len);
    else
        response_body(relay, data, len);
}

const struct backend_protocol backend_http1 = {
    .name = "HTTP/1.1",
    .passes_through = true,
    .request_head = http1_request_head,
    .request_body = http1_request_body,
    .request_end = http1_request_end,
    .response_data = http1_response_data,
};
