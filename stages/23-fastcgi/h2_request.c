/* h2_request.c -- the requests of an HTTP/2 session: each head gathered
 * as it arrives, counted against the limits, checked whole
 * (h2_validate.c) and handed to the owner, or refused; the request body
 * passed on.
 *
 * nghttp2 gives a head field by field (after its own checks); they are
 * copied into the stream's head buffer until the head is complete, when
 * the owner gets them all at once and the copy is freed. A head over
 * max_header_list_size or max_header_fields is answered 431 by the
 * session, CONNECT 405; a malformed one is reset (PROTOCOL_ERROR). */
#define _GNU_SOURCE
#include "h2_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Frees what the head took while it arrived. */
void h2_drop_head(struct h2_stream *st)
{
    buffer_free(&st->head);
    buffer_free(&st->cookie);
    free(st->refs);
    st->refs = NULL;
    st->ref_count = st->ref_capacity = 0;
}

/* A malformed request (or trailer section): RST_STREAM PROTOCOL_ERROR. */
static void reject(struct h2_session *sess, struct h2_stream *st, const char *reason)
{
    if (st->rejected)
        return;
    st->rejected = true;
    h2_drop_head(st);
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
    h2_drop_head(st);
    snprintf(code, sizeof code, "%03d", status);
    st->reset_after_answer = !ended;
    if (nghttp2_submit_response(sess->ng, st->id, nv, status == 405 ? 3 : 2, NULL) != 0)
        nghttp2_submit_rst_stream(sess->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
    if (sess->cb.on_rejected != NULL)
        sess->cb.on_rejected(sess->closure, st->id, status, reason);
    h2_count_flood(sess, FLOOD_RESET);
}

/* Appends len bytes to b (buffer_append wants at least one). Returns 0,
 * or -1 if out of memory. */
static int append(struct buffer *b, const void *data, size_t len)
{
    return len > 0 ? buffer_append(b, data, len) : 0;
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
    if (append(&st->head, name, name_length) == -1 || append(&st->head, value, value_length) == -1)
        return -1;
    st->ref_count++;
    return 0;
}

/* Adds a cookie crumb to the joined cookie (RFC 9113, 8.2.3). Returns 0,
 * or -1 if out of memory. */
static int keep_cookie(struct h2_stream *st, const uint8_t *value, size_t length)
{
    st->has_cookie = true;
    if (buffer_length(&st->cookie) > 0 && buffer_append(&st->cookie, "; ", 2) == -1)
        return -1;
    return append(&st->cookie, value, length);
}

/* A field of a head arrived (after nghttp2's own checks): counts it
 * against the limits, checks it and keeps it. */
int h2_on_header(nghttp2_session *ng, const nghttp2_frame *frame, nghttp2_rcbuf *name,
                     nghttp2_rcbuf *value, uint8_t flags, void *user)
{
    struct h2_session *sess = user;
    struct h2_stream *st = h2_stream_of(sess, frame->hd.stream_id);
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
    } else if (!pseudo && (!cookie || !st->has_cookie) &&
               ++st->regular_fields > sess->settings.max_header_fields) {
        st->refuse_status = 431, st->refuse_reason = "too many header fields";
    } else if (cookie ? keep_cookie(st, v.base, v.len) : keep_field(st, n.base, n.len, v.base, v.len)) {
        nghttp2_submit_rst_stream(sess->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
        st->rejected = st->owner_reset = true; /* out of memory: ours, not the client's */
        h2_drop_head(st);
    }
    if (st->refuse_status != 0)
        h2_drop_head(st);
    return 0;
}

/* A field nghttp2 finds invalid (a bad byte, blanks around a value): it
 * would drop it; rsp refuses the request. */
int h2_on_invalid_header(nghttp2_session *ng, const nghttp2_frame *frame, nghttp2_rcbuf *name,
                             nghttp2_rcbuf *value, uint8_t flags, void *user)
{
    struct h2_session *sess = user;
    struct h2_stream *st = h2_stream_of(sess, frame->hd.stream_id);

    (void)ng;
    (void)name;
    (void)value;
    (void)flags;
    if (st != NULL)
        reject(sess, st, "an invalid field");
    return 0;
}

/* A new stream's HEADERS begins: its record. */
int h2_on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
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
void h2_head_complete(struct h2_session *sess, struct h2_stream *st, bool end_stream)
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
    else if (end_stream && head.has_content_length && head.content_length != 0)
        reject(sess, st, "content-length with no body");
    else {
        head.headers = fields;
        head.end_stream = end_stream;
        st->has_length = head.has_content_length;
        st->length = head.content_length;
        st->list_size = 0; /* trailer fields are counted on their own */
        st->announced = true;
        sess->announced++;
        sess->cb.on_request(sess->closure, st->id, &head);
    }
    free(fields);
    free(all);
    h2_drop_head(st);
}

/* The client ended its side of a stream. */
void h2_request_data(struct h2_session *sess, int32_t id, const char *data, size_t len)
{
    struct h2_stream *st = h2_stream_of(sess, id);

    if (st != NULL && st->announced && !st->owner_reset && !st->rejected && st->has_length &&
        len > st->length - st->received)
        reject(sess, st, "DATA beyond content-length");
    if (st == NULL || !st->announced || st->owner_reset || st->rejected) {
        nghttp2_session_consume(sess->ng, id, len);
        return;
    }
    st->received += len;
    st->unconsumed += len;
    sess->cb.on_data(sess->closure, id, data, len, false);
}

void h2_request_ended(struct h2_session *sess, struct h2_stream *st)
{
    if (st == NULL || !st->announced || st->owner_reset || st->rejected)
        return;
    if (st->has_length && st->received != st->length)
        reject(sess, st, "DATA short of content-length");
    else
        sess->cb.on_data(sess->closure, st->id, NULL, 0, true);
}
