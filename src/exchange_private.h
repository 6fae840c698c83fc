/* exchange_private.h -- what the files of an exchange share beyond
 * relay_private.h: exchange.c (its life, failing it, rsp's own answers),
 * exchange_request.c, exchange_response.c, exchange_file.c,
 * access_log_capture.c, and the backend protocols (backend_protocol.h).
 * Private to those files. */
#ifndef RSP_EXCHANGE_PRIVATE_H
#define RSP_EXCHANGE_PRIVATE_H

#include "relay_private.h"
#include "response.h"

#include <stdbool.h>
#include <stddef.h>

/* exchange.c */

/* True if the request's method is HEAD, as far as we know it. */
bool exchange_is_head_request(const struct relay *relay);

/* True if the client connection may carry another request after this one. */
bool exchange_client_may_stay(const struct relay *relay);

/* How the response must say the client connection goes on. */
enum response_connection exchange_client_connection(const struct relay *relay);

/* The request was read whole. */
void exchange_request_read(struct relay *relay);

/* The last byte of the response is in the client's queue. */
void exchange_response_finished(struct relay *relay);

/* Sends an answer of rsp's own (a whole response as reply_append writes
 * it, with "" for its connection line) instead of a backend's. */
void exchange_answer_ourselves(struct relay *relay, const char *data, size_t length);

/* Sends a response head of rsp's making (its own answers, files) through
 * the filters (body_filter_head) to the client; the status is the
 * exchange's from now on. Returns 0, or -1 if out of memory. */
int exchange_send_head(struct relay *relay, struct response_head *head);

/* How long the exchange's request took, as logged and counted: from its
 * first byte to its response's last queued for the client (or to now, for
 * a client that left before). */
double exchange_seconds(const struct exchange *x);

/* exchange_response.c */

/* The backend as the exchange's producer (exchange_connect sets it). */
extern const struct producer_ops exchange_backend_producer;

/* What a backend protocol hands back as it reads the backend's bytes
 * (backend_protocol.h): */

/* An interim (1xx, not 101) head, parsed into x->response from buf:
 * passed on to the client if it knows them. Returns 0, or -1 if out of
 * memory. */
int exchange_backend_interim(struct relay *relay, const char *buf);

/* The final head, parsed into x->response from buf, its body framed as
 * `framing` says: the client gets our version of it. Returns 0, or 502 if
 * it cannot be passed on (the exchange_backend_broken follows). */
int exchange_backend_head(struct relay *relay, const char *buf, const struct response_info *framing);

/* Bytes of the response body, as the backend framed them. */
void exchange_backend_body(struct relay *relay, const char *data, size_t len);

/* The backend's response cannot be passed on (`what` says why, for the
 * log): a 502 if the client has not had a byte of it yet, and the backend
 * connection is not reused. */
void exchange_backend_broken(struct relay *relay, const char *what);

/* exchange_request.c */

/* Parses what the buffer holds of the head (new bytes were appended). */
void exchange_parse_head(struct relay *relay);

/* Done with the parsed request and its first `used` bytes in the buffer. */
void exchange_consume_request(struct relay *relay, size_t used);

/* The backend socket became writable (or failed) while connecting. */
void exchange_connect_finished(struct relay *relay);

/* exchange_file.c */

/* Answers the request from the files of x->pool's root (root_fd >= 0):
 * the file producer, or rsp's own answer (301, 403, 404, 405, 412, 416,
 * 500). */
void exchange_serve_file(struct relay *relay);

/* The request's target as a path for file_open (the origin form; an
 * absolute form's path and query), its length in *length. */
const char *exchange_file_target(const struct request_view *view, size_t *length);

/* exchange_fastcgi.c */

/* A request to a pool of files with `fastcgi` (x->pool->fastcgi): decides
 * what runs (fastcgi_script.h). A script to run: x->fastcgi set and
 * x->pool the FastCGI pool, and true. A file (or a directory's 301): x->pool
 * kept, and true. Otherwise the request was answered (403, 404, 500): false. */
bool exchange_fastcgi_route(struct relay *relay);

/* The checks of who may enter (exchange_access.c), once the pool is
 * known: allow/deny (403), then basic_auth (401), then a Content-Length
 * over max_body_size (413); sets x->max_body. Returns true if the request
 * may go on; false when it was answered. */
bool exchange_admit(struct relay *relay);

/* Sets x->client_address from the head just read: the connection's client
 * (the TCP peer, or the PROXY header's address), unless that is one of
 * trusted_proxies: then the right-most X-Forwarded-For address not among
 * them (all among them: the left-most; a malformed header: the peer).
 * Sets x->chain_believed: whether that X-Forwarded-For is passed on. */
void exchange_find_client(struct relay *relay);

/* A request failed basic_auth: counted (its limit_req token, when
 * limit_req applies, was taken before basic_auth was asked). */
void exchange_auth_failed(struct relay *relay);

/* access_log_capture.c */

/* Copies what the access log needs of the request, once per exchange. */
void access_log_capture(struct relay *relay);

/* Writes the exchange's access log line, if it had a request. */
void access_log_exchange(struct relay *relay);

#endif
