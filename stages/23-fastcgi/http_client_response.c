/* http_client_response.c -- reading the response to a request rsp made
 * itself (http_client.c): the head with http.c's parser, the framing as
 * response.c decides it for a backend's, the body with body.c's framer
 * (taking the chunked coding off), all within fixed bounds. Pure: bytes
 * in, a response out, so that the fuzz harness can feed it anything. */
#include "http_client.h"

#include "response.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Ends the parse with an error; returns -1. */
static int fail(struct http_client_parser *p, const char *error)
{
    p->result = -1;
    p->error = error;
    return -1;
}

void http_client_parser_init(struct http_client_parser *p, bool head_request, size_t max_response)
{
    memset(p, 0, sizeof *p);
    p->head_request = head_request;
    p->max_response = max_response;
    p->head = (struct buffer)BUFFER_INIT;
    p->body = (struct buffer)BUFFER_INIT;
    http_request_init(&p->res);
}

/* Adds len bytes to the body, unless that takes it past max_response. */
static void add_to_body(struct http_client_parser *p, const char *data, size_t len)
{
    if (p->overflow || p->out_of_memory || len == 0)
        return;
    if (len > p->max_response - buffer_length(&p->body))
        p->overflow = true;
    else if (buffer_append(&p->body, data, len) == -1)
        p->out_of_memory = true;
}

/* body.c's on_data: a piece of chunk data. */
static void chunk_data(void *context, const char *data, size_t len)
{
    add_to_body(context, data, len);
}

/* Takes the next len bytes of the body. Returns as http_client_parser_feed. */
static int take_body(struct http_client_parser *p, const char *data, size_t len)
{
    if (p->until_close) {
        add_to_body(p, data, len);
    } else {
        ssize_t n = body_frame(&p->framer, data, len);
        if (n > 0 && !p->framer.chunked)
            add_to_body(p, data, (size_t)n);
        /* The body had grown too large before any fault after it. */
        if (n == -1 && !p->overflow && !p->out_of_memory)
            return fail(p, "malformed chunked body");
    }
    if (p->overflow)
        return fail(p, "response too large");
    if (p->out_of_memory)
        return fail(p, "out of memory");
    if (!p->until_close && p->framer.done)
        p->result = 1;
    return p->result;
}

/* True if the head has a Transfer-Encoding header. */
static bool has_transfer_encoding(const struct http_request *res, const char *buf)
{
    for (size_t i = 0; i < res->header_count; i++)
        if (http_span_is(buf, res->headers[i].name, "transfer-encoding"))
            return true;
    return false;
}

/* The final head is complete: decides how the body is framed and takes
 * the bytes that came after the head. */
static int start_body(struct http_client_parser *p)
{
    const char *buf = buffer_bytes(&p->head);
    struct response_info info;

    if (p->res.status == 101)
        return fail(p, "unexpected 101 Switching Protocols");
    if (response_check(&p->res, buf, p->head_request, &info) != 0)
        return fail(p, "invalid Content-Length or Transfer-Encoding");
    p->body_started = true;
    switch (info.framing) {
    case FRAMING_NONE:
        p->result = 1;
        return 1;
    case FRAMING_LENGTH:
        if (info.length > p->max_response)
            return fail(p, "response too large");
        body_framer_init_length(&p->framer, info.length);
        break;
    case FRAMING_CHUNKED:
        body_framer_init_chunked(&p->framer);
        p->framer.on_data = chunk_data;
        p->framer.context = p;
        break;
    case FRAMING_CLOSE:
        /* A coding other than chunked (gzip...) is one we never asked for. */
        if (has_transfer_encoding(&p->res, buf))
            return fail(p, "unsupported Transfer-Encoding");
        p->until_close = true;
        break;
    }
    return take_body(p, buf + p->res.head_length, buffer_length(&p->head) - p->res.head_length);
}

/* Why a head failed to parse within `room` bytes: http.c says 502 for
 * both. Without the limits, the first room bytes of it either hold the
 * fault or parse (then the head was too large): the same answer however
 * the bytes arrived. */
static const char *head_failure(const char *buf, size_t len, size_t room)
{
    static const struct http_limits unlimited = { SIZE_MAX, SIZE_MAX };
    struct http_request res;

    http_request_init(&res);
    if (http_parse_response(&res, buf, len < room ? len : room, &unlimited) == 502)
        return "malformed response head";
    return "response head too large";
}

/* Parses the heads in p->head: interim 1xx ones are dropped, the final
 * one starts the body. */
static int parse_heads(struct http_client_parser *p)
{
    for (;;) {
        size_t room = HTTP_CLIENT_MAX_HEAD - p->heads_length;
        struct http_limits limits = { .max_line = room, .max_head = room };
        int rc = http_parse_response(&p->res, buffer_bytes(&p->head), buffer_length(&p->head), &limits);

        if (rc == HTTP_INCOMPLETE)
            return 0;
        if (rc != HTTP_DONE)
            return fail(p, head_failure(buffer_bytes(&p->head), buffer_length(&p->head), room));
        if (p->res.status == 101 || p->res.status >= 200)
            return start_body(p);
        /* 100 Continue, 103 Early Hints...: the final response follows. */
        p->heads_length += p->res.head_length;
        if (p->heads_length >= HTTP_CLIENT_MAX_HEAD)
            return fail(p, "response head too large");
        buffer_consume(&p->head, p->res.head_length);
        http_request_init(&p->res);
    }
}

/* True if the head bytes from `from` on may end a head: a blank line
 * ("\n\n" or "\n\r\n") that begins at or after from - 2. Until one
 * comes (or the head outgrows its room) the head is not parsed again: a
 * server sending a byte at a time would otherwise make us parse its head
 * once per byte, quadratic in its size. */
static bool head_may_end(const struct http_client_parser *p, size_t from)
{
    const char *buf = buffer_bytes(&p->head);
    size_t len = buffer_length(&p->head);

    for (size_t i = from >= 2 ? from - 2 : 0; i + 1 < len; i++)
        if (buf[i] == '\n' && (buf[i + 1] == '\n' || (buf[i + 1] == '\r' && i + 2 < len && buf[i + 2] == '\n')))
            return true;
    return len > HTTP_CLIENT_MAX_HEAD - p->heads_length;
}

int http_client_parser_feed(struct http_client_parser *p, const char *data, size_t len)
{
    size_t had;

    if (p->result != 0)
        return p->result;
    if (p->body_started)
        return take_body(p, data, len);
    if (len == 0)
        return 0;
    had = buffer_length(&p->head);
    if (buffer_append(&p->head, data, len) == -1)
        return fail(p, "out of memory");
    return head_may_end(p, had) ? parse_heads(p) : 0;
}

int http_client_parser_end(struct http_client_parser *p)
{
    /* What the head holds so far is parsed first: feed leaves a head with
     * no blank line yet unparsed, and a malformed one is malformed however
     * the bytes arrived. */
    if (p->result == 0 && !p->body_started && buffer_length(&p->head) > 0)
        parse_heads(p);
    if (p->result != 0)
        return p->result;
    if (p->until_close) {
        p->result = 1;
        return 1;
    }
    if (p->body_started)
        return fail(p, "connection closed before the end of the response body");
    if (buffer_length(&p->head) == 0 && p->heads_length == 0)
        return fail(p, "connection closed without a response");
    return fail(p, "connection closed in the middle of the response head");
}

/* A copy of span of buf as a C string, or NULL if out of memory. */
static char *copy_span(const char *buf, struct http_span span)
{
    return strndup(buf + span.offset, span.length);
}

int http_client_parser_take(struct http_client_parser *p, struct http_client_response *out)
{
    const char *buf = buffer_bytes(&p->head);

    *out = (struct http_client_response){ .status = p->res.status };
    if (p->result != 1)
        return -1;
    out->headers = calloc(p->res.header_count + 1, sizeof *out->headers);
    if (out->headers == NULL)
        return -1;
    for (size_t i = 0; i < p->res.header_count; i++) {
        struct http_client_header *h = &out->headers[out->header_count++];
        h->name = copy_span(buf, p->res.headers[i].name);
        h->value = copy_span(buf, p->res.headers[i].value);
        if (h->name == NULL || h->value == NULL) {
            http_client_response_free(out);
            return -1;
        }
    }
    /* The body buffer is never consumed from, so its bytes start at data. */
    if (buffer_append(&p->body, "", 1) == -1) {
        http_client_response_free(out);
        return -1;
    }
    out->body = p->body.data;
    out->body_length = buffer_length(&p->body) - 1;
    p->body = (struct buffer)BUFFER_INIT;
    return 0;
}

void http_client_parser_free(struct http_client_parser *p)
{
    buffer_free(&p->head);
    buffer_free(&p->body);
}

void http_client_response_free(struct http_client_response *r)
{
    for (size_t i = 0; i < r->header_count; i++) {
        free(r->headers[i].name);
        free(r->headers[i].value);
    }
    free(r->headers);
    free(r->body);
    *r = (struct http_client_response){ 0 };
}

const char *http_client_header(const struct http_client_response *r, const char *name)
{
    for (size_t i = 0; i < r->header_count; i++)
        if (strcasecmp(r->headers[i].name, name) == 0)
            return r->headers[i].value;
    return NULL;
}
