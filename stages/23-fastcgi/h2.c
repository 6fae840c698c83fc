/* h2.c -- one HTTP/2 server session: nghttp2 driven by the reactor's
 * bytes, frames to the connection under its high-water mark, floods
 * bounded.
 *
 * nghttp2 keeps the protocol state. This file starts the session with
 * rsp's settings and options, feeds it what the client sent, writes what
 * it has to send, counts the frames floods are made of (one token bucket
 * per kind, h2.h) and reports every GOAWAY. The streams' requests are
 * h2_request.c's, their responses h2_response.c's. */
#define _GNU_SOURCE
#include "h2_private.h"

#include "reactor.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
void h2_count_flood(struct h2_session *sess, enum flood kind)
{
    if (!budget_spend(&sess->budgets[kind], floods[kind].burst, floods[kind].rate, reactor_now()))
        terminate(sess, NGHTTP2_ENHANCE_YOUR_CALM, floods[kind].reason);
}

/* The session's record of a stream, or NULL. */
struct h2_stream *h2_stream_of(const struct h2_session *sess, int32_t id)
{
    return nghttp2_session_get_stream_user_data(sess->ng, id);
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
    h2_drop_head(st);
    buffer_free(&st->out);
    free(st);
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
    struct h2_stream *st = frame->hd.stream_id != 0 ? h2_stream_of(sess, frame->hd.stream_id) : NULL;
    bool end = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;

    (void)ng;
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
        if (st != NULL && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
            h2_head_complete(sess, st, end);
        else if (end)
            h2_request_ended(sess, st);
        break;
    case NGHTTP2_DATA:
        if (frame->hd.length - frame->data.padlen == 0 && !end)
            h2_count_flood(sess, FLOOD_EMPTY_DATA);
        if (end)
            h2_request_ended(sess, st);
        break;
    case NGHTTP2_SETTINGS:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK))
            h2_count_flood(sess, FLOOD_SETTINGS);
        break;
    case NGHTTP2_PING:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK))
            h2_count_flood(sess, FLOOD_PING);
        else if (sess->shutting_down && memcmp(frame->ping.opaque_data, goaway_ping, 8) == 0)
            final_goaway(sess);
        break;
    case NGHTTP2_RST_STREAM:
        h2_count_flood(sess, FLOOD_RESET);
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
        h2_count_flood(user, FLOOD_PRIORITY);
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

/* Request body bytes (h2_request.c). */
static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user)
{
    (void)ng;
    (void)flags;
    h2_request_data(user, id, (const char *)data, len);
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
 * ("MadeYouReset"), follows an early answer with its RST_STREAM, and
 * reports GOAWAYs nghttp2 decided on. */
static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    struct h2_session *sess = user;
    struct h2_stream *st = frame->hd.stream_id != 0 ? h2_stream_of(sess, frame->hd.stream_id) : NULL;

    switch (frame->hd.type) {
    case NGHTTP2_RST_STREAM:
        if (st == NULL || !st->owner_reset)
            h2_count_flood(sess, FLOOD_RESET);
        if (st != NULL && !st->announced && !st->rejected) {
            st->rejected = true; /* by nghttp2's checks */
            if (sess->cb.on_rejected != NULL)
                sess->cb.on_rejected(sess->closure, st->id, 0,
                                     sess->error_text[0] != '\0' ? sess->error_text :
                                     nghttp2_http2_strerror(frame->rst_stream.error_code));
        }
        sess->error_text[0] = '\0';
        break;
    case NGHTTP2_HEADERS:
        if (st != NULL && st->reset_after_answer && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
            st->owner_reset = true; /* counted when answered */
            nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_NO_ERROR);
        }
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
    struct h2_stream *st = h2_stream_of(sess, id);

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
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, h2_on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback2(cbs, h2_on_header);
    nghttp2_session_callbacks_set_on_invalid_header_callback2(cbs, h2_on_invalid_header);
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

void h2_goaway(struct h2_session *sess, bool graceful)
{
    if (sess->dead || sess->reason != NULL)
        return; /* ending already */
    if (!graceful) { /* also after a graceful one, when its time is up */
        sess->shutting_down = true;
        terminate(sess, NGHTTP2_NO_ERROR, "shutting down");
        return;
    }
    if (sess->shutting_down)
        return;
    sess->shutting_down = true;
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

