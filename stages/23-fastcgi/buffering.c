/* buffering.c -- a slow client costs the backend nothing (chapter 17):
 * request bodies read whole before a backend is chosen, responses read as
 * fast as the backend sends them; what does not fit in memory waits in an
 * unlinked temporary file. See buffering.h. */
#define _GNU_SOURCE /* O_TMPFILE, mkostemp */
#include "buffering.h"

#include "backend_protocol.h"
#include "log.h"
#include "stats.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Bytes moved from a temporary file in one go: a file is never read into
 * memory whole, only this much at a time, as the other side drains. */
#define BUFFERING_PIECE (64 * 1024)

/* Seconds a body has before body_min_rate applies (at most; body_timeout
 * if shorter): a client's first packets may be slow to come (a TLS
 * handshake, a phone waking its radio). */
#define BUFFERING_RATE_GRACE 5.0

/* A request body read whole before a backend is chosen. */
struct body_buffer {
    struct buffer memory;    /* its first bytes, up to request_buffer_size */
    int fd;                  /* the rest, in a temporary file; -1: none */
    uint64_t length;         /* bytes of the body held (memory, then file) */
    uint64_t received;       /* bytes read from the client for it, framing included */
    uint64_t sent;           /* of the body, queued for the backend */
    double started;          /* reactor_now() when reading it began */
    bool finish;             /* the response is over: once all is sent, close */
};

/* What of a response waits for a slow client beyond its queue. */
struct response_spool {
    int fd;                  /* the temporary file; -1: not open */
    uint64_t written;        /* bytes in the file */
    uint64_t read;           /* of them, handed to the client's queue */
    struct buffer tail;      /* bytes the file could not take (full, failed): after it */
    bool failed;             /* writing the file failed: it takes no more */
};

/* One piece on its way from a file to a socket; one relay at a time. */
static char piece[BUFFERING_PIECE];

/* Logs a problem with temporary files at most once a minute: a full
 * disk must not fill the log too. */
static void log_file_problem(const char *what, int error)
{
    static double last;
    double now = reactor_now();

    if (last != 0 && now - last < 60)
        return;
    last = now;
    errno = error;
    log_errno("temporary file in temp_dir: %s", what);
}

/* Opens a new temporary file in dir, unlinked from the start: nothing is
 * left on disk when it is closed, or when rsp dies (O_TMPFILE). Where the
 * file system cannot, a file with a unique name unlinked at once (left
 * behind only if rsp dies between the two calls). Returns the fd or -1. */
static int temp_open(const char *dir)
{
    char path[PATH_MAX];
    int fd = open(dir, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);

    if (fd == -1 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
        if (snprintf(path, sizeof path, "%s/rsp-XXXXXX", dir) >= (int)sizeof path) {
            errno = ENAMETOOLONG;
            return -1;
        }
        fd = mkostemp(path, O_CLOEXEC);
        if (fd != -1 && unlink(path) == -1) {
            int error = errno;
            close(fd);
            errno = error;
            return -1;
        }
    }
    if (fd != -1)
        stats_gauge_own(&stats_row()->temp_files, 1);
    return fd;
}

static void temp_close(int *fd)
{
    if (*fd == -1)
        return;
    close(*fd); /* nothing to lose: the file was never meant to stay */
    *fd = -1;
    stats_gauge_own(&stats_row()->temp_files, -1);
}

/* Writes len bytes at offset. Returns how many were written; fewer than
 * len with errno set when the file failed (ENOSPC, EFBIG, EIO, ...). */
static size_t temp_write(int fd, uint64_t offset, const char *data, size_t len)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n = pwrite(fd, data + done, len - done, (off_t)(offset + done));
        if (n == -1 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = ENOSPC;
            break;
        }
        done += (size_t)n;
    }
    return done;
}

/* Reads exactly len bytes at offset into piece. Returns 0, or -1. */
static int temp_read(int fd, uint64_t offset, size_t len)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n = pread(fd, piece + done, len - done, (off_t)(offset + done));
        if (n == -1 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO; /* shorter than we wrote it */
            return -1;
        }
        done += (size_t)n;
    }
    return 0;
}

/* ---- The request body. ---- */

/* The request is refused while its body is read: its memory and file go
 * now (before the answer), not when the client leaves. */
static void drop_body(struct relay *relay)
{
    struct body_buffer *b = relay->x->body_buffer;

    buffer_free(&b->memory);
    temp_close(&b->fd);
}

/* Adds body bytes to the buffer: memory first, then the file. Returns 0,
 * or -1 after answering the client (413 past max_body_size, 500 if the
 * bytes cannot be kept). */
static int keep_body(struct relay *relay, const char *data, size_t len)
{
    const struct buffering *cfg = &relay->config->buffering;
    struct body_buffer *b = relay->x->body_buffer;

    if (relay->x->max_body > 0 && b->length + len > relay->x->max_body) {
        stats_count_refused(relay->x->site, REFUSED_BODY_SIZE);
        drop_body(relay);
        exchange_fail_request(relay, 413); /* a chunked body grew too large */
        return -1;
    }
    if (b->fd == -1 && buffer_length(&b->memory) + len <= cfg->request_size) {
        if (buffer_append(&b->memory, data, len) == -1) {
            log_msg("out of memory buffering a request body");
            drop_body(relay);
            exchange_fail_request(relay, 500);
            return -1;
        }
    } else {
        uint64_t offset = b->length - buffer_length(&b->memory);
        if (b->fd == -1 && (b->fd = temp_open(cfg->temp_dir)) == -1) {
            log_file_problem("cannot open one for a request body; answered 500", errno);
            drop_body(relay);
            exchange_fail_request(relay, 500);
            return -1;
        }
        if (temp_write(b->fd, offset, data, len) < len) {
            log_file_problem("cannot write a request body to it; answered 500", errno);
            drop_body(relay);
            exchange_fail_request(relay, 500);
            return -1;
        }
        stats_add_own(&stats_row()->spooled_in, len);
    }
    b->length += len;
    return 0;
}

/* A piece of chunk data of a chunked body, without its framing (body.h's
 * on_data): the backend gets the data alone, with a Content-Length. */
static void chunk_data(void *context, const char *data, size_t len)
{
    struct relay *relay = context;

    if (relay->x->phase == PHASE_BUFFER)
        keep_body(relay, data, len);
}

/* The whole body is in: the request goes to a backend, with the body's
 * length as its Content-Length. */
static void body_complete(struct relay *relay)
{
    struct exchange *x = relay->x;

    x->request_complete = true;
    x->info.buffered = true;
    x->info.buffered_length = x->body_buffer->length;
    stats_add_own(&stats_row()->bodies_buffered, 1);
    exchange_connect(relay, 502);
}

void buffering_client_data(struct relay *relay, const char *data, size_t len)
{
    struct exchange *x = relay->x;
    ssize_t n;

    x->last_body_read = reactor_now();
    x->body_buffer->received += len;
    n = body_frame(&x->info.body, data, len);
    if (n == -1) {
        drop_body(relay);
        exchange_fail_request(relay, 400); /* invalid chunked framing */
        return;
    }
    /* A chunked body came through chunk_data (maybe answered already). */
    if (x->phase != PHASE_BUFFER || (!x->info.body.chunked && keep_body(relay, data, (size_t)n) == -1))
        return;
    if (!x->info.body.done)
        return;
    /* What follows the body is the client's next request: it waits after
     * this one's head, which is still needed. */
    if ((size_t)n < len && buffer_append(&relay->head, data + n, len - (size_t)n) == -1) {
        relay->client_ops->fail(relay);
        return;
    }
    body_complete(relay);
}

/* True if the client waits for "100 Continue" before sending its body. */
static bool expects_continue(const struct relay *relay)
{
    struct request_view rq = relay_request_view(relay);

    if (rq.minor_version == 0)
        return false;
    for (size_t i = request_find_header(&rq, "expect", 0); i < rq.header_count;
         i = request_find_header(&rq, "expect", i + 1))
        if (rq.headers[i].value.length == 12 &&
            strncasecmp(rq.buf + rq.headers[i].value.offset, "100-continue", 12) == 0)
            return true;
    return false;
}

void buffering_begin(struct relay *relay)
{
    struct exchange *x = relay->x;
    const struct buffering *cfg = &relay->config->buffering;
    size_t head_length = x->request->head_length, extra;

    /* A chunked body goes to a backend whose protocol does not pass it
     * through as its bytes alone: read whole first, whatever the config. */
    bool chunks_pass = !x->info.body.chunked || x->pool->protocol->passes_through;

    if ((!cfg->request && chunks_pass) || x->info.body.done || x->upgrade) {
        exchange_connect(relay, 502);
        return;
    }
    x->body_buffer = calloc(1, sizeof *x->body_buffer);
    if (x->body_buffer == NULL) {
        log_msg("out of memory buffering a request body");
        exchange_fail_request(relay, 500);
        return;
    }
    x->body_buffer->fd = -1;
    x->body_buffer->started = x->last_body_read = reactor_now();
    x->phase = PHASE_BUFFER;
    if (x->info.body.chunked) {
        x->info.body.on_data = chunk_data;
        x->info.body.context = relay;
    }
    extra = buffer_length(&relay->head) - head_length;
    /* The client asked whether to send its body: we read it now, we say
     * so (the backend is not asked: it gets the body whole, and no
     * Expect, request.c). Not if the body is on its way already. */
    if (extra == 0 && expects_continue(relay))
        relay->client_ops->proceed(relay);
    if (extra > 0) {
        /* Body bytes that came with the head: into the buffer, and out of
         * the head's, which keeps the head alone (and, once the body is
         * complete, the next request after it). */
        char *copy = malloc(extra);
        if (copy == NULL) {
            log_msg("out of memory buffering a request body");
            exchange_fail_request(relay, 500);
            return;
        }
        memcpy(copy, relay_bytes(relay) + head_length, extra);
        relay->head.end -= extra; /* the buffer keeps its first head_length bytes */
        buffering_client_data(relay, copy, extra);
        free(copy);
    }
}

void buffering_send_body(struct relay *relay)
{
    struct exchange *x = relay->x;

    if (x->body_buffer == NULL)
        return;
    x->body_buffer->sent = 0;
    x->request_sent = 0; /* when the last byte is queued (feed_backend) */
    buffering_settle(relay);
}

bool buffering_finish_after_body(struct relay *relay)
{
    struct body_buffer *b = relay->x->body_buffer;

    if (b == NULL || b->sent == b->length)
        return false;
    b->finish = true;
    return true;
}

/* Queues the next pieces of a buffered body for the backend, as long as
 * its queue is under the high-water mark. */
static void feed_backend(struct relay *relay)
{
    struct exchange *x = relay->x;
    struct body_buffer *b = x->body_buffer;
    struct connection *c = relay_backend(relay);
    size_t in_memory;

    if (b == NULL || x->phase == PHASE_BUFFER || c == NULL || c->connecting)
        return;
    in_memory = buffer_length(&b->memory);
    while (b->sent < b->length && !c->write_done && connection_queued(c) < RELAY_HIGH_WATER) {
        size_t len;
        if (b->sent < in_memory) {
            len = in_memory - (size_t)b->sent;
            len = len < BUFFERING_PIECE ? len : BUFFERING_PIECE;
            if (exchange_write_body(relay, buffer_bytes(&b->memory) + b->sent, len) == -1)
                return;
        } else {
            uint64_t left = b->length - b->sent;
            len = left < BUFFERING_PIECE ? (size_t)left : BUFFERING_PIECE;
            if (temp_read(b->fd, b->sent - in_memory, len) == -1) {
                log_file_problem("cannot read a request body back; answered 502", errno);
                exchange_fail_request(relay, 502);
                return;
            }
            if (exchange_write_body(relay, piece, len) == -1)
                return;
        }
        b->sent += len;
    }
    if (b->sent == b->length && x->request_sent == 0) {
        if (exchange_write_body_end(relay) == -1)
            return;
        x->request_sent = reactor_now();
    }
    /* Sent, or the backend stopped taking it: it closes (upstream.h). */
    if (b->finish && (b->sent == b->length || c->write_done)) {
        upstream_finish(x->upstream, relay->config->timeouts.body);
        x->upstream = NULL;
    }
}

double buffering_rate_deadline(const struct relay *relay)
{
    const struct body_buffer *b = relay->x->body_buffer;
    double rate = relay->config->buffering.body_min_rate, grace, due;

    if (b == NULL || rate <= 0 || relay->x->phase != PHASE_BUFFER)
        return HUGE_VAL;
    grace = relay->config->timeouts.body < BUFFERING_RATE_GRACE ? relay->config->timeouts.body
                                                                 : BUFFERING_RATE_GRACE;
    /* The moment what came would be under the rate, averaged from the
     * start; it moves later with every byte. */
    due = b->started + (double)b->received / rate;
    return due > b->started + grace ? due : b->started + grace;
}

/* ---- The response. ---- */

/* True if the response head has header `name` whose value begins with
 * `value` (ignoring case). */
static bool response_has(const struct relay *relay, const char *name, const char *value)
{
    const struct http_request *res = relay->x->response;
    const char *buf = buffer_bytes(&relay->x->response_head);
    size_t n = strlen(value);

    for (size_t i = 0; i < res->header_count; i++) {
        const struct http_header *h = &res->headers[i];
        if (http_span_is(buf, h->name, name) && h->value.length >= n &&
            strncasecmp(buf + h->value.offset, value, n) == 0)
            return true;
    }
    return false;
}

void buffering_response_start(struct relay *relay, bool upgrading)
{
    struct exchange *x = relay->x;

    x->response_buffered = relay->config->buffering.response && !upgrading &&
                           x->framing != FRAMING_NONE && !response_has(relay, "x-accel-buffering", "no") &&
                           !response_has(relay, "content-type", "text/event-stream");
}

/* True if bytes of the response wait in the spool (file or tail). */
static bool spool_pending(const struct response_spool *s)
{
    return s != NULL && (s->written > s->read || buffer_length(&s->tail) > 0);
}

bool buffering_response_pending(const struct relay *relay)
{
    return spool_pending(relay->x->response_spool);
}

bool buffering_busy(const struct relay *relay)
{
    const struct body_buffer *b = relay->x->body_buffer;

    return buffering_response_pending(relay) ||
           (b != NULL && b->finish && relay->x->upstream != NULL);
}

/* Writes what the file takes of data (up to max_temp_file_size); returns
 * how many bytes it took. On a failure the file takes nothing more in
 * this exchange: what follows waits in memory, with backpressure. */
static size_t spool_write(struct relay *relay, struct response_spool *s, const char *data, size_t len)
{
    uint64_t max = relay->config->buffering.max_temp_file;
    size_t n;

    if (s->failed || buffer_length(&s->tail) > 0 || s->written >= max)
        return 0;
    if (len > max - s->written)
        len = (size_t)(max - s->written);
    if (s->fd == -1 && (s->fd = temp_open(relay->config->buffering.temp_dir)) == -1) {
        s->failed = true;
        log_file_problem("cannot open one for a response; the backend waits for the client", errno);
        return 0;
    }
    n = temp_write(s->fd, s->written, data, len);
    if (n < len) {
        s->failed = true;
        log_file_problem("cannot write a response to it; the backend waits for the client", errno);
    }
    s->written += n;
    stats_add_own(&stats_row()->spooled_out, n);
    return n;
}

void buffering_to_client(struct relay *relay, const char *data, size_t len)
{
    struct exchange *x = relay->x;
    const struct connection *client = &relay->client;
    struct response_spool *s = x->response_spool;
    size_t n;

    if (!spool_pending(s) &&
        (client->write_done || relay->client_ops->queued(relay) + len <= relay->config->buffering.response_size)) {
        relay->client_ops->write(relay, data, len);
        return;
    }
    if (s == NULL) {
        s = x->response_spool = calloc(1, sizeof *s);
        if (s == NULL) {
            relay->client_ops->write(relay, data, len); /* in memory after all */
            return;
        }
        s->fd = -1;
        s->tail = (struct buffer)BUFFER_INIT;
    }
    n = spool_write(relay, s, data, len);
    if (n < len && buffer_append(&s->tail, data + n, len - n) == -1) {
        log_msg("out of memory keeping a response for %s; cut off", relay->client_address);
        relay->client_ops->fail(relay);
    }
}

/* True if the next read from the backend has somewhere to go now, without
 * making the client's queue grow past the high-water mark. */
static bool spool_accepting(const struct relay *relay)
{
    const struct exchange *x = relay->x;
    const struct response_spool *s = x->response_spool;
    const struct buffering *cfg = &relay->config->buffering;

    if (!x->response_buffered || (s != NULL && buffer_length(&s->tail) > 0))
        return false;
    if (!spool_pending(s) && relay->client_ops->queued(relay) + RELAY_READ_SIZE <= cfg->response_size)
        return true;
    return (s == NULL || !s->failed) && (s != NULL ? s->written : 0) + RELAY_READ_SIZE <= cfg->max_temp_file;
}

bool buffering_client_full(const struct relay *relay)
{
    if (spool_accepting(relay))
        return false;
    return relay->client_ops->queued(relay) > RELAY_HIGH_WATER || relay->client.piped > 0 ||
           buffering_response_pending(relay);
}

bool buffering_client_ready(const struct relay *relay)
{
    if (spool_accepting(relay))
        return true;
    return relay->client_ops->queued(relay) < RELAY_LOW_WATER && relay->client.piped == 0 &&
           !buffering_response_pending(relay);
}

bool buffering_may_splice(const struct relay *relay)
{
    if (!relay->x->response_buffered)
        return true;
    return relay->client.piped == 0 && relay->client_ops->queued(relay) == 0 &&
           !buffering_response_pending(relay);
}

/* Moves what waits in the spool to the client's queue as it drains: the
 * file's bytes a piece at a time, then the tail. Once all is out, the
 * client connection's end (if it closes) can follow. */
static void feed_client(struct relay *relay)
{
    struct exchange *x = relay->x;
    struct response_spool *s = x->response_spool;
    const struct connection *client = &relay->client;

    if (s == NULL)
        return;
    while (spool_pending(s) && !client->write_done && relay->client_ops->queued(relay) < RELAY_LOW_WATER) {
        if (s->written > s->read) {
            uint64_t left = s->written - s->read;
            size_t len = left < BUFFERING_PIECE ? (size_t)left : BUFFERING_PIECE;
            if (temp_read(s->fd, s->read, len) == -1) {
                log_file_problem("cannot read a response back; the client is cut off", errno);
                relay->client_ops->fail(relay);
                return;
            }
            relay->client_ops->write(relay, piece, len);
            s->read += len;
            if (s->read == s->written) {
                /* All out: the file starts over, and gives its blocks back. */
                s->read = s->written = 0;
                if (ftruncate(s->fd, 0) == -1)
                    log_file_problem("cannot truncate one", errno);
            }
        } else {
            relay->client_ops->write(relay, buffer_bytes(&s->tail), buffer_length(&s->tail));
            buffer_free(&s->tail);
        }
    }
    if (!spool_pending(s) && x->response_done && !x->keep_client)
        relay->client_ops->end(relay);
}

void buffering_settle(struct relay *relay)
{
    feed_backend(relay);
    feed_client(relay);
}

void buffering_free(struct relay *relay)
{
    struct exchange *x = relay->x;

    if (x->body_buffer != NULL) {
        buffer_free(&x->body_buffer->memory);
        temp_close(&x->body_buffer->fd);
        free(x->body_buffer);
        x->body_buffer = NULL;
    }
    if (x->response_spool != NULL) {
        buffer_free(&x->response_spool->tail);
        temp_close(&x->response_spool->fd);
        free(x->response_spool);
        x->response_spool = NULL;
    }
}
