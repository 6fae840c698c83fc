/* response_head.h -- a response head as a structure: what a producer (the
 * backend, rsp's own answer) builds, what the body filters edit, and what
 * the client side writes out (HTTP/1 text, or HTTP/2 header pairs).
 *
 * It holds the status, the reason phrase, the fields in their order, and
 * what is known of the body that follows. The fields are the end-to-end
 * ones only: how the client connection goes on (Connection), rsp's HSTS
 * line and the framing rsp adds itself are the client side's to write.
 * Names compare without regard to case; a field's name and value are
 * copied in, NUL-terminated. */
#ifndef RSP_RESPONSE_HEAD_H
#define RSP_RESPONSE_HEAD_H

#include "buffer.h"
#include "http.h"
#include "response.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What follows the head. */
enum response_body {
    RESPONSE_BODY_NONE,     /* nothing (HEAD, 1xx, 204, 304, an empty body) */
    RESPONSE_BODY_LENGTH,   /* exactly head->length bytes, as Content-Length says */
    RESPONSE_BODY_UNKNOWN,  /* bytes until the producer's end: the client side frames
                               them (HTTP/1.1 chunked, HTTP/1.0 until the close, HTTP/2
                               DATA frames) */
    RESPONSE_BODY_AS_SENT,  /* a backend's body passed as it came, framed as its own
                               fields say (chunked, or until the backend closes) */
};

struct response_field {
    char *name;                 /* one allocation: the name, NUL, the value, NUL */
    char *value;
    size_t name_length, value_length;
};

struct response_head {
    int status;                 /* 100..599 */
    const char *reason;         /* the phrase, not owned (valid while the head is
                                   used); NULL: the status line ends after the code */
    size_t reason_length;
    struct response_field *fields;
    size_t count, capacity;
    enum response_body body;
    uint64_t length;            /* for RESPONSE_BODY_LENGTH */
};

/* An empty head for status with its registered reason (reply_reason),
 * no fields, no body. */
void response_head_init(struct response_head *head, int status);

/* Frees the fields; the head is empty again. */
void response_head_free(struct response_head *head);

/* The index of the first field called name, or -1. */
int response_head_find(const struct response_head *head, const char *name);

/* Appends a field. Returns 0, or -1 if out of memory. */
int response_head_add(struct response_head *head, const char *name, size_t name_length,
                      const char *value, size_t value_length);

/* Removes every field called name. */
void response_head_remove(struct response_head *head, const char *name);

/* Replaces the first field called name by value (removing any others), or
 * appends it. Returns 0, or -1 if out of memory. */
int response_head_set(struct response_head *head, const char *name, const char *value);

/* What response_head_from_backend keeps of a backend's head. */
struct response_head_options {
    bool upgrade;               /* a 101: Upgrade passes */
    bool dechunk;               /* the chunked coding is taken off (Transfer-Encoding and
                                   Content-Length dropped; the body is UNKNOWN) */
    bool replace_hsts;          /* rsp writes its own Strict-Transport-Security */
};

/* Fills head (empty) from the backend's parsed head res in buf: its status
 * and reason, its fields without the hop-by-hop ones (Connection and what
 * it lists, Keep-Alive, Proxy-Connection, TE, Trailer, Upgrade unless
 * upgrading), Content-Length beside Transfer-Encoding, X-Accel-Buffering
 * (a word to its proxy, chapter 17), and the others `options` says. The
 * body is NONE for framing FRAMING_NONE, LENGTH for FRAMING_LENGTH, else
 * AS_SENT (UNKNOWN when dechunked). head->reason points into buf. Returns
 * 0, or -1 if out of memory. */
int response_head_from_backend(struct response_head *head, const struct http_request *res,
                               const char *buf, enum response_framing framing, uint64_t length,
                               const struct response_head_options *options);

/* Fills head (empty) from a whole response as reply_append writes it
 * (rsp's own answers): its status, reason and fields; *body_offset is
 * where the body starts in text, and the body is NONE if nothing follows
 * the head, LENGTH otherwise. head->reason points into text. Returns 0, or
 * -1 if out of memory or text is not such a response. */
int response_head_parse(struct response_head *head, const char *text, size_t length,
                        size_t *body_offset);

/* Appends the head as HTTP/1.1 text to out: the status line, the fields,
 * then `extra` (header lines with their CRLFs: rsp's HSTS and Connection
 * lines) and the blank line. Returns 0, or -1 if out of memory. */
int response_head_write(const struct response_head *head, const char *extra, struct buffer *out);

#endif
