/* request.h -- what a parsed request means, and the head we send on.
 *
 * After the parser has split a head into pieces, this decides whether the
 * request is acceptable (a target form we can route, one Host, unambiguous
 * body framing), and writes the head the backend receives: the request line
 * in origin form with the path that was judged, the client's headers
 * without hop-by-hop and spoofable ones, with X-Forwarded-*, X-Real-IP and
 * Forwarded set by us. */
#ifndef RSP_REQUEST_H
#define RSP_REQUEST_H

#include "body.h"
#include "buffer.h"
#include "http.h"

#include <stdbool.h>

/* How the request target is written (RFC 9112, section 3.2). */
enum target_form {
    TARGET_ORIGIN,            /* "/path?query" */
    TARGET_ABSOLUTE,          /* "http://host:port/path?query" (or https) */
    TARGET_ASTERISK,          /* "*", for OPTIONS only */
};

/* A request as the checks (request_check), route() (route.h), the plain
 * port's own answers (https_redirect.h) and the head we send
 * (request_write_head) see it, whatever protocol brought it: its method,
 * its target and its header fields, as spans into buf. An HTTP/1.x head
 * gives it as it was parsed (request_view_of); an HTTP/2 stream can give
 * the same from its decoded fields (:method, :path, and :authority as
 * Host), written into a buffer of its own. Host, the body's framing
 * (Content-Length, Transfer-Encoding), the path and the query are read
 * from it by request_check, into struct request_info. */
struct request_view {
    const char *buf;                   /* every span below points into it */
    struct http_span method;
    struct http_span target;
    const struct http_header *headers; /* name/value spans, in the order they came */
    size_t header_count;
    int minor_version;                 /* whose HTTP/1.x rules apply: 1.1 or 1.0 */
    bool http2;                        /* it came on an HTTP/2 stream (1.1's rules apply) */
};

/* The view of the HTTP/1.x request head parsed into req, in buf. */
struct request_view request_view_of(const struct http_request *req, const char *buf);

/* The index of the first header called `name` (lower case; names compare
 * ignoring case) at index `from` or after it, or rq->header_count if
 * there is none: the one header lookup of rsp's request code. */
size_t request_find_header(const struct request_view *rq, const char *name, size_t from);

/* Choices the config makes about what may pass. */
struct request_policy {
    bool allow_underscores_in_headers; /* forward header names with '_' */
    bool allow_encoded_slashes;        /* let %2F, %5C and '\' through in paths */
};

struct request_info {
    struct http_span host;        /* the host name without its port; length 0 if none */
    struct http_span host_header; /* what the backend gets as Host: the Host value as
                                     sent, or the authority of an absolute target */
    struct body_framer body;      /* how the body is framed */
    enum target_form form;
    bool whole_server;            /* OPTIONS for the server itself: sent on as "*" */
    struct http_span query;       /* after the '?', if has_query */
    bool has_query;
    char *path;                   /* the normal form of the path (path.h), "/" if the
                                     target has none; NULL for "*". Owned: see
                                     request_info_free */
    size_t path_length;
    bool keep_alive;              /* the client wants the connection kept: HTTP/1.1
                                     without "Connection: close", or HTTP/1.0 with
                                     "Connection: keep-alive" */
    bool idempotent;              /* GET, HEAD, OPTIONS, TRACE, PUT, DELETE */
    struct http_span upgrade;     /* the Upgrade header, when Connection lists
                                     upgrade (HTTP/1.1 only); length 0: none */
    bool buffered;                /* the body was read whole (chapter 17): the backend
                                     gets it with this Content-Length, and no Expect */
    uint64_t buffered_length;
    bool drop_authorization;      /* basic_auth took it: the backend does not get it */
};

/* Checks the semantics of the request and fills *info. Returns 0,
 * or the status to answer with: 400 (a malformed or ambiguous request),
 * 405 (CONNECT: rsp tunnels nothing), 500 (out of memory). After it
 * returned, call request_info_free whatever it returned. */
int request_check(const struct request_view *req, const struct request_policy *policy,
                  struct request_info *info);

/* True if the request's method is `name` (methods are case-sensitive). */
bool request_method_is(const struct request_view *req, const char *name);

/* Frees what request_check allocated; info can be checked again after. */
void request_info_free(struct request_info *info);

/* The Allow header rsp sends with its 405 (without the line end). */
#define REQUEST_ALLOW_HEADER "Allow: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"

/* Who sent a request, for the headers that tell the backend. */
struct request_origin {
    const char *client;  /* the client as rsp believes it: X-Real-IP, Forwarded's for= */
    const char *peer;    /* the address rsp saw (the TCP peer or the PROXY header's):
                            the hop X-Forwarded-For gains */
    bool keep_chain;     /* false: the X-Forwarded-For the peer sent is not believed
                            and is replaced (trusted_proxies set, peer not in it) */
};

/* Appends to out the head to send to the backend, always as HTTP/1.1.
 * origin names the client and the peer (X-Forwarded-For, X-Real-IP,
 * Forwarded), server_port the port it connected to (X-Forwarded-Port);
 * https says the client came over TLS (X-Forwarded-Proto, Forwarded
 * proto). With keep_backend false it asks the backend to close
 * ("Connection: close"); an upgrade request passes its Upgrade header on,
 * with "Connection: upgrade". Returns 0, or -1 if out of memory. */
int request_write_head(const struct request_view *req, const struct request_info *info,
                       const struct request_policy *policy, const struct request_origin *origin,
                       const char *server_port, bool https, bool keep_backend,
                       struct buffer *out);

#endif
