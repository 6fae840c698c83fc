/* fuzz_h2.c -- libFuzzer harness for the HTTP/2 session (h2.c,
 * h2_validate.c, with nghttp2 under it), driven over a real socket
 * through a plain connection as rsp drives a client connection.
 *
 * For each input: a session is started on one end of a socketpair; the
 * harness sends the client preface, then the input as frames, in pieces
 * whose size the first byte gives (0: at once); after each piece what
 * the session wrote is read and dropped, as a client that reads would.
 * The owner's callbacks answer every request with a small body (at once
 * when the first byte's bit 7 is set, else once the request ended),
 * consume every body byte, and reset every third request themselves.
 * At the end a graceful GOAWAY, a last flush, and the session is freed.
 * Besides "no crash, no sanitizer report, no leak" (LeakSanitizer runs
 * after each input), it checks:
 *
 *  - every head on_request gets is one an HTTP/1.1 head can be written
 *    from without smuggling: a token method, a path starting with '/'
 *    (or "*" for OPTIONS), an authority without blanks or '@', names of
 *    lower-case tchars, values without NUL, CR, LF or other control
 *    bytes, none of connection, keep-alive, proxy-connection,
 *    transfer-encoding, upgrade, te, host, content-length among the
 *    fields, and no two requests on one stream id;
 *  - the owner's view of each stream holds: on_data only between
 *    on_request and on_stream_closed, nothing after its end, and never
 *    more body bytes than a content-length said;
 *  - h2_session_streams equals the streams told of and not closed;
 *  - the session's memory stays under 4 MiB.
 *
 * Build and run: see fuzz/README.md. */
#include "connection.h"
#include "h2.h"
#include "reactor.h"

#include <fcntl.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PROPERTY(cond)                                                      \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "fuzz_h2: property violated: %s\n", #cond);     \
            abort();                                                        \
        }                                                                   \
    } while (0)

#define MAX_TRACKED 512

/* What the owner knows of a stream. */
struct tracked {
    int32_t id;
    bool open;                 /* told of, not closed */
    bool ended;                /* the request's end came */
    bool has_length;
    uint64_t length, body;
};

struct owner {
    struct h2_session *sess;
    bool answer_at_once;
    struct tracked streams[MAX_TRACKED];
    size_t count;
    size_t open;
    unsigned requests;
};

/* The owner's record of stream id, or NULL. */
static struct tracked *tracked(struct owner *o, int32_t id)
{
    for (size_t i = 0; i < o->count; i++)
        if (o->streams[i].id == id)
            return &o->streams[i];
    return NULL;
}

/* True if the text is made of lower-case tchars. */
static bool lower_token(struct h2_str s)
{
    if (s.length == 0)
        return false;
    for (size_t i = 0; i < s.length; i++) {
        unsigned char c = (unsigned char)s.data[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || strchr("!#$%&'*+-.^_`|~", c) != NULL) ||
            c == '\0')
            return false;
    }
    return true;
}

static bool is(struct h2_str s, const char *text)
{
    return s.length == strlen(text) && memcmp(s.data, text, s.length) == 0;
}

/* Checks what an HTTP/1.1 head would be written from. */
static void check_head(const struct h2_request_head *h)
{
    PROPERTY(h->method.length > 0);
    for (size_t i = 0; i < h->method.length; i++) {
        unsigned char c = (unsigned char)h->method.data[i];
        PROPERTY(c > 0x20 && c < 0x7f && strchr("()<>@,;:\\\"/[]?={}", c) == NULL);
    }
    PROPERTY(h->path.length > 0);
    PROPERTY(h->path.data[0] == '/' || (h->path.length == 1 && h->path.data[0] == '*' && is(h->method, "OPTIONS")));
    for (size_t i = 0; i < h->path.length; i++)
        PROPERTY((unsigned char)h->path.data[i] > 0x20 && (unsigned char)h->path.data[i] < 0x7f);
    PROPERTY(h->authority.length > 0);
    for (size_t i = 0; i < h->authority.length; i++)
        PROPERTY((unsigned char)h->authority.data[i] > 0x20 && (unsigned char)h->authority.data[i] < 0x7f &&
                 h->authority.data[i] != '@');
    for (size_t i = 0; i < h->header_count; i++) {
        struct h2_str n = h->headers[i].name, v = h->headers[i].value;
        PROPERTY(lower_token(n));
        PROPERTY(!is(n, "connection") && !is(n, "keep-alive") && !is(n, "proxy-connection") &&
                 !is(n, "transfer-encoding") && !is(n, "upgrade") && !is(n, "te") && !is(n, "host") &&
                 !is(n, "content-length"));
        for (size_t j = 0; j < v.length; j++) {
            unsigned char c = (unsigned char)v.data[j];
            PROPERTY(c == '\t' || (c >= 0x20 && c != 0x7f));
        }
    }
}

/* Answers a request with a small body, or resets it (every third). */
static void answer(struct owner *o, int32_t id)
{
    static const struct h2_header h[] = { { { "Content-Type", 12 }, { "text/plain", 10 } },
                                          { { "Connection", 10 }, { "close", 5 } } };

    if (o->requests % 3 == 0) {
        h2_reset_stream(o->sess, id, NGHTTP2_INTERNAL_ERROR);
        return;
    }
    if (h2_respond(o->sess, id, 200, h, 2, true) == 0) {
        PROPERTY(h2_write_body(o->sess, id, "hello", 5) == 0);
        PROPERTY(h2_end_body(o->sess, id) == 0);
    }
}

static void on_request(void *closure, int32_t id, const struct h2_request_head *head)
{
    struct owner *o = closure;
    struct tracked *t = tracked(o, id);

    check_head(head);
    PROPERTY(t == NULL); /* one request per stream id */
    o->requests++;
    o->open++;
    if (o->count < MAX_TRACKED) {
        t = &o->streams[o->count++];
        *t = (struct tracked){ id, true, head->end_stream, head->has_content_length, head->content_length, 0 };
        PROPERTY(!(head->end_stream && head->has_content_length && head->content_length != 0));
    }
    if (o->answer_at_once || head->end_stream)
        answer(o, id);
}

static void on_data(void *closure, int32_t id, const char *data, size_t len, bool end)
{
    struct owner *o = closure;
    struct tracked *t = tracked(o, id);

    (void)data;
    if (t != NULL) {
        PROPERTY(t->open && !t->ended);
        t->body += len;
        PROPERTY(!t->has_length || t->body <= t->length);
        if (end) {
            PROPERTY(!t->has_length || t->body == t->length);
            t->ended = true;
        }
    }
    if (len > 0)
        h2_consume(o->sess, id, len);
    if (end && !o->answer_at_once)
        answer(o, id);
}

static void on_stream_closed(void *closure, int32_t id, uint32_t code)
{
    struct owner *o = closure;
    struct tracked *t = tracked(o, id);

    (void)code;
    PROPERTY(o->open > 0);
    o->open--;
    if (t != NULL) {
        PROPERTY(t->open);
        t->open = false;
    }
}

static void on_drained(void *closure, int32_t id)
{
    (void)closure;
    (void)id;
}

static void on_goaway(void *closure, bool from_client, uint32_t code, const char *reason)
{
    (void)closure;
    (void)from_client;
    (void)code;
    PROPERTY(reason != NULL);
}

static const struct h2_callbacks callbacks = { on_request, on_data, on_stream_closed, on_drained, on_goaway,
                                               NULL };

static void no_events(struct epoll_event_handler *h, uint32_t events)
{
    (void)h;
    (void)events;
}

/* Reads and drops what the session wrote, letting it write more. */
static void drain(struct connection *c, struct h2_session *sess, int peer)
{
    char buf[65536];

    for (int i = 0; i < 64; i++) {
        ssize_t n = read(peer, buf, sizeof buf);
        connection_flush(c);
        if (h2_session_flush(sess) == -1 || (n <= 0 && connection_queued(c) == 0))
            return;
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return reactor_init() == -1 ? -1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct owner o;
    struct h2_settings settings;
    struct connection c;
    int fds[2];
    size_t piece, at = 1;
    bool dead = false;

    if (size < 1)
        return 0;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == -1)
        abort();
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    fcntl(fds[1], F_SETFL, O_NONBLOCK);
    connection_init(&c, fds[0], false, no_events, NULL);
    memset(&o, 0, sizeof o);
    o.answer_at_once = data[0] & 0x80;
    piece = data[0] & 0x7f;
    h2_settings_default(&settings);
    o.sess = h2_session_new(&c, &settings, &callbacks, &o);
    PROPERTY(o.sess != NULL);
    h2_session_flush(o.sess);
    if (h2_session_receive(o.sess, NGHTTP2_CLIENT_MAGIC, NGHTTP2_CLIENT_MAGIC_LEN) == -1)
        abort();
    while (at < size && !dead) {
        size_t n = piece == 0 || size - at < piece ? size - at : piece;
        dead = h2_session_receive(o.sess, (const char *)data + at, n) == -1;
        at += n;
        drain(&c, o.sess, fds[1]);
        PROPERTY(h2_session_streams(o.sess) == o.open);
        PROPERTY(h2_session_memory(o.sess) < 4 * 1024 * 1024);
    }
    if (!dead) {
        h2_goaway(o.sess, true);
        drain(&c, o.sess, fds[1]);
    }
    h2_session_free(o.sess);
    connection_close(&c);
    close(fds[1]);
    return 0;
}
