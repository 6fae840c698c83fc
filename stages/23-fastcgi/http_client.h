/* http_client.h -- HTTPS requests made by rsp itself (the ACME client), on the reactor. */
#ifndef RSP_HTTP_CLIENT_H
#define RSP_HTTP_CLIENT_H

#include "body.h"
#include "buffer.h"
#include "http.h"

#include <stdbool.h>
#include <stddef.h>

struct http_client_request {
    const char *method;        /* "GET", "HEAD" or "POST" */
    const char *url;           /* https://HOST[:PORT]/PATH?QUERY; HOST a DNS name, an IPv4 address or [IPv6] */
    const char *content_type;  /* of the body, or NULL */
    const char *body;          /* NULL or body_length bytes */
    size_t body_length;
    const char *ca_file;       /* NULL, or a PEM file of extra roots trusted besides the system's */
    double timeout;            /* seconds for the whole exchange: resolve, connect, handshake, response */
    size_t max_response;       /* the most body bytes accepted; a longer body is an error */
};
struct http_client_header { char *name; char *value; };
struct http_client_response {
    int status;
    struct http_client_header *headers;   /* in order, repeated names kept (Link comes several times) */
    size_t header_count;
    char *body;                /* body_length bytes, NUL-terminated */
    size_t body_length;
};
/* The value of the first header named `name` (any case), or NULL. */
const char *http_client_header(const struct http_client_response *r, const char *name);
/* Called once, later, from the reactor (never from inside http_client_start): exactly one of response
 * and error is non-NULL. error is a short phrase for a log line ("connect to 127.0.0.1:14000: Connection
 * refused", "certificate verify failed: ...", "timed out after 30 s", "response too large"...). Both are
 * freed when done returns. done may start new requests. */
typedef void (*http_client_done)(void *closure, const struct http_client_response *response, const char *error);
/* Starts the request. Returns its handle, or NULL (errno: EINVAL for a URL that is not https://HOST..., ENOMEM). */
struct http_client *http_client_start(const struct http_client_request *request, http_client_done done, void *closure);
/* Stops a request under way and frees it; done is never called. */
void http_client_cancel(struct http_client *client);

/* In a child just forked (worker.c): frees the parent's request under way
 * without touching the reactor; done is never called. */
void http_client_forget(struct http_client *client);

/* More on the above:
 * - http_client_start also says EINVAL for a method other than the three,
 *   a body_length without a body, a content_type with a control
 *   character, a timeout that is not a positive number, and a URL with
 *   user info, a control character or a space, or a bad port.
 * - The handle is gone once done is called: done must not cancel it.
 * - It copies what it needs of *request: nothing of it must outlive the
 *   call.
 * - The request carries Host, User-Agent rsp/VERSION, Accept (anything),
 *   Connection: close, and Content-Type and Content-Length with a body
 *   (Content-Length: 0 for a POST without one). Interim 1xx responses are
 *   skipped; a 101 is an error. The response head may be 16 KiB at most
 *   (HTTP_CLIENT_MAX_HEAD, interim heads included). */

/* The response parser, on its own: bytes in, a response out. The client
 * feeds it what the connection reads; the fuzz harness feeds it anything. */
#define HTTP_CLIENT_MAX_HEAD 16384

struct http_client_parser {
    bool head_request;          /* the request was HEAD: no body follows */
    size_t max_response;        /* the most body bytes accepted */
    size_t heads_length;        /* bytes of the interim heads already passed */
    struct buffer head;         /* the head read so far (and any bytes after it) */
    struct http_request res;    /* http.c's parse of it */
    bool body_started;          /* the final head is in; the body is being read */
    bool until_close;           /* the body ends when the server closes */
    struct body_framer framer;  /* for a body framed by Content-Length or chunked */
    struct buffer body;         /* the body, without its chunked coding */
    bool overflow;              /* the body grew past max_response */
    bool out_of_memory;
    int result;                 /* 0 while reading, 1 complete, -1 failed */
    const char *error;          /* why it failed: a static string */
};

/* Prepares p for a response to a request (HEAD or another method). */
void http_client_parser_init(struct http_client_parser *p, bool head_request, size_t max_response);

/* Feeds the next len bytes of the response. Returns 1 once the response
 * is complete (bytes after its end are ignored), 0 if more are needed, -1
 * if it is malformed, too large, or memory ran out (p->error says which).
 * Once it returned something other than 0, further calls return the same. */
int http_client_parser_feed(struct http_client_parser *p, const char *data, size_t len);

/* The server closed the connection: returns 1 if that completes the
 * response (a body that runs until the close), -1 otherwise (p->error). */
int http_client_parser_end(struct http_client_parser *p);

/* After a result of 1: moves the response into *out (free it with
 * http_client_response_free). Returns 0, or -1 if out of memory. */
int http_client_parser_take(struct http_client_parser *p, struct http_client_response *out);

/* Frees what p holds (whatever state it is in). */
void http_client_parser_free(struct http_client_parser *p);

/* Frees what a response holds (not r itself). */
void http_client_response_free(struct http_client_response *r);

#endif
