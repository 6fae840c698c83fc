/* response.h -- what a backend's response head means, and how the client
 * connection goes on after it.
 *
 * A response's end is found from its head alone (RFC 9112, section 6.3):
 *
 *   the response is to HEAD, or is 1xx, 204 or 304   no body at all
 *   Transfer-Encoding ending in chunked              chunked: the last chunk
 *   Transfer-Encoding without chunked                until the backend closes
 *   Content-Length                                   exactly that many bytes
 *   neither                                          until the backend closes
 *
 * Only the first three kinds and Content-Length leave the connection
 * usable for another request. */
#ifndef RSP_RESPONSE_H
#define RSP_RESPONSE_H

#include "body.h"
#include "buffer.h"
#include "http.h"

#include <stdbool.h>

enum response_framing {
    FRAMING_NONE,             /* no body */
    FRAMING_LENGTH,           /* Content-Length */
    FRAMING_CHUNKED,          /* chunked */
    FRAMING_CLOSE,            /* until the backend closes */
};

struct response_info {
    enum response_framing framing;
    uint64_t length;          /* for FRAMING_LENGTH */
    bool backend_closes;      /* the backend will not take another request on this
                                 connection (Connection: close, or HTTP/1.0 without
                                 keep-alive) */
};

/* Decides how the final (status 200 and up, or 101) response head res in
 * buf is framed; head_request: the request was HEAD. Returns 0, or 502 if
 * the framing is broken (an invalid or contradictory Content-Length,
 * chunked before another coding): such a response cannot be passed on
 * safely, and its connection cannot be used again. */
int response_check(const struct http_request *res, const char *buf, bool head_request,
                   struct response_info *info);

/* How the client connection goes on after the response. */
enum response_connection {
    CONNECTION_PERSIST,       /* HTTP/1.1 client kept: no Connection header */
    CONNECTION_KEEP_ALIVE,    /* HTTP/1.0 client kept: "Connection: keep-alive" */
    CONNECTION_CLOSE,         /* "Connection: close" */
    CONNECTION_UPGRADE,       /* a 101: Upgrade passes, "Connection: upgrade" */
};

/* The Connection header line (with its CRLF) that says `mode`, or "". */
const char *response_connection_line(enum response_connection mode);

#endif
