/* request.h -- what a parsed request means, and the head we send on.
 *
 * After the parser has split a head into pieces, this decides whether the
 * request is acceptable (one Host, unambiguous body framing), and writes
 * the head the backend receives: the client's head without hop-by-hop
 * headers, with X-Forwarded-* and X-Real-IP set by us, and Connection:
 * close (one request per connection until chapter 09). */
#ifndef RSP_REQUEST_H
#define RSP_REQUEST_H

#include "body.h"
#include "buffer.h"
#include "http.h"

struct request_info {
    struct http_span host;        /* the Host value without its port; length 0 if none */
    struct http_span host_header; /* the Host value as sent, port included */
    struct body_framer body;      /* how the body is framed */
};

/* Checks the semantics of a parsed head in buf and fills *info. Returns 0,
 * or the status to answer with (400). */
int request_check(const struct http_request *req, const char *buf, struct request_info *info);

/* Appends to out the head to send to the backend. client_address is the
 * client's IP address as text. Returns 0, or -1 if out of memory. */
int request_write_head(const struct http_request *req, const char *buf,
                       const struct request_info *info, const char *client_address,
                       struct buffer *out);

#endif
