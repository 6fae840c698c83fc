/* h2_private.h -- what h2.c, h2_request.c and h2_response.c share: the
 * session and its streams. Private to those files. */
#ifndef RSP_H2_PRIVATE_H
#define RSP_H2_PRIVATE_H

#include "buffer.h"
#include "h2.h"

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The kinds of frames a flood is made of, and their budgets (h2.h). */
enum flood { FLOOD_RESET, FLOOD_SETTINGS, FLOOD_PING, FLOOD_PRIORITY, FLOOD_EMPTY_DATA, FLOODS };

struct budget {
    double tokens;
    double at;                       /* when tokens was last brought up to date */
};

/* Where a field of a head being read lies in its stream's head buffer. */
struct field_ref {
    size_t name, name_length, value, value_length;
};

struct h2_stream {
    struct h2_stream *prev, *next;   /* the session's streams */
    int32_t id;

    /* The request head, while it arrives. */
    struct buffer head;              /* the fields' names and values */
    struct field_ref *refs;
    size_t ref_count, ref_capacity;
    struct buffer cookie;            /* the cookie crumbs, joined by "; " */
    size_t list_size;                /* RFC 9113's size: name + value + 32 per field */
    size_t regular_fields;
    bool has_cookie;                 /* a cookie crumb came (the joined cookie is one field) */
    int refuse_status;               /* the session answers this at the head's end */
    const char *refuse_reason;
    bool rejected;                   /* reset or answered by the session */
    bool announced;                  /* the owner was told (on_request) */
    bool owner_reset;                /* the owner reset it: not the client's fault */
    bool reset_after_answer;         /* the session answered before the request ended */
    uint64_t unconsumed;             /* body bytes given to the owner, not consumed yet */
    bool has_length;                 /* the head said content-length: */
    uint64_t length;
    uint64_t received;               /* body bytes given to the owner */

    /* The response. */
    bool responded;
    bool body_ended;                 /* h2_end_body was called */
    bool deferred;                   /* the data source said "nothing yet" */
    bool above_low;                  /* out was above stream_low_water: on_drained due */
    bool drained;                    /* on_drained to call after this flush */
    struct buffer out;               /* body bytes not yet framed */
    double waiting_since;            /* response bytes wait and none left since; 0: none wait */
};

struct h2_session {
    nghttp2_session *ng;
    struct connection *c;
    struct h2_settings settings;
    struct h2_callbacks cb;
    void *closure;
    struct h2_stream *streams;
    size_t announced;                /* streams the owner knows of */
    size_t memory;                   /* nghttp2's allocations */
    struct budget budgets[FLOODS];
    const char *reason;              /* why the session ends the connection, once it does */
    bool shutting_down;              /* h2_goaway was called */
    bool dead;                       /* a fatal error: nothing more is read or written */
    char reason_text[80];            /* the reason nghttp2 gave in its GOAWAY */
    char error_text[160];            /* nghttp2's last error message */
};

/* h2.c */

/* One frame of a flood kind arrived: GOAWAY ENHANCE_YOUR_CALM once the
 * budget is spent. */
void h2_count_flood(struct h2_session *sess, enum flood kind);

/* The session's record of a stream, or NULL. */
struct h2_stream *h2_stream_of(const struct h2_session *sess, int32_t id);

/* h2_request.c: the request head as it arrives, and the request's end.
 * The first three are nghttp2's callbacks (nghttp2.h says when each runs). */

int h2_on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *user);
int h2_on_header(nghttp2_session *ng, const nghttp2_frame *frame, nghttp2_rcbuf *name,
                 nghttp2_rcbuf *value, uint8_t flags, void *user);
int h2_on_invalid_header(nghttp2_session *ng, const nghttp2_frame *frame, nghttp2_rcbuf *name,
                         nghttp2_rcbuf *value, uint8_t flags, void *user);

/* A request head is complete (its HEADERS and CONTINUATIONs): checks it
 * whole, then tells the owner (on_request) or refuses it. */
void h2_head_complete(struct h2_session *sess, struct h2_stream *st, bool end_stream);

/* Request body bytes of a stream: to the owner, or, if the owner does
 * not know of the stream or they go beyond its content-length, consumed
 * at once (the stream then reset). */
void h2_request_data(struct h2_session *sess, int32_t id, const char *data, size_t len);

/* The client ended its side of a stream (st may be NULL): the owner
 * hears of it, unless the body fell short of its content-length (a
 * stream error). */
void h2_request_ended(struct h2_session *sess, struct h2_stream *st);

/* Frees what the head took while it arrived. */
void h2_drop_head(struct h2_stream *st);

#endif
