/* http.h -- an incremental parser for HTTP/1.x request heads.
 *
 * The parser never copies: everything it finds is recorded as an offset
 * and a length into the caller's buffer, so the buffer may grow (and move)
 * between calls. Feed it the whole buffer each time more bytes arrive; it
 * carries on from where it stopped and never looks at a byte twice. */
#ifndef RSP_HTTP_H
#define RSP_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#define HTTP_MAX_HEADERS 100

/* A piece of the buffer. */
struct http_span {
    size_t offset;
    size_t length;
};

struct http_header {
    struct http_span name;
    struct http_span value;   /* without leading or trailing blanks */
};

struct http_limits {
    size_t max_line;          /* longest request or header line, CRLF included */
    size_t max_head;          /* longest head, request line to empty line */
};

struct http_request {
    /* What the parser found, valid once it returns HTTP_DONE. */
    struct http_span method;
    struct http_span target;
    int minor_version;        /* HTTP/1.0 or HTTP/1.1 */
    struct http_header headers[HTTP_MAX_HEADERS];
    size_t header_count;
    size_t head_length;       /* bytes up to and including the empty line */

    /* Where the parser is; private. */
    int state;
    size_t position;          /* next byte to look at */
    size_t line_start;        /* first byte of the current line */
    size_t mark;              /* first byte of the current element */
    size_t value_end;         /* one past the last non-blank of a value */
};

enum {
    HTTP_INCOMPLETE = 0,      /* need more bytes */
    HTTP_DONE = 1,            /* the head is complete */
    /* Anything else is the status code to answer with: 400 (malformed),
     * 414 (request line too long), 431 (header line or head too large, too
     * many headers), 505 (an HTTP version other than 1.0 and 1.1). */
};

/* Prepares req for a new request. */
void http_request_init(struct http_request *req);

/* Parses buf[0..len), which begins with the request and holds everything
 * received so far. Returns HTTP_INCOMPLETE, HTTP_DONE or an error status.
 * Once it returned something other than HTTP_INCOMPLETE, call it no more. */
int http_parse_request(struct http_request *req, const char *buf, size_t len,
                       const struct http_limits *limits);

/* True if span in buf equals the lower-case string name, ignoring case. */
bool http_span_is(const char *buf, struct http_span span, const char *name);

/* True if spans a and b in buf hold the same text, ignoring case. */
bool http_span_equal(const char *buf, struct http_span a, struct http_span b);

/* The characters of a header line, for the trailer lines of a chunked body
 * (body.c): a header name is made of "tchar"s, a value of visible ASCII,
 * blanks and bytes >= 0x80. */
bool http_is_token_char(unsigned char c);
bool http_is_value_char(unsigned char c);

#endif
