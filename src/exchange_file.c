/* exchange_file.c -- a request to a pool of files (a pool with `root`)
 * answered from the disk: the file producer.
 *
 * The request's path is opened beneath the root's directory fd
 * (file_path.h): a directory without its slash is redirected, one with it
 * serves its index.html, and what must not be served (hidden names,
 * traversal, symlinks leading out, FIFOs) is a 404. The head carries the
 * file's validators (Last-Modified, a strong ETag of mtime and size), and
 * the conditionals (If-Match, If-None-Match, ...), one Range and a
 * precompressed sibling (x.br, x.zst, x.gz) chosen by Accept-Encoding
 * decide what is sent: 200, 206, 304, 412 or 416. rsp's own answers
 * (301, 403, 404, 405, 412, 416, 500) go the way every answer of rsp's
 * goes (exchange_answer_ourselves, exchange_fail_request).
 *
 * The body goes with bounded memory: on a plain HTTP/1 connection with
 * nothing queued and no filter, sendfile(2) moves it from the page cache
 * to the socket without rsp reading a byte (connection_sendfile);
 * otherwise (TLS, an HTTP/2 stream, a filter, splice = false) it is read
 * 16 KiB at a time with pread and passed through the body filters while
 * the client's queue is below its high-water mark, and resumed when the
 * client has taken it down (the producer's resume). The file is closed
 * when the exchange ends, however it ends (the producer's stop). */
#define _GNU_SOURCE
#include "exchange_private.h"

#include "accept_encoding.h"
#include "buffering.h"
#include "conditional.h"
#include "file_path.h"
#include "filter_compress.h"
#include "http_date.h"
#include "log.h"
#include "mime.h"
#include "reply.h"
#include "site_output.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What one pread takes of a file, and how many of them (or sendfile
 * calls) one turn of the producer makes before letting other connections
 * run. */
#define FILE_CHUNK (16 * 1024)
#define FILE_SENDFILE_MAX (1024 * 1024)
#define FILE_STEPS_PER_TURN 16

/* The body of a file response being sent (x->file). */
struct file_body {
    int fd;
    uint64_t offset;      /* the next byte to send */
    uint64_t remaining;   /* bytes of the announced length not sent yet */
    bool sendfile;        /* sendfile may be tried (no filter, plain HTTP/1, splice on) */
    char *path;           /* relative to root, for the log */
};

/* The representation chosen for the request: the file or a precompressed
 * sibling, with its validators. */
struct file_choice {
    struct file_found found;
    const char *encoding;          /* Content-Encoding, or NULL */
    char etag[ETAG_SIZE];
    size_t etag_length;
    char last_modified[HTTP_DATE_SIZE];
};

/* A request header's value (NULL and *length 0 if it has none). */
static const char *header_value(const struct request_view *view, const char *name, size_t *length)
{
    size_t i = request_find_header(view, name, 0);

    if (i == view->header_count) {
        *length = 0;
        return NULL;
    }
    *length = view->headers[i].value.length;
    return view->buf + view->headers[i].value.offset;
}

/* The request target as a path for file_open: the origin form as it is;
 * an absolute form's path and query (after scheme://authority), or "/". */
static const char *target_path(const struct request_view *view, size_t *length)
{
    const char *t = view->buf + view->target.offset;
    size_t n = view->target.length;
    const char *scheme_end = n > 0 && t[0] != '/' ? memmem(t, n, "://", 3) : NULL;

    if (scheme_end != NULL) {
        const char *authority = scheme_end + 3;
        size_t left = n - (size_t)(authority - t);
        const char *slash = memchr(authority, '/', left);

        if (slash == NULL) {
            *length = 1;
            return "/";
        }
        *length = left - (size_t)(slash - authority);
        return slash;
    }
    *length = n;
    return t;
}

const char *exchange_file_target(const struct request_view *view, size_t *length)
{
    return target_path(view, length);
}

/* Answers with a response of rsp's own that reply_append wrote into
 * answer (or 500 if writing it ran out of memory: rc -1). The connection
 * stays if the request was read whole and may. */
static void answer_own(struct relay *relay, struct buffer *answer, int rc)
{
    struct exchange *x = relay->x;

    if (rc == -1) {
        buffer_free(answer);
        log_msg("out of memory answering a request for a file");
        exchange_fail_request(relay, 500);
        return;
    }
    x->keep_client = x->request_complete && exchange_client_may_stay(relay);
    if (!x->request_complete)
        x->phase = PHASE_DRAIN;
    exchange_answer_ourselves(relay, buffer_bytes(answer), buffer_length(answer));
    buffer_free(answer);
}

/* 405 for a method other than GET and HEAD, with Allow. */
static void answer_405(struct relay *relay)
{
    static const char headers[] = "Content-Type: text/html; charset=utf-8\r\nAllow: GET, HEAD\r\n";
    struct buffer answer = BUFFER_INIT;
    char page[1024];
    struct reply r = { 405, headers, sizeof headers - 1, page, 0 };

    r.body_length = reply_page(page, sizeof page, 405, "Only GET and HEAD reach files.");
    answer_own(relay, &answer, reply_append(&answer, &r, relay->x->head_method, ""));
}

/* 301 to the directory's address with its slash (Location as file_open
 * made it: the path, '/', the query). */
static void answer_301(struct relay *relay, const char *location)
{
    struct buffer answer = BUFFER_INIT, headers = BUFFER_INIT;
    char page[1024];
    int rc = 0;

    rc |= buffer_append(&headers, "Location: ", 10);
    rc |= buffer_append(&headers, location, strlen(location));
    rc |= buffer_append(&headers, "\r\nContent-Type: text/html; charset=utf-8\r\n", 42);
    if (rc == 0) {
        struct reply r = { 301, buffer_bytes(&headers), buffer_length(&headers), page, 0 };
        r.body_length = reply_page(page, sizeof page, 301, NULL);
        rc = reply_append(&answer, &r, relay->x->head_method, "");
    }
    buffer_free(&headers);
    answer_own(relay, &answer, rc == 0 ? 0 : -1);
}

/* 416 for a Range that begins past the end: Content-Range names the size. */
static void answer_416(struct relay *relay, uint64_t size)
{
    char headers[128], page[1024];
    struct buffer answer = BUFFER_INIT;
    int n = snprintf(headers, sizeof headers,
                     "Content-Range: bytes */%" PRIu64 "\r\nContent-Type: text/html; charset=utf-8\r\n", size);
    struct reply r = { 416, headers, (size_t)n, page, 0 };

    r.body_length = reply_page(page, sizeof page, 416, NULL);
    answer_own(relay, &answer, reply_append(&answer, &r, relay->x->head_method, ""));
}

/* Tries the precompressed siblings the client accepts, best first (ties
 * br > zstd > gzip). Returns true with the one opened in c (the file's
 * own closed), false to send the file itself. */
static bool choose_variant(struct relay *relay, const struct request_view *view,
                           struct file_choice *c)
{
    unsigned allowed = ENCODING_ALL;

    for (;;) {
        enum encoding coding = filter_compress_accepted(view, allowed);
        struct file_found variant;

        if (coding == ENCODING_NONE)
            return false;
        allowed &= ~ENCODING_BIT(coding);
        int status = file_open_variant(relay->x->pool->root_fd, c->found.path,
                                       encoding_file_suffix(coding), &variant);
        if (status == 500)
            log_msg("file %s%s: %s", c->found.path, encoding_file_suffix(coding),
                    strerror(variant.error));
        if (status != 200)
            continue;
        file_found_release(&c->found);
        c->found = variant;
        c->encoding = encoding_name(coding);
        c->etag_length = etag_format(c->etag, c->found.st.st_mtime, (uint64_t)c->found.st.st_size,
                                     encoding_etag_suffix(coding));
        return true;
    }
}

/* The fields every answer about the representation carries (200, 206,
 * 304): ETag, Last-Modified, Vary. Returns 0 or -1 (out of memory). */
static int add_validators(struct response_head *head, const struct file_choice *c, bool vary)
{
    int rc = 0;

    rc |= response_head_add(head, "ETag", 4, c->etag, c->etag_length);
    if (c->last_modified[0] != '\0')
        rc |= response_head_add(head, "Last-Modified", 13, c->last_modified, strlen(c->last_modified));
    if (vary)
        rc |= response_head_add(head, "Vary", 4, "Accept-Encoding", 15);
    return rc == 0 ? 0 : -1;
}

/* Sends the file response's head; the request is done with (the
 * connection stays for the next one if it may). Returns 0, or -1 if out
 * of memory. */
static int send_head(struct relay *relay, struct response_head *head)
{
    struct exchange *x = relay->x;

    x->keep_client = x->request_complete && exchange_client_may_stay(relay);
    if (exchange_send_head(relay, head) == -1)
        return -1;
    x->phase = x->keep_client ? PHASE_SENT : PHASE_DRAIN;
    if (x->keep_client && x->request != NULL)
        exchange_consume_request(relay, x->request->head_length);
    return 0;
}

/* The file ended before the length announced (it shrank while being
 * sent): the client cannot get what the head promised, and is cut off. */
static void file_shrank(struct relay *relay)
{
    struct file_body *f = relay->x->file;

    log_msg("file %s shrank while being sent to %s; the response is cut off after %" PRIu64 " bytes",
            f->path, relay->client_address, f->offset);
    relay->x->phase = PHASE_DRAIN;
    relay->client_ops->fail(relay);
}

/* One sendfile of the rest. Returns 1 to go on, 0 to wait (the socket is
 * full, or the response is over or cut), -1 to copy instead. */
static int send_some(struct relay *relay, struct file_body *f)
{
    off_t offset = (off_t)f->offset;
    size_t len = f->remaining < FILE_SENDFILE_MAX ? (size_t)f->remaining : FILE_SENDFILE_MAX;
    ssize_t n = relay->client_ops->send_file(relay, f->fd, &offset, len);

    if (n > 0) {
        f->offset += (uint64_t)n;
        f->remaining -= (uint64_t)n;
        relay->x->body_bytes += (uint64_t)n;
        return 1;
    }
    if (n == 0) {
        file_shrank(relay);
        return 0;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
        relay->client.await_writable = true;
        return 0;
    }
    if (errno == ENOBUFS)
        return -1; /* bytes are queued, or this file cannot be sent so: copy */
    /* The client went away (EPIPE, ECONNRESET), or the file failed (EIO). */
    if (errno != EPIPE && errno != ECONNRESET)
        log_errno("sendfile of %s to %s", f->path, relay->client_address);
    relay->x->phase = PHASE_DRAIN;
    relay->client_ops->fail(relay);
    return 0;
}

/* One pread of the next chunk, through the filters. Returns 1 to go on,
 * 0 if the response was cut. */
static int copy_some(struct relay *relay, struct file_body *f)
{
    char chunk[FILE_CHUNK];
    size_t len = f->remaining < sizeof chunk ? (size_t)f->remaining : sizeof chunk;
    ssize_t n;

    do {
        n = pread(f->fd, chunk, len, (off_t)f->offset);
    } while (n == -1 && errno == EINTR);
    if (n == 0) {
        file_shrank(relay);
        return 0;
    }
    if (n == -1) {
        log_errno("reading %s for %s; the response is cut off", f->path, relay->client_address);
        relay->x->phase = PHASE_DRAIN;
        relay->client_ops->fail(relay);
        return 0;
    }
    f->offset += (uint64_t)n;
    f->remaining -= (uint64_t)n;
    body_filter_data(relay, relay->x->filters, chunk, (size_t)n);
    return 1;
}

static void file_stop(struct relay *relay);

/* Sends what the client takes of the body now: a few steps, each a
 * sendfile or a pread, while the client keeps up; at the end, the
 * response is finished. */
static void file_pump(struct relay *relay)
{
    struct exchange *x = relay->x;
    struct file_body *f = x->file;

    relay->client.await_writable = false;
    for (int i = 0; f->remaining > 0; i++) {
        int rc = 1;

        if (relay->client.write_done)
            return; /* the client is gone: the exchange ends with the relay */
        if (i == FILE_STEPS_PER_TURN) {
            /* Others' turn: come back when the socket takes more (at once). */
            relay->client.await_writable = true;
            return;
        }
        if (f->sendfile && x->filters == NULL && relay->client_ops->queued(relay) == 0)
            rc = send_some(relay, f);
        else if (buffering_client_full(relay))
            return; /* resumed when the client has taken its queue down */
        else
            rc = copy_some(relay, f);
        if (rc == -1)
            f->sendfile = false;
        else if (rc == 0)
            return;
    }
    file_stop(relay); /* every byte is queued: the file is done with */
    exchange_response_finished(relay);
}

/* The producer's resume: the client's queue went down. */
static void file_resume(struct relay *relay)
{
    if (relay->x->file != NULL && !relay->x->response_done)
        file_pump(relay);
}

/* The producer's stop: the exchange ends (or fails); the file is closed. */
static void file_stop(struct relay *relay)
{
    struct file_body *f = relay->x->file;

    relay->client.await_writable = false;
    if (f == NULL)
        return;
    if (close(f->fd) == -1)
        log_errno("close %s", f->path);
    free(f->path);
    free(f);
    relay->x->file = NULL;
}

static const struct producer_ops file_producer = { .resume = file_resume, .stop = file_stop };

/* Builds the head of a 200 or 206 (first..last of the representation)
 * or a HEAD's 200. Returns 0 or -1 (out of memory). */
static int build_head(struct response_head *head, const struct file_choice *c, const char *content_type,
                      bool vary, bool ranged, uint64_t first, uint64_t last, bool head_only)
{
    uint64_t size = (uint64_t)c->found.st.st_size, length = ranged ? last - first + 1 : size;
    char number[64];
    int rc = 0;

    response_head_init(head, ranged ? 206 : 200);
    rc |= response_head_add(head, "Content-Type", 12, content_type, strlen(content_type));
    snprintf(number, sizeof number, "%" PRIu64, length);
    rc |= response_head_add(head, "Content-Length", 14, number, strlen(number));
    if (ranged) {
        int n = snprintf(number, sizeof number, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, first, last, size);
        rc |= response_head_add(head, "Content-Range", 13, number, (size_t)n);
    }
    if (c->encoding != NULL)
        rc |= response_head_add(head, "Content-Encoding", 16, c->encoding, strlen(c->encoding));
    else
        rc |= response_head_add(head, "Accept-Ranges", 13, "bytes", 5);
    rc |= add_validators(head, c, vary);
    head->body = head_only || length == 0 ? RESPONSE_BODY_NONE : RESPONSE_BODY_LENGTH;
    head->length = length;
    return rc == 0 ? 0 : -1;
}

/* Sends the 200 or 206 and starts its body (c's file is taken over).
 * Returns 0, or -1 if out of memory (nothing sent; c untouched). */
static int start_body(struct relay *relay, struct file_choice *c, struct response_head *head, uint64_t first)
{
    struct exchange *x = relay->x;
    struct file_body *f = NULL;

    if (head->body != RESPONSE_BODY_NONE) {
        f = malloc(sizeof *f);
        if (f == NULL)
            return -1;
        *f = (struct file_body){ .fd = c->found.fd, .offset = first, .remaining = head->length,
                                 .path = c->found.path };
    }
    /* A body larger than a chunk goes by sendfile where it can; a smaller
     * one is read, and leaves with the head in one write (hold). */
    bool sendfile = f != NULL && relay->config->scaling.splice && relay->client_ops->send_file != NULL &&
                    head->length > FILE_CHUNK;
    bool hold = !sendfile && relay->client_ops->hold != NULL;

    if (hold)
        relay->client_ops->hold(relay, true);
    if (send_head(relay, head) == -1) {
        if (hold)
            relay->client_ops->hold(relay, false);
        free(f);
        return -1;
    }
    if (f == NULL) {
        exchange_response_finished(relay);
    } else {
        c->found.fd = -1;
        c->found.path = NULL;
        f->sendfile = sendfile;
        x->file = f;
        x->producer = &file_producer;
        file_pump(relay);
    }
    if (hold)
        relay->client_ops->hold(relay, false);
    return 0;
}

/* Answers for the chosen representation: 304 or 412 by the conditionals,
 * else 416, 206 or 200 by the Range. */
static void respond(struct relay *relay, const struct request_view *view, struct file_choice *c,
                    const char *content_type, bool vary, bool range_allowed)
{
    struct exchange *x = relay->x;
    struct conditional_headers ch;
    struct response_head head;
    uint64_t size = (uint64_t)c->found.st.st_size, first = 0, last = 0;
    enum range_outcome range = RANGE_IGNORE;
    size_t range_length, if_range_length;
    const char *range_value = header_value(view, "range", &range_length);
    const char *if_range = header_value(view, "if-range", &if_range_length);

    ch.if_match = header_value(view, "if-match", &ch.if_match_length);
    ch.if_none_match = header_value(view, "if-none-match", &ch.if_none_match_length);
    ch.if_modified_since = header_value(view, "if-modified-since", &ch.if_modified_since_length);
    ch.if_unmodified_since = header_value(view, "if-unmodified-since", &ch.if_unmodified_since_length);
    switch (conditional_evaluate(&ch, true, c->etag, c->etag_length, c->found.st.st_mtime)) {
    case CONDITIONAL_PRECONDITION_FAILED:
        exchange_fail_request(relay, 412);
        return;
    case CONDITIONAL_NOT_MODIFIED:
        response_head_init(&head, 304);
        if (add_validators(&head, c, vary) == 0 && send_head(relay, &head) == 0) {
            exchange_response_finished(relay);
        } else {
            log_msg("out of memory answering a request for a file");
            exchange_fail_request(relay, 500);
        }
        response_head_free(&head);
        return;
    case CONDITIONAL_PROCEED:
        break;
    }
    if (range_allowed && range_value != NULL &&
        if_range_holds(if_range, if_range_length, c->etag, c->etag_length, c->found.st.st_mtime))
        range = range_parse(range_value, range_length, size, &first, &last);
    if (range == RANGE_UNSATISFIABLE) {
        answer_416(relay, size);
        return;
    }
    if (build_head(&head, c, content_type, vary, range == RANGE_ONE, first, last, x->head_method) == -1 ||
        start_body(relay, c, &head, first) == -1) {
        log_msg("out of memory answering a request for a file");
        exchange_fail_request(relay, 500);
    }
    response_head_free(&head);
}

void exchange_serve_file(struct relay *relay)
{
    struct exchange *x = relay->x;
    struct request_view view = relay_request_view(relay);
    struct file_choice c = { .encoding = NULL };
    size_t length;
    const char *target = target_path(&view, &length);
    bool get = request_method_is(&view, "GET"), vary;
    int status;

    if (!get && !x->head_method) {
        answer_405(relay);
        return;
    }
    status = file_open(x->pool->root_fd, target, length, &c.found);
    if (status == 500)
        log_msg("file %.*s: %s", (int)length, target, strerror(c.found.error));
    if (status == 301)
        answer_301(relay, c.found.location);
    else if (status != 200)
        exchange_fail_request(relay, status);
    if (status != 200) {
        file_found_release(&c.found);
        return;
    }
    /* Variants of a representation the client may get compressed: Vary,
     * whether one is chosen or not (a cache must ask again with another
     * Accept-Encoding). No variant for a Range: its bytes are the file's. */
    const char *type = mime_type_of(relay->config->mime, c.found.path, strlen(c.found.path));
    size_t range_length;
    bool ranged = get && header_value(&view, "range", &range_length) != NULL;

    const struct compress_settings *compress =
        &site_output_for(relay->config, x->output_site, x->pool)->compress;
    vary = media_type_compressible(type, strlen(type), NULL, 0) ||
           (compress->on && media_type_compressible(type, strlen(type), compress->types, compress->type_count));
    if (ranged || !choose_variant(relay, &view, &c))
        c.etag_length = etag_format(c.etag, c.found.st.st_mtime, (uint64_t)c.found.st.st_size, "");
    else
        vary = true;
    if (http_date_format(c.found.st.st_mtime, c.last_modified) == -1)
        c.last_modified[0] = '\0';
    respond(relay, &view, &c, type, vary, get);
    file_found_release(&c.found);
}
