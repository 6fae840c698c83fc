/* test_h2.c -- tests of the HTTP/2 session (src/h2.c, src/h2_validate.c)
 * on its own, built with AddressSanitizer and UndefinedBehaviorSanitizer
 * (`make -C fuzz test-h2`).
 *
 * Each test starts a session over one end of a socketpair, through a
 * plain struct connection, with an owner whose callbacks record what
 * they are told (and answer, as the test asks). The other end is the
 * client: either a real one, nghttp2's client session, for the round
 * trips, windows and shutdown; or frames made by hand (an HPACK encoder
 * of nghttp2's for the header blocks) for what no well-behaved client
 * sends: malformed requests and floods. What the server sends back is
 * read frame by frame, and each test asserts the stream error or GOAWAY
 * code that came, the callbacks that ran or did not (a malformed request
 * never reaches on_request), and, for the floods, the session's memory.
 * A failed assertion prints the test, the condition and what came, and
 * the program exits 1 after all tests ran. */
#include "h2.h"

#include "buffer.h"
#include "connection.h"
#include "reactor.h"

#include <errno.h>
#include <fcntl.h>
#include <nghttp2/nghttp2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"

static const char *current;
static int failures;

#define NV(n, v) { (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1, NGHTTP2_NV_FLAG_NONE }

#define MAX_STREAMS 2048

/* What the owner was told, and how it answers. */
struct owner {
    struct h2_session *sess;
    bool answer;               /* respond 200 once the request has ended */
    bool consume;              /* h2_consume every body byte at once */
    size_t response_size;      /* the body of each answer ("x" repeated) */
    int requests, ends, closed, drained, rejected, goaways;
    uint32_t close_code;
    uint32_t goaway_code;
    bool goaway_from_client;
    char goaway_reason[160];
    int rejected_status;
    char head[2048];           /* the last head, as text */
    size_t body;               /* request body bytes received */
    size_t sent[MAX_STREAMS];  /* response body bytes written, per stream */
};

/* One server session and the client's end of its socket. */
struct server {
    int fds[2];
    struct connection conn;
    struct owner own;
    nghttp2_hd_deflater *deflater;   /* for header blocks made by hand */
    nghttp2_hd_inflater *inflater;   /* for the server's HEADERS */
    struct buffer from_server;       /* read, not yet parsed */
    size_t peak_memory;
};

/* A frame the server sent. */
struct frame {
    uint8_t type, flags;
    int32_t stream;
    uint32_t code;                   /* RST_STREAM, GOAWAY */
    int32_t last;                    /* GOAWAY */
    int status;                      /* HEADERS */
    size_t length;
};

static struct frame frames[8192];
static size_t frame_count;

/* Writes the response body of a stream up to the high-water mark. */
static void write_more(struct owner *o, int32_t id)
{
    static const char chunk[4096] = { [0 ... 4095] = 'x' };

    while (o->sent[id % MAX_STREAMS] < o->response_size && h2_stream_queued(o->sess, id) < 64 * 1024) {
        size_t n = o->response_size - o->sent[id % MAX_STREAMS];
        if (n > sizeof chunk)
            n = sizeof chunk;
        if (h2_write_body(o->sess, id, chunk, n) != 0)
            return;
        o->sent[id % MAX_STREAMS] += n;
    }
    if (o->sent[id % MAX_STREAMS] == o->response_size)
        h2_end_body(o->sess, id);
}

/* The request has ended: answers it, if the test asks. */
static void answer(struct owner *o, int32_t id)
{
    struct h2_header h[] = {
        { { "Content-Type", 12 }, { "text/plain", 10 } },
        { { "Connection", 10 }, { "keep-alive", 10 } },
        { { "Transfer-Encoding", 17 }, { "chunked", 7 } },
        { { "X-Backend", 9 }, { "one", 3 } },
    };

    if (!o->answer)
        return;
    if (h2_respond(o->sess, id, 200, h, 4, o->response_size > 0) == 0 && o->response_size > 0)
        write_more(o, id);
}

static void on_request(void *closure, int32_t id, const struct h2_request_head *head)
{
    struct owner *o = closure;
    int n;

    o->requests++;
    n = snprintf(o->head, sizeof o->head, "%.*s %.*s %.*s %.*s", (int)head->method.length,
                 head->method.data, (int)head->scheme.length, head->scheme.data,
                 (int)head->authority.length, head->authority.data, (int)head->path.length,
                 head->path.data);
    for (size_t i = 0; i < head->header_count && n > 0 && (size_t)n < sizeof o->head; i++)
        n += snprintf(o->head + n, sizeof o->head - (size_t)n, " | %.*s: %.*s",
                      (int)head->headers[i].name.length, head->headers[i].name.data,
                      (int)head->headers[i].value.length, head->headers[i].value.data);
    if (head->has_content_length && n > 0 && (size_t)n < sizeof o->head)
        snprintf(o->head + n, sizeof o->head - (size_t)n, " | length %llu",
                 (unsigned long long)head->content_length);
    if (head->end_stream) {
        o->ends++;
        answer(o, id);
    }
}

static void on_data(void *closure, int32_t id, const char *data, size_t len, bool end)
{
    struct owner *o = closure;

    (void)data;
    o->body += len;
    if (o->consume && len > 0)
        h2_consume(o->sess, id, len);
    if (end) {
        o->ends++;
        answer(o, id);
    }
}

static void on_stream_closed(void *closure, int32_t id, uint32_t code)
{
    struct owner *o = closure;

    (void)id;
    o->closed++;
    o->close_code = code;
}

static void on_drained(void *closure, int32_t id)
{
    struct owner *o = closure;

    o->drained++;
    write_more(o, id);
}

static void on_goaway(void *closure, bool from_client, uint32_t code, const char *reason)
{
    struct owner *o = closure;

    o->goaways++;
    o->goaway_from_client = from_client;
    o->goaway_code = code;
    snprintf(o->goaway_reason, sizeof o->goaway_reason, "%s", reason);
}

static void on_rejected(void *closure, int32_t id, int status, const char *reason)
{
    struct owner *o = closure;

    (void)id;
    (void)reason;
    o->rejected++;
    o->rejected_status = status;
}

static const struct h2_callbacks callbacks = {
    on_request, on_data, on_stream_closed, on_drained, on_goaway, on_rejected,
};

static void no_events(struct epoll_event_handler *h, uint32_t events)
{
    (void)h;
    (void)events;
}

/* Starts a session with settings s (the defaults if NULL). */
static struct server *server_new(const struct h2_settings *s)
{
    struct server *srv = calloc(1, sizeof *srv);
    struct h2_settings defaults;

    if (srv == NULL || socketpair(AF_UNIX, SOCK_STREAM, 0, srv->fds) == -1) {
        perror("test_h2: socketpair");
        exit(2);
    }
    fcntl(srv->fds[0], F_SETFL, O_NONBLOCK);
    fcntl(srv->fds[1], F_SETFL, O_NONBLOCK);
    connection_init(&srv->conn, srv->fds[0], false, no_events, srv);
    h2_settings_default(&defaults);
    srv->own.answer = true;
    srv->own.consume = true;
    srv->own.response_size = 5;
    srv->own.sess = h2_session_new(&srv->conn, s != NULL ? s : &defaults, &callbacks, &srv->own);
    if (srv->own.sess == NULL || nghttp2_hd_deflate_new(&srv->deflater, 4096) != 0 ||
        nghttp2_hd_inflate_new(&srv->inflater) != 0) {
        fprintf(stderr, "test_h2: out of memory\n");
        exit(2);
    }
    h2_session_flush(srv->own.sess);
    return srv;
}

static void server_free(struct server *srv)
{
    h2_session_free(srv->own.sess);
    connection_close(&srv->conn);
    close(srv->fds[1]);
    nghttp2_hd_deflate_del(srv->deflater);
    nghttp2_hd_inflate_del(srv->inflater);
    buffer_free(&srv->from_server);
    free(srv);
}

/* Notes the session's memory, for the bounds the floods assert. */
static void note_memory(struct server *srv)
{
    size_t m = h2_session_memory(srv->own.sess);

    if (m > srv->peak_memory)
        srv->peak_memory = m;
}

/* Reads what the server sent into from_server, letting the connection
 * flush its queue and the session add more, until nothing more comes.
 * Returns the bytes read. */
static size_t read_server(struct server *srv)
{
    char buf[65536];
    size_t total = 0;

    for (;;) {
        ssize_t n = read(srv->fds[1], buf, sizeof buf);
        if (n > 0) {
            buffer_append(&srv->from_server, buf, (size_t)n);
            total += (size_t)n;
        }
        connection_flush(&srv->conn);
        h2_session_flush(srv->own.sess);
        note_memory(srv);
        if (n <= 0 && connection_queued(&srv->conn) == 0 &&
            (n == 0 || errno == EAGAIN)) {
            n = read(srv->fds[1], buf, sizeof buf);
            if (n <= 0)
                return total;
            buffer_append(&srv->from_server, buf, (size_t)n);
            total += (size_t)n;
        }
    }
}

/* Decodes a HEADERS block for its :status. */
static int status_of(struct server *srv, const uint8_t *block, size_t len)
{
    int status = 0;

    for (;;) {
        nghttp2_nv nv;
        int flags = 0;
        ssize_t n = nghttp2_hd_inflate_hd2(srv->inflater, &nv, &flags, block, len, 1);
        if (n < 0)
            return -1;
        block += n;
        len -= (size_t)n;
        if (flags & NGHTTP2_HD_INFLATE_EMIT && nv.namelen == 7 && memcmp(nv.name, ":status", 7) == 0)
            status = atoi((const char *)nv.value);
        if (flags & NGHTTP2_HD_INFLATE_FINAL) {
            nghttp2_hd_inflate_end_headers(srv->inflater);
            return status;
        }
        if (n == 0 && len == 0)
            return status;
    }
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads the server's frames into frames[] (after those of earlier calls
 * of the same test). */
static void collect(struct server *srv)
{
    read_server(srv);
    while (buffer_length(&srv->from_server) >= 9) {
        const uint8_t *p = (const uint8_t *)buffer_bytes(&srv->from_server);
        size_t len = (size_t)p[0] << 16 | (size_t)p[1] << 8 | p[2];
        struct frame *f = &frames[frame_count < 8191 ? frame_count++ : 8191];
        if (buffer_length(&srv->from_server) < 9 + len)
            break;
        *f = (struct frame){ .type = p[3], .flags = p[4], .stream = (int32_t)(get32(p + 5) & 0x7fffffff),
                             .length = len };
        if (f->type == NGHTTP2_RST_STREAM && len == 4)
            f->code = get32(p + 9);
        if (f->type == NGHTTP2_GOAWAY && len >= 8) {
            f->last = (int32_t)(get32(p + 9) & 0x7fffffff);
            f->code = get32(p + 13);
        }
        if (f->type == NGHTTP2_HEADERS)
            f->status = status_of(srv, p + 9, len);
        buffer_consume(&srv->from_server, 9 + len);
    }
}

/* The first frame of this type (and stream, unless -1) the server sent,
 * or NULL. */
static const struct frame *find(uint8_t type, int32_t stream)
{
    for (size_t i = 0; i < frame_count; i++)
        if (frames[i].type == type && (stream == -1 || frames[i].stream == stream))
            return &frames[i];
    return NULL;
}

/* Appends a frame to b. */
static void put_frame(struct buffer *b, uint8_t type, uint8_t flags, int32_t stream,
                      const void *payload, size_t len)
{
    uint8_t h[9] = { (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len, type, flags,
                     (uint8_t)(stream >> 24), (uint8_t)(stream >> 16), (uint8_t)(stream >> 8),
                     (uint8_t)stream };

    buffer_append(b, (const char *)h, 9);
    if (len > 0)
        buffer_append(b, payload, len);
}

/* Appends a HEADERS frame (and CONTINUATIONs if the block is larger than
 * 16 KiB) with these fields. */
static void put_headers(struct server *srv, struct buffer *b, int32_t stream, const nghttp2_nv *nv,
                        size_t count, bool end_stream)
{
    size_t bound = nghttp2_hd_deflate_bound(srv->deflater, nv, count);
    uint8_t *block = malloc(bound);
    ssize_t len = nghttp2_hd_deflate_hd(srv->deflater, block, bound, nv, count);
    size_t at = 0;

    if (len < 0) {
        fprintf(stderr, "test_h2: HPACK: %s\n", nghttp2_strerror((int)len));
        exit(2);
    }
    do {
        size_t piece = (size_t)len - at > 16384 ? 16384 : (size_t)len - at;
        uint8_t flags = at + piece == (size_t)len ? NGHTTP2_FLAG_END_HEADERS : 0;
        if (at == 0 && end_stream)
            flags |= NGHTTP2_FLAG_END_STREAM;
        put_frame(b, at == 0 ? NGHTTP2_HEADERS : NGHTTP2_CONTINUATION, flags, stream, block + at, piece);
        at += piece;
    } while (at < (size_t)len);
    free(block);
}

/* Sends what b holds to the server, and collects its answer. Returns what
 * h2_session_receive returned. */
static int send_bytes(struct server *srv, struct buffer *b)
{
    int rc = h2_session_receive(srv->own.sess, buffer_bytes(b), buffer_length(b));

    buffer_free(b);
    note_memory(srv);
    collect(srv);
    return rc;
}

/* The client's preface and an empty SETTINGS, then the server's answer. */
static void preface(struct server *srv)
{
    struct buffer b = BUFFER_INIT;

    buffer_append(&b, NGHTTP2_CLIENT_MAGIC, NGHTTP2_CLIENT_MAGIC_LEN);
    put_frame(&b, NGHTTP2_SETTINGS, 0, 0, NULL, 0);
    frame_count = 0;
    send_bytes(srv, &b);
}

static const nghttp2_nv base[] = {
    NV(":method", "GET"), NV(":scheme", "https"), NV(":path", "/p"), NV(":authority", "example.com"),
};

/* Starts a test. */
static void begin(const char *name)
{
    current = name;
    frame_count = 0;
}

/* -- The real client (nghttp2's client session). -- */

struct client {
    nghttp2_session *ng;
    size_t body[MAX_STREAMS];
    int status[MAX_STREAMS];
    bool closed[MAX_STREAMS];
    uint32_t close_code[MAX_STREAMS];
    uint32_t goaway_code;
    int32_t goaway_last;
    int goaways;
    bool consume_slowly;       /* with no automatic WINDOW_UPDATE, consume on request */
};

static int client_on_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                          size_t len, void *user)
{
    struct client *cl = user;

    (void)ng;
    (void)flags;
    for (size_t i = 0; i < len; i++)
        if (data[i] != 'x')
            return NGHTTP2_ERR_CALLBACK_FAILURE;
    cl->body[id % MAX_STREAMS] += len;
    return 0;
}

static int client_on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name,
                            size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                            void *user)
{
    struct client *cl = user;

    (void)ng;
    (void)valuelen;
    (void)flags;
    if (namelen == 7 && memcmp(name, ":status", 7) == 0)
        cl->status[frame->hd.stream_id % MAX_STREAMS] = atoi((const char *)value);
    /* What must never reach a client over HTTP/2. */
    if ((namelen == 10 && memcmp(name, "connection", 10) == 0) ||
        (namelen == 17 && memcmp(name, "transfer-encoding", 17) == 0))
        cl->status[frame->hd.stream_id % MAX_STREAMS] = -1;
    return 0;
}

static int client_on_close(nghttp2_session *ng, int32_t id, uint32_t code, void *user)
{
    struct client *cl = user;

    (void)ng;
    cl->closed[id % MAX_STREAMS] = true;
    cl->close_code[id % MAX_STREAMS] = code;
    return 0;
}

static int client_on_frame(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    struct client *cl = user;

    (void)ng;
    if (frame->hd.type == NGHTTP2_GOAWAY) {
        cl->goaways++;
        cl->goaway_code = frame->goaway.error_code;
        cl->goaway_last = frame->goaway.last_stream_id;
    }
    return 0;
}

/* A client session; window, if not 0, is its SETTINGS_INITIAL_WINDOW_SIZE. */
static struct client *client_new(uint32_t window)
{
    struct client *cl = calloc(1, sizeof *cl);
    nghttp2_session_callbacks *cbs;
    nghttp2_settings_entry iv[] = { { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, window } };

    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, client_on_data);
    nghttp2_session_callbacks_set_on_header_callback(cbs, client_on_header);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, client_on_close);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, client_on_frame);
    nghttp2_session_client_new(&cl->ng, cbs, cl);
    nghttp2_session_callbacks_del(cbs);
    nghttp2_submit_settings(cl->ng, NGHTTP2_FLAG_NONE, iv, window != 0 ? 1 : 0);
    return cl;
}

static void client_free(struct client *cl)
{
    nghttp2_session_del(cl->ng);
    free(cl);
}

/* Moves bytes both ways until neither side has anything more to say. */
static void pump(struct server *srv, struct client *cl)
{
    for (int round = 0; round < 100000; round++) {
        bool moved = false;
        const uint8_t *p;
        ssize_t n;
        char buf[65536];

        while ((n = nghttp2_session_mem_send(cl->ng, &p)) > 0) {
            h2_session_receive(srv->own.sess, (const char *)p, (size_t)n);
            moved = true;
        }
        while ((n = read(srv->fds[1], buf, sizeof buf)) > 0) {
            nghttp2_session_mem_recv(cl->ng, (const uint8_t *)buf, (size_t)n);
            moved = true;
        }
        connection_flush(&srv->conn);
        h2_session_flush(srv->own.sess);
        note_memory(srv);
        if (!moved && connection_queued(&srv->conn) == 0 && !nghttp2_session_want_write(cl->ng))
            return;
    }
}

/* A request from the real client; body, if not NULL, its body. */
static int32_t client_request(struct client *cl, const char *method, const char *path,
                              nghttp2_data_provider *body)
{
    nghttp2_nv nv[] = {
        { (uint8_t *)":method", (uint8_t *)method, 7, strlen(method), NGHTTP2_NV_FLAG_NONE },
        NV(":scheme", "https"),
        { (uint8_t *)":path", (uint8_t *)path, 5, strlen(path), NGHTTP2_NV_FLAG_NONE },
        NV(":authority", "example.com"),
        NV("cookie", "a=1"),
        NV("user-agent", "test"),
        NV("cookie", "b=2"),
    };

    return nghttp2_submit_request(cl->ng, NULL, nv, sizeof nv / sizeof nv[0], body, NULL);
}

static size_t upload_left;

/* The body of an upload: upload_left bytes of 'u'. */
static ssize_t upload_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                           uint32_t *flags, nghttp2_data_source *source, void *user)
{
    size_t n = upload_left < length ? upload_left : length;

    (void)ng;
    (void)id;
    (void)source;
    (void)user;
    memset(buf, 'u', n);
    upload_left -= n;
    if (upload_left == 0)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* -- The tests. -- */

static void test_round_trip(void)
{
    struct server *srv;
    struct client *cl = client_new(0);
    int32_t get, post;
    nghttp2_data_provider body = { .read_callback = upload_read };

    begin("round trip: GET and POST with a real client");
    srv = server_new(NULL);
    srv->own.response_size = 100000;
    get = client_request(cl, "GET", "/index.html?q=1", NULL);
    upload_left = 300000;
    post = client_request(cl, "POST", "/upload", &body);
    pump(srv, cl);
    CHECK(srv->own.requests == 2, "requests %d", srv->own.requests);
    CHECK(strstr(srv->own.head, "POST https example.com /upload | user-agent: test | cookie: a=1; b=2") != NULL,
          "head '%s'", srv->own.head);
    CHECK(srv->own.body == 300000, "request body %zu", srv->own.body);
    CHECK(cl->status[get] == 200 && cl->status[post] == 200, "statuses %d %d (-1: a connection header came)",
          cl->status[get], cl->status[post]);
    CHECK(cl->body[get] == 100000 && cl->body[post] == 100000, "bodies %zu %zu", cl->body[get], cl->body[post]);
    CHECK(cl->closed[get] && cl->close_code[get] == 0, "stream closed %d code %u", cl->closed[get],
          cl->close_code[get]);
    CHECK(srv->own.closed == 2 && srv->own.close_code == 0, "owner told of %d closes, code %u",
          srv->own.closed, srv->own.close_code);
    CHECK(h2_session_streams(srv->own.sess) == 0, "streams left %zu", h2_session_streams(srv->own.sess));
    CHECK(srv->own.goaways == 0, "goaway: %s", srv->own.goaway_reason);
    client_free(cl);
    server_free(srv);
}

/* 16 MiB down through a client window of 1 KiB per stream, 16 streams:
 * byte-exact, and the session's memory stays bounded throughout. */
static void test_small_windows(void)
{
    struct server *srv;
    struct client *cl = client_new(1024);
    int32_t ids[16];

    begin("16 MiB down under 1 KiB windows");
    srv = server_new(NULL);
    srv->own.response_size = 1024 * 1024;
    for (int i = 0; i < 16; i++)
        ids[i] = client_request(cl, "GET", "/big", NULL);
    pump(srv, cl);
    for (int i = 0; i < 16; i++)
        CHECK(cl->body[ids[i]] == 1024 * 1024 && cl->closed[ids[i]] && cl->close_code[ids[i]] == 0,
              "stream %d: %zu bytes, closed %d", ids[i], cl->body[ids[i]], cl->closed[ids[i]]);
    CHECK(srv->own.drained > 16, "on_drained called %d times", srv->own.drained);
    CHECK(srv->peak_memory < 16 * 96 * 1024 + 256 * 1024, "peak memory %zu", srv->peak_memory);
    client_free(cl);
    server_free(srv);
}

/* Request body bytes the owner does not consume are not sent more of
 * than the stream's window; consuming lets the rest come. */
static void test_upload_backpressure(void)
{
    struct server *srv;
    struct client *cl = client_new(0);
    nghttp2_data_provider body = { .read_callback = upload_read };
    int32_t id;

    begin("upload: the window opens only as the owner consumes");
    srv = server_new(NULL);
    srv->own.consume = false;
    upload_left = 1024 * 1024;
    id = client_request(cl, "PUT", "/up", &body);
    pump(srv, cl);
    CHECK(srv->own.body <= 65535 && srv->own.body > 0, "received %zu unconsumed", srv->own.body);
    CHECK(srv->own.requests == 1 && srv->own.ends == 0, "requests %d ends %d", srv->own.requests, srv->own.ends);
    for (int i = 0; i < 1000 && srv->own.ends == 0; i++) {
        size_t before = srv->own.body;
        h2_consume(srv->own.sess, id, before);
        srv->own.consume = true;
        pump(srv, cl);
        srv->own.consume = false;
    }
    CHECK(srv->own.body == 1024 * 1024 && srv->own.ends == 1, "received %zu, ends %d", srv->own.body,
          srv->own.ends);
    CHECK(cl->status[id] == 200, "status %d", cl->status[id]);
    client_free(cl);
    server_free(srv);
}

/* A client that sets its window to 0: the response waits, and the
 * session says since when. */
static void test_stall(void)
{
    struct server *srv;
    struct client *cl = client_new(0);
    nghttp2_settings_entry iv[] = { { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 0 } };
    int32_t id, stalled = 0;

    begin("zero window: h2_session_stalled_since");
    srv = server_new(NULL);
    srv->own.response_size = 1000;
    nghttp2_submit_settings(cl->ng, NGHTTP2_FLAG_NONE, iv, 1);
    id = client_request(cl, "GET", "/", NULL);
    pump(srv, cl);
    CHECK(h2_session_stalled_since(srv->own.sess, &stalled) > 0 && stalled == id, "stalled %d", stalled);
    CHECK(cl->body[id] == 0, "body %zu", cl->body[id]);
    nghttp2_submit_window_update(cl->ng, NGHTTP2_FLAG_NONE, id, 65535);
    pump(srv, cl);
    CHECK(cl->body[id] == 1000 && h2_session_stalled_since(srv->own.sess, NULL) == 0, "body %zu",
          cl->body[id]);
    client_free(cl);
    server_free(srv);
}

/* SIGTERM: a GOAWAY notice, a PING, then the final GOAWAY naming the
 * stream in flight, which finishes. */
static void test_graceful_goaway(void)
{
    struct server *srv;
    struct client *cl = client_new(0);
    int32_t id;

    begin("graceful GOAWAY: the stream in flight finishes");
    srv = server_new(NULL);
    srv->own.answer = false;
    id = client_request(cl, "GET", "/slow", NULL);
    pump(srv, cl);
    CHECK(srv->own.requests == 1, "requests %d", srv->own.requests);
    h2_goaway(srv->own.sess, true);
    h2_session_flush(srv->own.sess);
    pump(srv, cl);
    CHECK(cl->goaways == 2 && cl->goaway_code == 0 && cl->goaway_last == id, "goaways %d code %u last %d",
          cl->goaways, cl->goaway_code, cl->goaway_last);
    CHECK(srv->own.goaways == 1 && srv->own.goaway_code == 0, "reported %d", srv->own.goaways);
    CHECK(!h2_session_done(srv->own.sess), "done with a stream in flight");
    h2_respond(srv->own.sess, id, 204, NULL, 0, false);
    h2_session_flush(srv->own.sess);
    pump(srv, cl);
    CHECK(cl->status[id] == 204 && cl->closed[id], "status %d", cl->status[id]);
    CHECK(h2_session_done(srv->own.sess), "not done after the last stream");
    client_free(cl);
    server_free(srv);
}

/* A graceful GOAWAY whose time is up: the immediate one ends the session
 * with a stream still in flight. */
static void test_goaway_deadline(void)
{
    struct server *srv;
    struct client *cl = client_new(0);

    begin("graceful GOAWAY, then at once");
    srv = server_new(NULL);
    srv->own.answer = false;
    client_request(cl, "GET", "/slow", NULL);
    pump(srv, cl);
    h2_goaway(srv->own.sess, true);
    h2_session_flush(srv->own.sess);
    pump(srv, cl);
    CHECK(!h2_session_done(srv->own.sess), "done with a stream in flight");
    h2_goaway(srv->own.sess, false);
    h2_session_flush(srv->own.sess);
    pump(srv, cl);
    CHECK(h2_session_done(srv->own.sess), "not done after the immediate GOAWAY");
    CHECK(srv->own.goaways == 2 && srv->own.goaway_code == 0 && cl->goaways == 3, "reported %d, client saw %d",
          srv->own.goaways, cl->goaways);
    client_free(cl);
    server_free(srv);
}

/* The owner resets a stream (its backend failed). */
static void test_owner_reset(void)
{
    struct server *srv;
    struct client *cl = client_new(0);
    int32_t id;

    begin("h2_reset_stream");
    srv = server_new(NULL);
    srv->own.answer = false;
    id = client_request(cl, "GET", "/", NULL);
    pump(srv, cl);
    h2_reset_stream(srv->own.sess, id, NGHTTP2_INTERNAL_ERROR);
    h2_session_flush(srv->own.sess);
    pump(srv, cl);
    CHECK(cl->closed[id] && cl->close_code[id] == NGHTTP2_INTERNAL_ERROR, "client close code %u",
          cl->close_code[id]);
    CHECK(srv->own.closed == 1 && srv->own.close_code == NGHTTP2_INTERNAL_ERROR, "owner: %d %u",
          srv->own.closed, srv->own.close_code);
    client_free(cl);
    server_free(srv);
}

/* The owner's calls: an interim 103 then the answer; what is refused. */
static void test_owner_calls(void)
{
    struct server *srv;
    struct client *cl = client_new(0);
    struct h2_header link = { { "Link", 4 }, { "</s.css>; rel=preload", 21 } };
    int32_t id;

    begin("the owner's calls: 103, then 200 with a body; misuse refused");
    srv = server_new(NULL);
    srv->own.answer = false;
    id = client_request(cl, "GET", "/", NULL);
    pump(srv, cl);
    CHECK(h2_respond(srv->own.sess, id, 101, NULL, 0, false) == -1, "101 accepted");
    CHECK(h2_respond(srv->own.sess, id + 2, 200, NULL, 0, false) == -1, "a stream never opened accepted");
    CHECK(h2_write_body(srv->own.sess, id, "x", 1) == -1, "a body before the head accepted");
    CHECK(h2_respond(srv->own.sess, id, 103, &link, 1, false) == 0, "103 refused");
    CHECK(h2_respond(srv->own.sess, id, 200, &link, 1, true) == 0, "200 refused");
    CHECK(h2_respond(srv->own.sess, id, 200, NULL, 0, true) == -1, "a second answer accepted");
    CHECK(h2_write_body(srv->own.sess, id, "xxx", 3) == 0 && h2_stream_queued(srv->own.sess, id) == 3,
          "queued %zu", h2_stream_queued(srv->own.sess, id));
    CHECK(h2_end_body(srv->own.sess, id) == 0 && h2_write_body(srv->own.sess, id, "x", 1) == -1,
          "a body after its end accepted");
    h2_session_flush(srv->own.sess);
    pump(srv, cl);
    CHECK(cl->status[id] == 200 && cl->body[id] == 3 && cl->closed[id], "status %d body %zu", cl->status[id],
          cl->body[id]);
    CHECK(h2_write_body(srv->own.sess, id, "x", 1) == -1 && h2_stream_queued(srv->own.sess, id) == 0,
          "a closed stream accepted bytes");
    client_free(cl);
    server_free(srv);
}

/* One malformed header section, or a request that must pass. */
struct head_case {
    const char *what;
    nghttp2_nv nv[10];
    size_t count;
    bool valid;
};

#define BASE NV(":method", "GET"), NV(":scheme", "https"), NV(":path", "/p"), NV(":authority", "example.com")

static const struct head_case head_cases[] = {
    { "an upper-case name", { BASE, NV("X-Up", "1") }, 5, false },
    { "connection", { BASE, NV("connection", "close") }, 5, false },
    { "keep-alive", { BASE, NV("keep-alive", "5") }, 5, false },
    { "proxy-connection", { BASE, NV("proxy-connection", "close") }, 5, false },
    { "transfer-encoding", { BASE, NV("transfer-encoding", "chunked") }, 5, false },
    { "upgrade", { BASE, NV("upgrade", "websocket") }, 5, false },
    { "te: gzip", { BASE, NV("te", "gzip") }, 5, false },
    { "CR in a value", { BASE, NV("x-a", "1\r\nx-b: 2") }, 5, false },
    { "LF in a value", { BASE, NV("x-a", "1\nx") }, 5, false },
    { "NUL in a value", { BASE, NV("x-a", "1\0x") }, 5, false },
    { "a control byte in a value", { BASE, NV("x-a", "1\x01x") }, 5, false },
    { "DEL in a value", { BASE, NV("x-a", "1\x7fx") }, 5, false },
    { "a leading blank", { BASE, NV("x-a", " 1") }, 5, false },
    { "a trailing tab", { BASE, NV("x-a", "1\t") }, 5, false },
    { "a space in a name", { BASE, NV("x a", "1") }, 5, false },
    { "a colon in a name", { BASE, NV("x:a", "1") }, 5, false },
    { "an empty name", { BASE, NV("", "1") }, 5, false },
    { "CR in :path", { NV(":method", "GET"), NV(":scheme", "https"), NV(":path", "/a\r\nb"), NV(":authority", "e") }, 4, false },
    { "a space in :path", { NV(":method", "GET"), NV(":scheme", "https"), NV(":path", "/a b"), NV(":authority", "e") }, 4, false },
    { "no :method", { NV(":scheme", "https"), NV(":path", "/"), NV(":authority", "e") }, 3, false },
    { "no :scheme", { NV(":method", "GET"), NV(":path", "/"), NV(":authority", "e") }, 3, false },
    { "no :path", { NV(":method", "GET"), NV(":scheme", "https"), NV(":authority", "e") }, 3, false },
    { "empty :path", { NV(":method", "GET"), NV(":scheme", "https"), NV(":path", ""), NV(":authority", "e") }, 4, false },
    { ":path without /", { NV(":method", "GET"), NV(":scheme", "https"), NV(":path", "p"), NV(":authority", "e") }, 4, false },
    { ":path * for GET", { NV(":method", "GET"), NV(":scheme", "https"), NV(":path", "*"), NV(":authority", "e") }, 4, false },
    { "absolute :path", { NV(":method", "GET"), NV(":scheme", "https"), NV(":path", "http://e/"), NV(":authority", "e") }, 4, false },
    { "a repeated :path", { BASE, NV(":path", "/q") }, 5, false },
    { "a repeated :method", { NV(":method", "GET"), BASE }, 5, false },
    { "a pseudo-header after a regular field", { NV(":method", "GET"), NV(":scheme", "https"), NV("x-a", "1"), NV(":path", "/"), NV(":authority", "e") }, 5, false },
    { "an unknown pseudo-header", { BASE, NV(":foo", "1") }, 5, false },
    { ":protocol without the setting", { BASE, NV(":protocol", "websocket") }, 5, false },
    { "a response pseudo-header", { BASE, NV(":status", "200") }, 5, false },
    { ":authority and host disagree", { BASE, NV("host", "other.com") }, 5, false },
    { "no :authority and no host", { NV(":method", "GET"), NV(":scheme", "https"), NV(":path", "/") }, 3, false },
    { "two host fields", { NV(":method", "GET"), NV(":scheme", "https"), NV(":path", "/"), NV("host", "a"), NV("host", "b") }, 5, false },
    { "userinfo in :authority", { NV(":method", "GET"), NV(":scheme", "https"), NV(":path", "/"), NV(":authority", "u@e") }, 4, false },
    { "content-length not a number", { BASE, NV("content-length", "1x") }, 5, false },
    { "a negative content-length", { BASE, NV("content-length", "-1") }, 5, false },
    { "two content-lengths", { BASE, NV("content-length", "1"), NV("content-length", "2") }, 6, false },
    { "a bad :scheme", { NV(":method", "GET"), NV(":scheme", "ht tp"), NV(":path", "/"), NV(":authority", "e") }, 4, false },
    { "a bad :method", { NV(":method", "G T"), NV(":scheme", "https"), NV(":path", "/"), NV(":authority", "e") }, 4, false },
    { "content-length with END_STREAM", { BASE, NV("content-length", "5") }, 5, false },
    /* and what must pass */
    { "te: trailers", { BASE, NV("te", "trailers") }, 5, true },
    { "OPTIONS *", { NV(":method", "OPTIONS"), NV(":scheme", "https"), NV(":path", "*"), NV(":authority", "e") }, 4, true },
    { "host alone", { NV(":method", "GET"), NV(":scheme", "https"), NV(":path", "/"), NV("host", "e.com") }, 4, true },
    { "host agreeing, in another case", { BASE, NV("host", "Example.COM") }, 5, true },
    { "content-length 0 with END_STREAM", { BASE, NV("content-length", "0") }, 5, true },
    { "an underscore and a high byte", { BASE, NV("x_a", "caf\xc3\xa9") }, 5, true },
};

/* Each malformed head is a stream error the owner never hears of; each
 * valid one reaches on_request. The connection goes on either way. */
static void test_malformed_heads(void)
{
    for (size_t i = 0; i < sizeof head_cases / sizeof head_cases[0]; i++) {
        const struct head_case *c = &head_cases[i];
        struct server *srv = server_new(NULL);
        struct buffer b = BUFFER_INIT;
        const struct frame *rst, *goaway, *headers;

        begin(c->what);
        preface(srv);
        put_headers(srv, &b, 1, c->nv, c->count, true);
        send_bytes(srv, &b);
        rst = find(NGHTTP2_RST_STREAM, 1);
        goaway = find(NGHTTP2_GOAWAY, -1);
        headers = find(NGHTTP2_HEADERS, 1);
        if (c->valid) {
            CHECK(srv->own.requests == 1 && rst == NULL && headers != NULL && headers->status == 200,
                  "requests %d, rst %u", srv->own.requests, rst != NULL ? rst->code : 0);
        } else {
            CHECK(srv->own.requests == 0, "reached on_request: %s", srv->own.head);
            CHECK(rst != NULL && rst->code == NGHTTP2_PROTOCOL_ERROR, "RST_STREAM %s, code %u",
                  rst != NULL ? "sent" : "not sent", rst != NULL ? rst->code : 0);
            CHECK(srv->own.rejected == 1 && srv->own.rejected_status == 0, "on_rejected %d", srv->own.rejected);
        }
        CHECK(goaway == NULL, "GOAWAY code %u", goaway != NULL ? goaway->code : 0);
        server_free(srv);
    }
}

/* DATA against content-length: more, or less at END_STREAM, is a stream
 * error; the extra bytes never reach the owner, nor does the end. */
static void test_content_length(void)
{
    static const nghttp2_nv nv[] = { NV(":method", "POST"), NV(":scheme", "https"), NV(":path", "/"),
                                     NV(":authority", "e"), NV("content-length", "5") };
    static const struct {
        const char *what;
        const char *data;
        size_t len;
        bool valid;
    } cases[] = {
        { "DATA beyond content-length", "0123456789", 10, false },
        { "DATA short of content-length at END_STREAM", "012", 3, false },
        { "DATA as long as content-length", "01234", 5, true },
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct server *srv = server_new(NULL);
        struct buffer b = BUFFER_INIT;
        const struct frame *rst;

        begin(cases[i].what);
        preface(srv);
        put_headers(srv, &b, 1, nv, 5, false);
        put_frame(&b, NGHTTP2_DATA, NGHTTP2_FLAG_END_STREAM, 1, cases[i].data, cases[i].len);
        send_bytes(srv, &b);
        rst = find(NGHTTP2_RST_STREAM, 1);
        CHECK(srv->own.requests == 1 && strstr(srv->own.head, "length 5") != NULL, "head %s", srv->own.head);
        if (cases[i].valid) {
            CHECK(rst == NULL && srv->own.body == 5 && srv->own.ends == 1, "body %zu ends %d", srv->own.body,
                  srv->own.ends);
        } else {
            CHECK(rst != NULL && rst->code == NGHTTP2_PROTOCOL_ERROR, "RST_STREAM code %u",
                  rst != NULL ? rst->code : 0);
            CHECK(srv->own.ends == 0 && srv->own.body <= 5, "the owner got %zu bytes and %d ends",
                  srv->own.body, srv->own.ends);
            CHECK(srv->own.closed == 1 && srv->own.close_code == NGHTTP2_PROTOCOL_ERROR, "closed %d code %u",
                  srv->own.closed, srv->own.close_code);
        }
        server_free(srv);
    }
}

/* Trailer fields end the request and are dropped; a malformed one resets
 * the stream after the owner had the request. */
static void test_trailers(void)
{
    static const nghttp2_nv post[] = { NV(":method", "POST"), NV(":scheme", "https"), NV(":path", "/"),
                                       NV(":authority", "e") };
    static const nghttp2_nv good[] = { NV("x-checksum", "1") };
    static const nghttp2_nv bad[] = { NV("connection", "close") };

    for (int malformed = 0; malformed < 2; malformed++) {
        struct server *srv = server_new(NULL);
        struct buffer b = BUFFER_INIT;
        const struct frame *rst;

        begin(malformed ? "a malformed trailer field" : "trailer fields");
        preface(srv);
        put_headers(srv, &b, 1, post, 4, false);
        put_frame(&b, NGHTTP2_DATA, 0, 1, "abc", 3);
        put_headers(srv, &b, 1, malformed ? bad : good, 1, true);
        send_bytes(srv, &b);
        rst = find(NGHTTP2_RST_STREAM, 1);
        CHECK(srv->own.requests == 1 && srv->own.body == 3, "requests %d body %zu", srv->own.requests,
              srv->own.body);
        if (malformed) {
            CHECK(rst != NULL && rst->code == NGHTTP2_PROTOCOL_ERROR && srv->own.ends == 0, "RST_STREAM code %u",
                  rst != NULL ? rst->code : 0);
            CHECK(srv->own.closed == 1 && srv->own.close_code == NGHTTP2_PROTOCOL_ERROR, "closed %d code %u",
                  srv->own.closed, srv->own.close_code);
        } else {
            CHECK(rst == NULL && srv->own.ends == 1, "ends %d", srv->own.ends);
            CHECK(find(NGHTTP2_HEADERS, 1) != NULL && find(NGHTTP2_HEADERS, 1)->status == 200, "no answer");
        }
        server_free(srv);
    }
}

/* Requests the session answers itself: CONNECT (405), a head too large
 * or with too many fields (431). */
static void test_answered(void)
{
    static const nghttp2_nv connect[] = { NV(":method", "CONNECT"), NV(":authority", "e:443") };
    static char big[40000];
    nghttp2_nv large[] = { BASE, { (uint8_t *)"x-big", (uint8_t *)big, 5, sizeof big - 1, NGHTTP2_NV_FLAG_NONE } };
    nghttp2_nv many[110];
    static char names[110][8];
    struct {
        const char *what;
        const nghttp2_nv *nv;
        size_t count;
        int status;
    } cases[] = {
        { "CONNECT: 405", connect, 2, 405 },
        { "a 40 KB field: 431", large, 5, 431 },
        { "101 fields: 431", many, 105, 431 },
        { "100 fields pass", many, 104, 200 },
    };

    memset(big, 'b', sizeof big - 1);
    memcpy(many, base, sizeof base);
    for (int i = 0; i < 106; i++) {
        snprintf(names[i], sizeof names[i], "x-%d", i);
        many[4 + i] = (nghttp2_nv){ (uint8_t *)names[i], (uint8_t *)"v", strlen(names[i]), 1, NGHTTP2_NV_FLAG_NONE };
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct server *srv = server_new(NULL);
        struct buffer b = BUFFER_INIT;
        const struct frame *headers, *rst;

        begin(cases[i].what);
        preface(srv);
        put_headers(srv, &b, 1, cases[i].nv, cases[i].count, false);
        send_bytes(srv, &b);
        headers = find(NGHTTP2_HEADERS, 1);
        rst = find(NGHTTP2_RST_STREAM, 1);
        if (cases[i].status == 200) {
            CHECK(srv->own.requests == 1 && rst == NULL, "requests %d", srv->own.requests);
        } else {
            CHECK(headers != NULL && headers->status == cases[i].status, "status %d, RST_STREAM code %u",
                  headers != NULL ? headers->status : 0, rst != NULL ? rst->code : 0);
            CHECK(srv->own.requests == 0, "reached on_request");
            CHECK(headers != NULL && (headers->flags & NGHTTP2_FLAG_END_STREAM), "the answer does not end the stream");
            CHECK(rst != NULL && rst->code == NGHTTP2_NO_ERROR && rst > headers, "no RST_STREAM NO_ERROR after the answer");
            CHECK(srv->own.rejected == 1 && srv->own.rejected_status == cases[i].status, "on_rejected %d %d",
                  srv->own.rejected, srv->own.rejected_status);
        }
        CHECK(find(NGHTTP2_GOAWAY, -1) == NULL, "GOAWAY");
        server_free(srv);
    }
}

/* Sends count copies of one frame (after a preface) and expects a GOAWAY
 * ENHANCE_YOUR_CALM, the owner told why, the session done and its memory
 * bounded. make_frame appends the i-th copy. */
static void expect_flood(const char *what, int count,
                         void (*make_frame)(struct server *, struct buffer *, int), uint32_t code)
{
    struct server *srv = server_new(NULL);
    struct buffer b = BUFFER_INIT;
    const struct frame *goaway;

    begin(what);
    preface(srv);
    for (int i = 0; i < count; i++) {
        make_frame(srv, &b, i);
        if (buffer_length(&b) > 16384 && send_bytes(srv, &b) == -1)
            break;
    }
    send_bytes(srv, &b);
    goaway = find(NGHTTP2_GOAWAY, -1);
    CHECK(goaway != NULL && goaway->code == code, "GOAWAY %s, code %u", goaway != NULL ? "sent" : "not sent",
          goaway != NULL ? goaway->code : 0);
    CHECK(srv->own.goaways == 1 && !srv->own.goaway_from_client && srv->own.goaway_code == code,
          "on_goaway %d code %u", srv->own.goaways, srv->own.goaway_code);
    CHECK(h2_session_done(srv->own.sess), "the session goes on");
    CHECK(srv->peak_memory < 1024 * 1024, "peak memory %zu", srv->peak_memory);
    fprintf(stderr, "  %s: GOAWAY after %zu frames back, %d requests, reason \"%s\", peak memory %zu\n", what,
            frame_count, srv->own.requests, srv->own.goaway_reason, srv->peak_memory);
    server_free(srv);
}

static void rapid_reset(struct server *srv, struct buffer *b, int i)
{
    static const uint8_t cancel[4] = { 0, 0, 0, NGHTTP2_CANCEL };

    put_headers(srv, b, 2 * i + 1, base, 4, true);
    put_frame(b, NGHTTP2_RST_STREAM, 0, 2 * i + 1, cancel, 4);
}

static void made_you_reset(struct server *srv, struct buffer *b, int i)
{
    static const nghttp2_nv bad[] = { BASE, NV("connection", "close") };

    put_headers(srv, b, 2 * i + 1, bad, 5, true);
}

static void made_you_reset_window(struct server *srv, struct buffer *b, int i)
{
    static const uint8_t huge[4] = { 0x7f, 0xff, 0xff, 0xff };

    /* a WINDOW_UPDATE overflowing the stream's window: a stream error
     * (FLOW_CONTROL_ERROR), after the owner got the request */
    srv->own.answer = false;
    put_headers(srv, b, 2 * i + 1, base, 4, true);
    put_frame(b, NGHTTP2_WINDOW_UPDATE, 0, 2 * i + 1, huge, 4);
}

static void settings_flood(struct server *srv, struct buffer *b, int i)
{
    static const uint8_t push_off[6] = { 0, NGHTTP2_SETTINGS_ENABLE_PUSH, 0, 0, 0, 0 };

    (void)srv;
    (void)i;
    put_frame(b, NGHTTP2_SETTINGS, 0, 0, push_off, 6);
}

static void ping_flood(struct server *srv, struct buffer *b, int i)
{
    uint8_t opaque[8] = { (uint8_t)i };

    (void)srv;
    put_frame(b, NGHTTP2_PING, 0, 0, opaque, 8);
}

static void priority_flood(struct server *srv, struct buffer *b, int i)
{
    static const uint8_t priority[5] = { 0, 0, 0, 0, 15 };

    (void)srv;
    put_frame(b, NGHTTP2_PRIORITY, 0, 2 * i + 1, priority, 5);
}

static void empty_data_flood(struct server *srv, struct buffer *b, int i)
{
    static const nghttp2_nv post[] = { NV(":method", "POST"), NV(":scheme", "https"), NV(":path", "/"),
                                       NV(":authority", "e") };

    srv->own.answer = false;
    if (i == 0)
        put_headers(srv, b, 1, post, 4, false);
    put_frame(b, NGHTTP2_DATA, 0, 1, NULL, 0);
}

static void continuation_flood(struct server *srv, struct buffer *b, int i)
{
    static const uint8_t one[1] = { 0x82 }; /* :method GET, indexed */

    (void)srv;
    put_frame(b, i == 0 ? NGHTTP2_HEADERS : NGHTTP2_CONTINUATION, 0, 1, one, 1);
}

/* More streams than SETTINGS_MAX_CONCURRENT_STREAMS: before the client
 * acknowledged the setting, the extra one is refused (REFUSED_STREAM: it
 * may retry); after, it is a connection error (RFC 9113, 5.1.2). */
static void test_concurrent_streams(void)
{
    for (int acked = 0; acked < 2; acked++) {
        struct server *srv = server_new(NULL);
        struct buffer b = BUFFER_INIT;
        const struct frame *rst, *goaway;

        begin(acked ? "stream 129 after the SETTINGS ACK: GOAWAY" : "stream 129 before the SETTINGS ACK: refused");
        srv->own.answer = false;
        preface(srv);
        if (acked)
            put_frame(&b, NGHTTP2_SETTINGS, NGHTTP2_FLAG_ACK, 0, NULL, 0);
        for (int i = 0; i < 129; i++)
            put_headers(srv, &b, 2 * i + 1, base, 4, true);
        send_bytes(srv, &b);
        rst = find(NGHTTP2_RST_STREAM, -1);
        goaway = find(NGHTTP2_GOAWAY, -1);
        CHECK(srv->own.requests == 128, "requests %d", srv->own.requests);
        if (acked)
            CHECK(goaway != NULL && goaway->code == NGHTTP2_PROTOCOL_ERROR && goaway->last == 255,
                  "GOAWAY code %u last %d", goaway != NULL ? goaway->code : 0, goaway != NULL ? goaway->last : 0);
        else
            CHECK(rst != NULL && rst->stream == 257 && rst->code == NGHTTP2_REFUSED_STREAM && goaway == NULL,
                  "RST_STREAM %d code %u", rst != NULL ? rst->stream : 0, rst != NULL ? rst->code : 0);
        CHECK(h2_session_streams(srv->own.sess) == 128, "streams %zu", h2_session_streams(srv->own.sess));
        server_free(srv);
    }
}

/* An HPACK table size update above SETTINGS_HEADER_TABLE_SIZE: a
 * connection error (COMPRESSION_ERROR). */
static void test_hpack_table_size(void)
{
    struct server *srv = server_new(NULL);
    struct buffer b = BUFFER_INIT;
    /* a dynamic table size update to 8192 (0x3f 0xe1 0x3f), then :method GET */
    static const uint8_t block[] = { 0x3f, 0xe1, 0x3f, 0x82, 0x87, 0x84 };
    const struct frame *goaway;

    begin("HPACK: a table larger than SETTINGS_HEADER_TABLE_SIZE");
    preface(srv);
    put_frame(&b, NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | NGHTTP2_FLAG_END_STREAM, 1, block, sizeof block);
    send_bytes(srv, &b);
    goaway = find(NGHTTP2_GOAWAY, -1);
    CHECK(goaway != NULL && goaway->code == NGHTTP2_COMPRESSION_ERROR, "GOAWAY code %u",
          goaway != NULL ? goaway->code : 0);
    CHECK(srv->own.requests == 0 && srv->own.goaways == 1, "requests %d goaways %d", srv->own.requests,
          srv->own.goaways);
    server_free(srv);
}

/* What an idle session holds, after the prefaces and one request. */
static void test_idle_memory(void)
{
    struct server *srv;
    struct client *cl = client_new(0);

    begin("an idle session's memory");
    srv = server_new(NULL);
    client_request(cl, "GET", "/", NULL);
    pump(srv, cl);
    CHECK(srv->own.requests == 1 && h2_session_streams(srv->own.sess) == 0, "requests %d", srv->own.requests);
    CHECK(h2_session_memory(srv->own.sess) < 48 * 1024, "memory %zu", h2_session_memory(srv->own.sess));
    fprintf(stderr, "  an idle session holds %zu bytes (peak %zu while serving one request)\n",
            h2_session_memory(srv->own.sess), srv->peak_memory);
    client_free(cl);
    server_free(srv);
}

/* Not HTTP/2 at all: the session dies at once, the owner is told. */
static void test_bad_preface(void)
{
    struct server *srv = server_new(NULL);

    begin("a client that does not speak HTTP/2");
    CHECK(h2_session_receive(srv->own.sess, "GET / HTTP/1.1\r\nHost: e\r\n\r\n", 27) == -1, "accepted");
    CHECK(h2_session_done(srv->own.sess) && srv->own.goaways == 1, "done %d goaways %d",
          h2_session_done(srv->own.sess), srv->own.goaways);
    server_free(srv);
}

int main(void)
{
    if (reactor_init() == -1)
        return 2;
    test_round_trip();
    test_small_windows();
    test_upload_backpressure();
    test_stall();
    test_graceful_goaway();
    test_goaway_deadline();
    test_owner_reset();
    test_owner_calls();
    test_malformed_heads();
    test_content_length();
    test_trailers();
    test_answered();
    test_concurrent_streams();
    test_hpack_table_size();
    test_bad_preface();
    test_idle_memory();
    expect_flood("rapid reset: HEADERS then RST_STREAM", 1000, rapid_reset, NGHTTP2_ENHANCE_YOUR_CALM);
    expect_flood("MadeYouReset: malformed HEADERS", 1000, made_you_reset, NGHTTP2_ENHANCE_YOUR_CALM);
    expect_flood("MadeYouReset: WINDOW_UPDATE overflowing a stream's window", 1000, made_you_reset_window,
                 NGHTTP2_ENHANCE_YOUR_CALM);
    expect_flood("SETTINGS flood", 1000, settings_flood, NGHTTP2_ENHANCE_YOUR_CALM);
    expect_flood("PING flood", 1000, ping_flood, NGHTTP2_ENHANCE_YOUR_CALM);
    expect_flood("PRIORITY flood", 1000, priority_flood, NGHTTP2_ENHANCE_YOUR_CALM);
    expect_flood("empty DATA flood", 1000, empty_data_flood, NGHTTP2_ENHANCE_YOUR_CALM);
    expect_flood("CONTINUATION without END_HEADERS", 1000, continuation_flood, NGHTTP2_ENHANCE_YOUR_CALM);
    reactor_close();
    if (failures > 0) {
        fprintf(stderr, "test_h2: %d checks failed\n", failures);
        return 1;
    }
    fprintf(stderr, "test_h2: all checks passed\n");
    return 0;
}
