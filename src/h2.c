/* h2.c -- one HTTP/2 server session: nghttp2 driven by the reactor's
 * bytes, streams handed to the owner as requests, floods bounded.
 *
 * nghttp2 keeps the protocol state; this file keeps, per stream, the head
 * while it arrives (to check it whole: h2_validate.c), the request body
 * bytes the owner has not passed on yet (flow control as backpressure)
 * and the response body waiting for the windows; and, per session, one
 * token bucket per kind of flood (h2.h). */
#define _GNU_SOURCE
#include "h2.h"

#include "buffer.h"
#include "reactor.h"

#include <malloc.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The kinds of frames a flood is made of, and their budgets (h2.h). */
enum flood { FLOOD_RESET, FLOOD_SETTINGS, FLOOD_PING, FLOOD_PRIORITY, FLOOD_EMPTY_DATA, FLOODS };

static const struct {
    double burst, rate;
    const char *reason;
} floods[FLOODS] = {
    [FLOOD_RESET] = { H2_RESET_BURST, H2_RESET_RATE, "too many streams reset" },
    [FLOOD_SETTINGS] = { H2_SETTINGS_BURST, H2_SETTINGS_RATE, "too many SETTINGS frames" },
    [FLOOD_PING] = { H2_PING_BURST, H2_PING_RATE, "too many PING frames" },
    [FLOOD_PRIORITY] = { H2_PRIORITY_BURST, H2_PRIORITY_RATE, "too many PRIORITY frames" },
    [FLOOD_EMPTY_DATA] = { H2_EMPTY_DATA_BURST, H2_EMPTY_DATA_RATE, "too many empty DATA frames" },
};

/* What the graceful shutdown's PING carries, to know its ACK. */
static const uint8_t goaway_ping[8] = { 'r', 's', 'p', '-', 'b', 'y', 'e', '!' };

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
    int refuse_status;               /* the session answers this at the head's end */
    const char *refuse_reason;
    bool rejected;                   /* reset or answered by the session */
    bool announced;                  /* the owner was told (on_request) */
    bool owner_reset;                /* the owner reset it: not the client's fault */
    bool reset_after_answer;         /* the session answered before the request ended */
    uint64_t unconsumed;             /* body bytes given to the owner, not consumed yet */

    /* The response. */
    bool responded;
    bool body_ended;                 /* h2_end_body was called */
    bool eof_sent;
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

/* nghttp2's allocator, counting what it holds (h2_session_memory). */
static void *mem_malloc(size_t size, void *user)
{
    struct h2_session *sess = user;
    void *p = malloc(size);

    if (p != NULL)
        sess->memory += malloc_usable_size(p);
    return p;
}

static void mem_free(void *p, void *user)
{
    struct h2_session *sess = user;

    if (p != NULL)
        sess->memory -= malloc_usable_size(p);
    free(p);
}

static void *mem_calloc(size_t n, size_t size, void *user)
{
    struct h2_session *sess = user;
    void *p = calloc(n, size);

    if (p != NULL)
        sess->memory += malloc_usable_size(p);
    return p;
}

static void *mem_realloc(void *old, size_t size, void *user)
{
    struct h2_session *sess = user;
    size_t before = old != NULL ? malloc_usable_size(old) : 0;
    void *p = realloc(old, size);

    if (p != NULL)
        sess->memory = sess->memory - before + malloc_usable_size(p);
    return p;
}

/* Spends a token of the budget; false when there is none left. */
static bool budget_spend(struct budget *b, double burst, double rate, double now)
{
    if (now > b->at) {
        b->tokens += (now - b->at) * rate;
        if (b->tokens > burst)
            b->tokens = burst;
        b->at = now;
    }
    if (b->tokens < 1)
        return false;
    b->tokens -= 1;
    return true;
}

/* Tells the owner of a GOAWAY, or of the end without one. */
static void report_goaway(struct h2_session *sess, bool from_client, uint32_t code, const char *reason)
{
    if (sess->cb.on_goaway != NULL)
        sess->cb.on_goaway(sess->closure, from_client, code, reason);
}

/* Ends the connection for a reason of ours: GOAWAY with code, no more
 * streams, the end once it is sent. Only the first reason counts. */
static void terminate(struct h2_session *sess, uint32_t code, const char *reason)
{
    if (sess->reason != NULL || sess->dead)
        return;
    sess->reason = reason;
    nghttp2_session_terminate_session(sess->ng, code);
    report_goaway(sess, false, code, reason);
}

/* One frame of a flood kind arrived: GOAWAY ENHANCE_YOUR_CALM once the
 * budget is spent. */
static void count_flood(struct h2_session *sess, enum flood kind)
{
    if (!budget_spend(&sess->budgets[kind], floods[kind].burst, floods[kind].rate, reactor_now()))
        terminate(sess, NGHTTP2_ENHANCE_YOUR_CALM, floods[kind].reason);
}

/* The session's record of a stream, or NULL. */
static struct h2_stream *stream_of(const struct h2_session *sess, int32_t id)
{
    return nghttp2_session_get_stream_user_data(sess->ng, id);
}

/* Frees what the head took while it arrived. */
static void drop_head(struct h2_stream *st)
{
    buffer_free(&st->head);
    buffer_free(&st->cookie);
    free(st->refs);
    st->refs = NULL;
    st->ref_count = st->ref_capacity = 0;
}

/* Unlinks and frees a stream's record. */
static void stream_free(struct h2_session *sess, struct h2_stream *st)
{
    if (st->prev != NULL)
        st->prev->next = st->next;
    else
        sess->streams = st->next;
    if (st->next != NULL)
        st->next->prev = st->prev;
    drop_head(st);
    buffer_free(&st->out);
    free(st);
}

/* A malformed request (or trailer section): RST_STREAM PROTOCOL_ERROR. */
static void reject(struct h2_session *sess, struct h2_stream *st, const char *reason)
{
    if (st->rejected)
        return;
    st->rejected = true;
    drop_head(st);
    nghttp2_submit_rst_stream(sess->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_PROTOCOL_ERROR);
    if (!st->announced && sess->cb.on_rejected != NULL)
        sess->cb.on_rejected(sess->closure, st->id, 0, reason);
}

/* Answers a request the owner is never told of (405, 431) with an empty
 * body; if the client is still sending, RST_STREAM NO_ERROR follows the
 * answer (RFC 9113, 8.1). Counts as a reset the client caused. */
static void answer(struct h2_session *sess, struct h2_stream *st, int status, bool ended,
                   const char *reason)
{
    char code[4];
    nghttp2_nv nv[3] = {
        { (uint8_t *)":status", (uint8_t *)code, 7, 3, NGHTTP2_NV_FLAG_NONE },
        { (uint8_t *)"content-length", (uint8_t *)"0", 14, 1, NGHTTP2_NV_FLAG_NONE },
        { (uint8_t *)"allow", (uint8_t *)"GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS", 5, 44,
          NGHTTP2_NV_FLAG_NONE },
    };

    st->rejected = true;
    drop_head(st);
    snprintf(code, sizeof code, "%03d", status);
    st->reset_after_answer = !ended;
    if (nghttp2_submit_response(sess->ng, st->id, nv, status == 405 ? 3 : 2, NULL) != 0)
        nghttp2_submit_rst_stream(sess->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
    if (sess->cb.on_rejected != NULL)
        sess->cb.on_rejected(sess->closure, st->id, status, reason);
    count_flood(sess, FLOOD_RESET);
}

/* Records a field of the head. Returns 0, or -1 if out of memory. */
static int keep_field(struct h2_stream *st, const uint8_t *name, size_t name_length,
                      const uint8_t *value, size_t value_length)
{
    struct field_ref *r;

    if (st->ref_count == st->ref_capacity) {
        size_t capacity = st->ref_capacity != 0 ? st->ref_capacity * 2 : 16;
        struct field_ref *refs = realloc(st->refs, capacity * sizeof *refs);
        if (refs == NULL)
            return -1;
        st->refs = refs;
        st->ref_capacity = capacity;
    }
    r = &st->refs[st->ref_count];
    r->name = buffer_length(&st->head);
    r->name_length = name_length;
    r->value = r->name + name_length;
    r->value_length = value_length;
    if (buffer_append(&st->head, (const char *)name, name_length) == -1 ||
        buffer_append(&st->head, (const char *)value, value_length) == -1)
        return -1;
    st->ref_count++;
    return 0;
}

/* Adds a cookie crumb to the joined cookie (RFC 9113, 8.2.3). Returns 0,
 * or -1 if out of memory. */
static int keep_cookie(struct h2_stream *st, const uint8_t *value, size_t length)
{
    if (buffer_length(&st->cookie) > 0 && buffer_append(&st->cookie, "; ", 2) == -1)
        return -1;
    return buffer_append(&st->cookie, (const char *)value, length);
}

/* A field of a head arrived (after nghttp2's own checks): counts it
 * against the limits, checks it and keeps it. */
static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, nghttp2_rcbuf *name,
                     nghttp2_rcbuf *value, uint8_t flags, void *user)
{
    struct h2_session *sess = user;
    struct h2_stream *st = stream_of(sess, frame->hd.stream_id);
    nghttp2_vec n = nghttp2_rcbuf_get_buf(name), v = nghttp2_rcbuf_get_buf(value);
    bool trailer = frame->headers.cat != NGHTTP2_HCAT_REQUEST;
    bool pseudo = n.len > 0 && n.base[0] == ':';
    bool cookie = n.len == 6 && memcmp(n.base, "cookie", 6) == 0;

    (void)ng;
    (void)flags;
    if (st == NULL || st->rejected || st->refuse_status != 0)
        return 0;
    st->list_size += n.len + v.len + 32;
    if (h2_field_check((const char *)n.base, n.len, (const char *)v.base, v.len) != H2_FIELD_OK) {
        reject(sess, st, "an invalid field");
    } else if (st->list_size > sess->settings.max_header_list_size) {
        if (trailer)
            reject(sess, st, "trailer fields too large");
        else
            st->refuse_status = 431, st->refuse_reason = "header list too large";
    } else if (trailer) {
        return 0; /* checked, and dropped: the backend gets no trailers */
    } else if (!pseudo && (!cookie || buffer_length(&st->cookie) == 0) &&
               ++st->regular_fields > sess->settings.max_header_fields) {
        st->refuse_status = 431, st->refuse_reason = "too many header fields";
    } else if (cookie ? keep_cookie(st, v.base, v.len) : keep_field(st, n.base, n.len, v.base, v.len)) {
        nghttp2_submit_rst_stream(sess->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
        st->rejected = st->owner_reset = true; /* out of memory: ours, not the client's */
        drop_head(st);
    }
    if (st->refuse_status != 0)
        drop_head(st);
    return 0;
}

/* A field nghttp2 finds invalid (a bad byte, blanks around a value): it
 * would drop it; rsp refuses the request. */
static int on_invalid_header(nghttp2_session *ng, const nghttp2_frame *frame, nghttp2_rcbuf *name,
                             nghttp2_rcbuf *value, uint8_t flags, void *user)
{
    struct h2_session *sess = user;
    struct h2_stream *st = stream_of(sess, frame->hd.stream_id);

    (void)ng;
    (void)name;
    (void)value;
    (void)flags;
    if (st != NULL)
        reject(sess, st, "an invalid field");
    return 0;
}

/* A new stream's HEADERS begins: its record. */
static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    struct h2_session *sess = user;
    struct h2_stream *st;

    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    st = calloc(1, sizeof *st);
    if (st == NULL) {
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_INTERNAL_ERROR);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    st->id = frame->hd.stream_id;
    st->next = sess->streams;
    if (sess->streams != NULL)
        sess->streams->prev = st;
    sess->streams = st;
    nghttp2_session_set_stream_user_data(ng, st->id, st);
    return 0;
}

/* Builds the regular fields the owner gets: those kept, less the ones
 * taken out, and the joined cookie. Returns the array (free it), or NULL
 * if out of memory. */
static struct h2_header *owner_fields(struct h2_stream *st, const struct h2_header *all,
                                      size_t *count)
{
    struct h2_header *out = malloc((st->ref_count + 1) * sizeof *out);
    size_t n = 0;

    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < st->ref_count; i++)
        if (all[i].name.data[0] != ':' && !h2_field_is_taken_out(all[i].name))
            out[n++] = all[i];
    if (buffer_length(&st->cookie) > 0)
        out[n++] = (struct h2_header){ { "cookie", 6 },
                                       { buffer_bytes(&st->cookie), buffer_length(&st->cookie) } };
    *count = n;
    return out;
}

/* A request head is complete: checks it whole, then tells the owner or
 * refuses it. */
static void head_complete(struct h2_session *sess, struct h2_stream *st, bool end_stream)
{
    struct h2_header *all, *fields = NULL;
    struct h2_request_head head;
    const char *why;
    bool connect;

    if (st->rejected)
        return;
    if (st->refuse_status != 0) {
        answer(sess, st, st->refuse_status, end_stream, st->refuse_reason);
        return;
    }
    all = malloc((st->ref_count + 1) * sizeof *all);
    if (all == NULL) {
        h2_reset_stream(sess, st->id, NGHTTP2_INTERNAL_ERROR);
        return;
    }
    for (size_t i = 0; i < st->ref_count; i++) {
        const struct field_ref *r = &st->refs[i];
        all[i] = (struct h2_header){ { buffer_bytes(&st->head) + r->name, r->name_length },
                                     { buffer_bytes(&st->head) + r->value, r->value_length } };
    }
    why = h2_request_check(all, st->ref_count, &head, &connect);
    if (connect)
        answer(sess, st, 405, end_stream, "CONNECT");
    else if (why != NULL)
        reject(sess, st, why);
    else if ((fields = owner_fields(st, all, &head.header_count)) == NULL)
        h2_reset_stream(sess, st->id, NGHTTP2_INTERNAL_ERROR);
    else {
        head.headers = fields;
        head.end_stream = end_stream;
        st->announced = true;
        sess->announced++;
        sess->cb.on_request(sess->closure, st->id, &head);
    }
    free(fields);
    free(all);
    drop_head(st);
}

/* The client ended its side of a stream. */
static void request_ended(struct h2_session *sess, struct h2_stream *st)
{
    if (st != NULL && st->announced && !st->owner_reset)
        sess->cb.on_data(sess->closure, st->id, NULL, 0, true);
}

/* The final GOAWAY of a graceful shutdown, once the client acknowledged
 * the notice's PING: streams up to the last one processed finish. */
static void final_goaway(struct h2_session *sess)
{
    nghttp2_submit_goaway(sess->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(sess->ng),
                          NGHTTP2_NO_ERROR, NULL, 0);
}

/* A whole frame arrived. */
static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    struct h2_session *sess = user;
    struct h2_stream *st = frame->hd.stream_id != 0 ? stream_of(sess, frame->hd.stream_id) : NULL;
    bool end = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;

    (void)ng;
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
        if (st != NULL && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
            head_complete(sess, st, end);
        else if (end)
            request_ended(sess, st);
        break;
    case NGHTTP2_DATA:
        if (frame->hd.length - frame->data.padlen == 0 && !end)
            count_flood(sess, FLOOD_EMPTY_DATA);
        if (end)
            request_ended(sess, st);
        break;
    case NGHTTP2_SETTINGS:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK))
            count_flood(sess, FLOOD_SETTINGS);
        break;
    case NGHTTP2_PING:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK))
            count_flood(sess, FLOOD_PING);
        else if (sess->shutting_down && memcmp(frame->ping.opaque_data, goaway_ping, 8) == 0)
            final_goaway(sess);
        break;
    case NGHTTP2_RST_STREAM:
        count_flood(sess, FLOOD_RESET);
        break;
    case NGHTTP2_GOAWAY:
        report_goaway(sess, true, frame->goaway.error_code, nghttp2_http2_strerror(frame->goaway.error_code));
        break;
    }
    return 0;
}

/* A frame header arrived: PRIORITY frames are counted here, as nghttp2
 * (with RFC 7540 priorities off) tells nothing more of them. */
static int on_begin_frame(nghttp2_session *ng, const nghttp2_frame_hd *hd, void *user)
{
    (void)ng;
    if (hd->type == NGHTTP2_PRIORITY)
        count_flood(user, FLOOD_PRIORITY);
    return 0;
}

/* nghttp2's word on what was wrong, kept for on_rejected. */
static int on_error(nghttp2_session *ng, int code, const char *msg, size_t len, void *user)
{
    struct h2_session *sess = user;
    size_t n = 0;

    (void)ng;
    (void)code;
    for (size_t i = 0; i < len && n + 1 < sizeof sess->error_text; i++)
        if (msg[i] >= 0x20 && msg[i] < 0x7f)
            sess->error_text[n++] = msg[i];
    sess->error_text[n] = '\0';
    return 0;
}

/* Request body bytes: to the owner, whose h2_consume opens the window
 * again; bytes for a stream it does not know of are consumed at once. */
static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user)
{
    struct h2_session *sess = user;
    struct h2_stream *st = stream_of(sess, id);

    (void)flags;
    if (st == NULL || !st->announced || st->owner_reset) {
        nghttp2_session_consume(ng, id, len);
        return 0;
    }
    st->unconsumed += len;
    sess->cb.on_data(sess->closure, id, (const char *)data, len, false);
    return 0;
}

/* The reason in a GOAWAY nghttp2 sends (its debug data, printable bytes
 * only), or the code's name. */
static const char *goaway_text(struct h2_session *sess, const nghttp2_goaway *g)
{
    size_t n = 0;

    for (size_t i = 0; i < g->opaque_data_len && n + 1 < sizeof sess->reason_text; i++)
        if (g->opaque_data[i] >= 0x20 && g->opaque_data[i] < 0x7f)
            sess->reason_text[n++] = (char)g->opaque_data[i];
    sess->reason_text[n] = '\0';
    return n > 0 ? sess->reason_text : nghttp2_http2_strerror(g->error_code);
}

/* A frame left: counts the resets the server sends because of the client
 * ("MadeYouReset"), notes the ends of responses, and reports GOAWAYs
 * nghttp2 decided on. */
static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    struct h2_session *sess = user;
    struct h2_stream *st = frame->hd.stream_id != 0 ? stream_of(sess, frame->hd.stream_id) : NULL;

    switch (frame->hd.type) {
    case NGHTTP2_RST_STREAM:
        if (st == NULL || !st->owner_reset)
            count_flood(sess, FLOOD_RESET);
        if (st != NULL && !st->announced && !st->rejected) {
            st->rejected = true; /* by nghttp2's checks */
            if (sess->cb.on_rejected != NULL)
                sess->cb.on_rejected(sess->closure, st->id, 0,
                                     sess->error_text[0] != '\0' ? sess->error_text :
                                     nghttp2_http2_strerror(frame->rst_stream.error_code));
        }
        break;
    case NGHTTP2_HEADERS:
        if (st != NULL && st->reset_after_answer && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
            st->owner_reset = true; /* counted when answered */
            nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_NO_ERROR);
        }
        break;
    case NGHTTP2_DATA:
        if (st != NULL && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
            st->eof_sent = true;
        break;
    case NGHTTP2_GOAWAY:
        if (sess->reason == NULL && frame->goaway.error_code != NGHTTP2_NO_ERROR) {
            sess->reason = goaway_text(sess, &frame->goaway);
            report_goaway(sess, false, frame->goaway.error_code, sess->reason);
        }
        break;
    }
    return 0;
}

/* A stream is gone: the connection window gets back what the owner never
 * consumed, the owner is told, the record freed. */
static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t error_code, void *user)
{
    struct h2_session *sess = user;
    struct h2_stream *st = stream_of(sess, id);

    if (st == NULL)
        return 0;
    if (st->unconsumed > 0)
        nghttp2_session_consume_connection(ng, st->unconsumed);
    nghttp2_session_set_stream_user_data(ng, id, NULL);
    if (st->announced) {
        sess->announced--;
        sess->cb.on_stream_closed(sess->closure, id, error_code);
    }
    stream_free(sess, st);
    return 0;
}

/* The response body's source: what the owner buffered, DEFERRED when it
 * has nothing yet (h2_write_body resumes it), EOF after h2_end_body. */
static ssize_t read_body(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *source, void *user)
{
    struct h2_session *sess = user;
    struct h2_stream *st = source->ptr;
    size_t have = buffer_length(&st->out);
    size_t n = have < length ? have : length;

    (void)ng;
    (void)id;
    memcpy(buf, buffer_bytes(&st->out), n);
    buffer_consume(&st->out, n);
    if (st->above_low && buffer_length(&st->out) <= sess->settings.stream_low_water) {
        st->above_low = false;
        st->drained = true;
    }
    if (buffer_length(&st->out) == 0 && st->body_ended) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        st->waiting_since = 0;
    } else if (buffer_length(&st->out) == 0) {
        st->waiting_since = 0;
        if (n == 0) {
            st->deferred = true;
            return NGHTTP2_ERR_DEFERRED;
        }
    } else if (n > 0) {
        st->waiting_since = reactor_now();
    }
    return (ssize_t)n;
}

void h2_settings_default(struct h2_settings *s)
{
    s->max_concurrent_streams = 128;
    s->max_header_list_size = 32768 + 32 * 100;
    s->max_header_fields = 100;
    s->stream_window = 65535;
    s->connection_window = 1024 * 1024;
    s->stream_low_water = 16 * 1024;
}

/* The library's options: rsp's limits, and no automatic WINDOW_UPDATE. */
static nghttp2_option *make_options(void)
{
    nghttp2_option *opt;

    if (nghttp2_option_new(&opt) != 0)
        return NULL;
    nghttp2_option_set_no_auto_window_update(opt, 1);
    nghttp2_option_set_max_deflate_dynamic_table_size(opt, H2_HEADER_TABLE_SIZE);
    nghttp2_option_set_max_outbound_ack(opt, H2_MAX_OUTBOUND_ACK);
    nghttp2_option_set_max_settings(opt, H2_MAX_SETTINGS_ENTRIES);
    nghttp2_option_set_max_continuations(opt, H2_MAX_CONTINUATIONS);
    nghttp2_option_set_no_closed_streams(opt, 1);
    return opt;
}

/* The callbacks nghttp2 calls. */
static nghttp2_session_callbacks *make_callbacks(void)
{
    nghttp2_session_callbacks *cbs;

    if (nghttp2_session_callbacks_new(&cbs) != 0)
        return NULL;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback2(cbs, on_header);
    nghttp2_session_callbacks_set_on_invalid_header_callback2(cbs, on_invalid_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    nghttp2_session_callbacks_set_on_begin_frame_callback(cbs, on_begin_frame);
    nghttp2_session_callbacks_set_error_callback2(cbs, on_error);
    return cbs;
}

/* Queues the server's SETTINGS and opens the connection window. Returns 0,
 * or -1. */
static int submit_settings(struct h2_session *sess)
{
    const struct h2_settings *s = &sess->settings;
    nghttp2_settings_entry iv[] = {
        { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, s->max_concurrent_streams },
        { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, s->max_header_list_size },
        { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, s->stream_window },
        { NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, H2_HEADER_TABLE_SIZE },
        { NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
        { NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1 },
    };

    if (nghttp2_submit_settings(sess->ng, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]) != 0)
        return -1;
    if (s->connection_window > 65535 &&
        nghttp2_session_set_local_window_size(sess->ng, NGHTTP2_FLAG_NONE, 0,
                                              (int32_t)s->connection_window) != 0)
        return -1;
    return 0;
}

struct h2_session *h2_session_new(struct connection *c, const struct h2_settings *s,
                                  const struct h2_callbacks *cb, void *closure)
{
    struct h2_session *sess = calloc(1, sizeof *sess);
    nghttp2_session_callbacks *cbs = make_callbacks();
    nghttp2_option *opt = make_options();
    int rc = -1;

    if (sess != NULL && cbs != NULL && opt != NULL) {
        nghttp2_mem mem = { sess, mem_malloc, mem_free, mem_calloc, mem_realloc };
        sess->c = c;
        sess->settings = *s;
        sess->cb = *cb;
        sess->closure = closure;
        for (int k = 0; k < FLOODS; k++)
            sess->budgets[k] = (struct budget){ floods[k].burst, reactor_now() };
        rc = nghttp2_session_server_new3(&sess->ng, cbs, sess, opt, &mem);
        if (rc == 0 && submit_settings(sess) == -1)
            rc = -1;
    }
    if (cbs != NULL)
        nghttp2_session_callbacks_del(cbs);
    if (opt != NULL)
        nghttp2_option_del(opt);
    if (rc != 0 && sess != NULL) {
        if (sess->ng != NULL)
            nghttp2_session_del(sess->ng);
        free(sess);
        return NULL;
    }
    return sess;
}

void h2_session_free(struct h2_session *sess)
{
    if (sess == NULL)
        return;
    nghttp2_session_del(sess->ng);
    while (sess->streams != NULL)
        stream_free(sess, sess->streams);
    free(sess);
}

/* The GOAWAY code for a fatal error of nghttp2's. */
static uint32_t fatal_code(int error)
{
    if (error == NGHTTP2_ERR_FLOODED || error == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS)
        return NGHTTP2_ENHANCE_YOUR_CALM;
    if (error == NGHTTP2_ERR_NOMEM || error == NGHTTP2_ERR_CALLBACK_FAILURE)
        return NGHTTP2_INTERNAL_ERROR;
    return NGHTTP2_PROTOCOL_ERROR;
}

/* A fatal error of nghttp2's: no more frames from it; a GOAWAY written by
 * hand tells the client why (RFC 9113, 5.4.1), and the owner closes. */
static void die(struct h2_session *sess, int error)
{
    uint32_t code = fatal_code(error);
    uint32_t last = (uint32_t)nghttp2_session_get_last_proc_stream_id(sess->ng);
    unsigned char frame[17] = { 0, 0, 8, NGHTTP2_GOAWAY, 0, 0, 0, 0, 0,
                                (unsigned char)(last >> 24), (unsigned char)(last >> 16),
                                (unsigned char)(last >> 8), (unsigned char)last,
                                (unsigned char)(code >> 24), (unsigned char)(code >> 16),
                                (unsigned char)(code >> 8), (unsigned char)code };

    if (sess->dead)
        return;
    sess->dead = true;
    if (sess->reason == NULL) {
        sess->reason = nghttp2_strerror(error);
        report_goaway(sess, false, code, sess->reason);
    }
    if (error != NGHTTP2_ERR_BAD_CLIENT_MAGIC)
        connection_write(sess->c, (const char *)frame, sizeof frame);
}

int h2_session_receive(struct h2_session *sess, const char *data, size_t len)
{
    ssize_t n;

    if (sess->dead)
        return -1;
    n = nghttp2_session_mem_recv(sess->ng, (const uint8_t *)data, len);
    if (n < 0) {
        die(sess, (int)n);
        return -1;
    }
    return h2_session_flush(sess);
}

/* Tells the owner of the streams whose buffers drained during a flush. */
static void report_drained(struct h2_session *sess)
{
    struct h2_stream *st = sess->streams;

    while (st != NULL) {
        struct h2_stream *next = st->next;
        if (st->drained) {
            st->drained = false;
            if (st->announced && sess->cb.on_drained != NULL)
                sess->cb.on_drained(sess->closure, st->id); /* may free no stream: frees wait for mem_send */
        }
        st = next;
    }
}

int h2_session_flush(struct h2_session *sess)
{
    char batch[16384];
    size_t used = 0;

    if (sess->dead)
        return -1;
    while (connection_queued(sess->c) < H2_HIGH_WATER) {
        const uint8_t *p;
        ssize_t n = nghttp2_session_mem_send(sess->ng, &p);
        if (n < 0) {
            die(sess, (int)n);
            break;
        }
        if (n == 0)
            break;
        if (used + (size_t)n > sizeof batch) {
            connection_write(sess->c, batch, used);
            used = 0;
        }
        if ((size_t)n >= sizeof batch) {
            connection_write(sess->c, (const char *)p, (size_t)n);
        } else {
            memcpy(batch + used, p, (size_t)n);
            used += (size_t)n;
        }
    }
    if (used > 0)
        connection_write(sess->c, batch, used);
    if (sess->dead)
        return -1;
    report_drained(sess);
    return 0;
}

bool h2_session_want_read(const struct h2_session *sess)
{
    return !sess->dead && nghttp2_session_want_read(sess->ng) &&
           connection_queued(sess->c) < H2_HIGH_WATER;
}

bool h2_session_done(const struct h2_session *sess)
{
    return sess->dead || (!nghttp2_session_want_read(sess->ng) && !nghttp2_session_want_write(sess->ng));
}

/* The stream the owner may act on: told of, and not gone. */
static struct h2_stream *owned(const struct h2_session *sess, int32_t id)
{
    struct h2_stream *st = sess->dead ? NULL : stream_of(sess, id);

    return st != NULL && st->announced ? st : NULL;
}

/* Fills nv with the response's fields, names lowercased into names (as
 * long as all the names together). Returns how many. */
static size_t response_fields(nghttp2_nv *nv, char *status, int code, const struct h2_header *headers,
                              size_t count, char *names)
{
    size_t n = 0;

    snprintf(status, 4, "%03d", code);
    nv[n++] = (nghttp2_nv){ (uint8_t *)":status", (uint8_t *)status, 7, 3, NGHTTP2_NV_FLAG_NONE };
    for (size_t i = 0; i < count; i++) {
        const struct h2_header *h = &headers[i];
        if (h->name.length == 0 || h2_response_header_dropped(h->name))
            continue;
        for (size_t j = 0; j < h->name.length; j++) {
            char c = h->name.data[j];
            names[j] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
        }
        nv[n++] = (nghttp2_nv){ (uint8_t *)names, (uint8_t *)h->value.data, h->name.length,
                                h->value.length, NGHTTP2_NV_FLAG_NONE };
        names += h->name.length;
    }
    return n;
}

int h2_respond(struct h2_session *sess, int32_t stream_id, int status,
               const struct h2_header *headers, size_t count, bool has_body)
{
    struct h2_stream *st = owned(sess, stream_id);
    bool interim = status >= 100 && status < 200;
    nghttp2_data_provider body = { .source.ptr = st, .read_callback = read_body };
    size_t names_length = 0, n;
    char code[4], *names;
    nghttp2_nv *nv;
    int rc;

    if (st == NULL || st->responded || status < 100 || status > 599 || status == 101)
        return -1;
    for (size_t i = 0; i < count; i++)
        names_length += headers[i].name.length;
    nv = malloc((count + 1) * sizeof *nv);
    names = malloc(names_length + 1);
    if (nv == NULL || names == NULL) {
        free(nv);
        free(names);
        return -1;
    }
    n = response_fields(nv, code, status, headers, count, names);
    if (interim)
        rc = nghttp2_submit_headers(sess->ng, NGHTTP2_FLAG_NONE, stream_id, NULL, nv, n, NULL);
    else
        rc = nghttp2_submit_response(sess->ng, stream_id, nv, n, has_body ? &body : NULL);
    free(nv);
    free(names);
    if (rc != 0)
        return -1;
    if (!interim) {
        st->responded = true;
        st->body_ended = !has_body;
    }
    return 0;
}

/* Notes that the stream has response bytes waiting from now on, if none
 * did. */
static void start_waiting(struct h2_stream *st)
{
    if (st->waiting_since == 0)
        st->waiting_since = reactor_now();
}

int h2_write_body(struct h2_session *sess, int32_t stream_id, const char *data, size_t len)
{
    struct h2_stream *st = owned(sess, stream_id);

    if (st == NULL || !st->responded || st->body_ended)
        return -1;
    if (len == 0)
        return 0;
    if (buffer_append(&st->out, data, len) == -1)
        return -1;
    start_waiting(st);
    if (buffer_length(&st->out) > sess->settings.stream_low_water)
        st->above_low = true;
    if (st->deferred) {
        st->deferred = false;
        nghttp2_session_resume_data(sess->ng, stream_id);
    }
    return 0;
}

int h2_end_body(struct h2_session *sess, int32_t stream_id)
{
    struct h2_stream *st = owned(sess, stream_id);

    if (st == NULL || !st->responded || st->body_ended)
        return -1;
    st->body_ended = true;
    start_waiting(st);
    if (st->deferred) {
        st->deferred = false;
        nghttp2_session_resume_data(sess->ng, stream_id);
    }
    return 0;
}

size_t h2_stream_queued(const struct h2_session *sess, int32_t stream_id)
{
    struct h2_stream *st = owned(sess, stream_id);

    return st != NULL ? buffer_length(&st->out) : 0;
}

void h2_consume(struct h2_session *sess, int32_t stream_id, size_t n)
{
    struct h2_stream *st = owned(sess, stream_id);

    if (st == NULL)
        return;
    if (n > st->unconsumed)
        n = (size_t)st->unconsumed;
    st->unconsumed -= n;
    nghttp2_session_consume(sess->ng, stream_id, n);
}

void h2_reset_stream(struct h2_session *sess, int32_t stream_id, uint32_t code)
{
    struct h2_stream *st = sess->dead ? NULL : stream_of(sess, stream_id);

    if (st == NULL || st->owner_reset)
        return;
    st->owner_reset = true;
    nghttp2_submit_rst_stream(sess->ng, NGHTTP2_FLAG_NONE, stream_id, code);
}

void h2_goaway(struct h2_session *sess, bool graceful)
{
    if (sess->dead || sess->shutting_down)
        return;
    sess->shutting_down = true;
    if (!graceful) {
        terminate(sess, NGHTTP2_NO_ERROR, "shutting down");
        return;
    }
    report_goaway(sess, false, NGHTTP2_NO_ERROR, "shutting down: streams in flight finish");
    if (nghttp2_submit_shutdown_notice(sess->ng) != 0 ||
        nghttp2_submit_ping(sess->ng, NGHTTP2_FLAG_NONE, goaway_ping) != 0)
        final_goaway(sess);
}

size_t h2_session_streams(const struct h2_session *sess)
{
    return sess->announced;
}

size_t h2_session_memory(const struct h2_session *sess)
{
    size_t total = sess->memory + sizeof *sess;

    for (const struct h2_stream *st = sess->streams; st != NULL; st = st->next)
        total += sizeof *st + st->head.capacity + st->cookie.capacity + st->out.capacity +
                 st->ref_capacity * sizeof *st->refs;
    return total;
}

double h2_session_stalled_since(const struct h2_session *sess, int32_t *stream_id)
{
    double oldest = 0;

    for (const struct h2_stream *st = sess->streams; st != NULL; st = st->next) {
        if (st->waiting_since != 0 && (oldest == 0 || st->waiting_since < oldest)) {
            oldest = st->waiting_since;
            if (stream_id != NULL)
                *stream_id = st->id;
        }
    }
    return oldest;
}
