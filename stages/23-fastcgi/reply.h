/* reply.h -- the answers rsp gives by itself, when it cannot or will not
 * forward a request. */
#ifndef RSP_REPLY_H
#define RSP_REPLY_H

#include "buffer.h"
#include "connection.h"

#include <stdbool.h>
#include <stddef.h>

/* The reason phrase for a status code ("Not Found"), or "" for a code
 * without a registered one (HTTP allows an empty phrase). */
const char *reply_reason(int status);

/* Writes a short HTML page for status to out (size bytes), with a sentence
 * of explanation if that is not NULL. Returns its length (at most
 * size - 1; size 1024 is plenty). */
size_t reply_page(char *out, size_t size, int status, const char *explanation);

/* A response rsp gives itself: every one of them (errors, timeouts, what
 * route answers, redirects) is written by reply_append, so that framing
 * and connection handling are decided in one place. */
struct reply {
    int status;
    const char *headers;        /* header lines, each ending in CRLF; none of them
                                   Content-Length, Transfer-Encoding or Connection */
    size_t headers_length;
    const char *body;           /* NULL: a status that has no body (204, 304), and
                                   then no Content-Length either */
    size_t body_length;
};

/* Appends the complete response r to out: status line, headers,
 * Content-Length, the header line `connection` ("Connection: close\r\n",
 * or "" when the connection stays open, see response_connection_line),
 * and the body, which is left out for a HEAD request (head_only) as HTTP
 * requires. Returns 0, or -1 if out of memory. */
int reply_append(struct buffer *out, const struct reply *r, bool head_only, const char *connection);

/* Writes the response reply_error sends, with "Connection: close", into
 * out (size bytes; 1536 is plenty) without allocating anything, for the
 * listener when it is out of file descriptors. Returns its length. */
size_t reply_format(char *out, size_t size, int status, bool head_only);

/* Appends rsp's own answer for status (400, 414, 421, 431, 405, 500, 502,
 * 505, ...) to out: a short HTML page, with Allow for a 405. Returns 0,
 * or -1 if out of memory. */
int reply_error(struct buffer *out, int status, bool head_only, const char *connection);

/* As reply_error, with `headers` ("Name: value\r\n" lines, or NULL) too. */
int reply_error_with(struct buffer *out, int status, bool head_only, const char *headers,
                     const char *connection);

#endif
