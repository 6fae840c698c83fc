/* http.h -- an incremental parser for HTTP/1.x request and response heads.
 *
 * The parser never copies: everything it finds is recorded as an offset
 * and a length into the caller's buffer, so the buffer may grow (and move)
 * between calls. Feed it the whole buffer each time more bytes arrive; it
 * carries on from where it stopped and never looks at a byte twice. */
#ifndef RSP_HTTP_H
#define RSP_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* A parsed head: a request's, or (http_parse_response) a response's. */
struct http_request {
    /* What the parser found, valid once it returns HTTP_DONE. */
    struct http_span method;  /* requests */
    struct http_span target;  /* requests */
    int status;               /* responses: 100 to 599 */
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

/* Reads the status line at the start of a response, buf[0..len): "HTTP/1.0"
 * or "HTTP/1.1", a space, three digits, then a space and a reason phrase or
 * nothing, ending in CRLF or a bare LF. Returns the status (100 to 599),
 * 0 if the line may still be complete with more bytes, or -1 if it is not
 * a status line, or has no end within its first `max` bytes. A result other
 * than 0 never changes when more bytes follow. */
int http_parse_status_line(const char *buf, size_t len, size_t max);

/* Parses a response head in buf[0..len) as http_parse_request parses a
 * request's (start with http_request_init): the status line, then header
 * lines up to the empty line, with the same rules and limits. Returns
 * HTTP_INCOMPLETE, HTTP_DONE, or 502: what a backend sent is not an
 * HTTP/1.x response head, or is larger than the limits. */
int http_parse_response(struct http_request *res, const char *buf, size_t len,
                        const struct http_limits *limits);

/* Reads a Content-Length value in span: digits only, at most max_digits
 * of them (so that it cannot overflow). Returns 0 with *length set, or -1. */
int http_parse_length(const char *buf, struct http_span span, size_t max_digits, uint64_t *length);

/* True if span in buf equals the lower-case string name, ignoring case. */
bool http_span_is(const char *buf, struct http_span span, const char *name);

/* True if spans a and b in buf hold the same text, ignoring case. */
bool http_span_equal(const char *buf, struct http_span a, struct http_span b);

/* Header lists (RFC 9110, section 5.6.1): a value like "close, X-Custom".
 * Steps *position through the list in `value`; returns true and sets
 * *token to the next element without its blanks (empty elements are
 * skipped), or false at the end. Start with *position = 0. */
bool http_list_next(const char *buf, struct http_span value, size_t *position,
                    struct http_span *token);

/* True if an element of a list header called `header` (lower case), in
 * any of its lines among the count headers, equals `token` ignoring case.
 * Shared by requests and responses: "Connection: close", or a header name
 * listed in Connection. */
bool http_list_has(const char *buf, const struct http_header *headers, size_t count,
                   const char *header, struct http_span token);

/* The same for a word given as a lower-case string ("close", "upgrade"). */
bool http_list_has_word(const char *buf, const struct http_header *headers, size_t count,
                        const char *header, const char *word);

/* True if the header called `name` is hop-by-hop in a message with these
 * headers (RFC 9110, 7.6.1): about one connection, never passed on. That
 * is Connection, Keep-Alive, Proxy-Connection, TE, Trailer, Upgrade, and
 * any header the message's Connection lists, except Content-Length and
 * Transfer-Encoding: a Connection list cannot take away what frames the
 * body. Shared by requests and responses. */
bool http_is_hop_by_hop(const char *buf, const struct http_header *headers, size_t count,
                        struct http_span name);

/* The characters of a header line, for the trailer lines of a chunked body
 * (body.c): a header name is made of "tchar"s, a value of visible ASCII,
 * blanks and bytes >= 0x80. */
bool http_is_token_char(unsigned char c);
bool http_is_value_char(unsigned char c);

#endif
