/* h2_response.c -- the responses of an HTTP/2 session, and the owner's
 * calls on a stream.
 *
 * A response body waits in its stream's buffer until nghttp2 frames it,
 * which it does only as the client's windows allow (read_body); the owner
 * reads its backend while h2_stream_queued is under its high-water mark
 * and hears on_drained when the buffer is down to stream_low_water. The
 * request body's window opens only with h2_consume. */
#define _GNU_SOURCE
#include "h2_private.h"

#include "reactor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The stream the owner may act on: told of, and not gone. */
static struct h2_stream *owned(const struct h2_session *sess, int32_t id)
{
    struct h2_stream *st = sess->dead ? NULL : h2_stream_of(sess, id);

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
    struct h2_stream *st = sess->dead ? NULL : h2_stream_of(sess, stream_id);

    if (st == NULL || st->owner_reset)
        return;
    st->owner_reset = true;
    nghttp2_submit_rst_stream(sess->ng, NGHTTP2_FLAG_NONE, stream_id, code);
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

