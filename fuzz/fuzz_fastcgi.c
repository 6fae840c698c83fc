/* fuzz_fastcgi.c -- libFuzzer harness for the FastCGI record parser
 * (fastcgi.c): the input is what a responder (php-fpm) sends back.
 *
 * Besides "no crash, no sanitizer report", it checks what
 * backend_fastcgi.c relies on when it feeds the parser bytes as they
 * arrive:
 *
 *  - progress: every call either takes bytes or gives an event;
 *  - bounded: a data event lies within the input given;
 *  - split-blind: the input fed whole, byte by byte and in two halves
 *    gives the same STDOUT bytes, STDERR bytes, END_REQUEST (app status,
 *    protocol status) and the same verdict (refused or not);
 *  - once refused, or once END_REQUEST came, nothing more is accepted;
 *  - the STDOUT, and the input itself, read as a CGI head
 *    (fcgi_cgi_head): a head's length within the bytes, the last 64
 *    shorter prefixes incomplete, the HTTP head written ended by CRLF CRLF.
 *
 * Build and run: see fuzz/README.md. */
#include "fastcgi.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "fuzz_fastcgi: property violated: %s\n  ", #cond);   \
            fprintf(stderr, __VA_ARGS__);                                        \
            fprintf(stderr, "\n");                                               \
            abort();                                                             \
        }                                                                        \
    } while (0)

/* What a feeding produced. */
struct outcome {
    struct buffer out, err;
    bool ended, refused;
    uint32_t app_status;
    int protocol_status;
};

/* Feeds data[0..len) as pieces of at most `step` bytes (exact copies, so
 * ASan sees an overread) and collects the events. */
static void feed(const uint8_t *data, size_t len, size_t step, struct outcome *o)
{
    struct fcgi_parser p;

    memset(o, 0, sizeof *o);
    o->out = (struct buffer)BUFFER_INIT;
    o->err = (struct buffer)BUFFER_INIT;
    fcgi_parser_init(&p);
    for (size_t at = 0; at < len && !o->refused;) {
        size_t n = len - at < step ? len - at : step;
        char *piece = malloc(n);
        CHECK(piece != NULL, "out of memory");
        memcpy(piece, data + at, n);
        size_t off = 0;
        while (off < n) {
            struct fcgi_event ev;
            size_t used;
            enum fcgi_result r = fcgi_parse(&p, piece + off, n - off, &used, &ev);
            CHECK(used <= n - off, "used %zu of %zu", used, n - off);
            if (r == FCGI_ERROR) {
                CHECK(p.error != NULL, "refused without a reason");
                o->refused = true;
                break;
            }
            CHECK(used > 0 || r == FCGI_EVENT, "no progress");
            if (r == FCGI_EVENT) {
                CHECK(!o->ended, "an event after END_REQUEST");
                if (ev.kind == FCGI_EVENT_END) {
                    o->ended = true;
                    o->app_status = ev.app_status;
                    o->protocol_status = ev.protocol_status;
                } else {
                    CHECK(ev.data >= piece + off && ev.data + ev.length <= piece + off + used,
                          "event bytes outside what was used");
                    CHECK(buffer_append(ev.kind == FCGI_EVENT_STDOUT ? &o->out : &o->err, ev.data,
                                        ev.length) == 0, "out of memory");
                }
            }
            off += used;
        }
        free(piece);
        at += n;
    }
}

/* Checks two outcomes agree. */
static void same(const struct outcome *a, const struct outcome *b, size_t step)
{
    CHECK(a->refused == b->refused && a->ended == b->ended, "verdicts differ with pieces of %zu", step);
    CHECK(buffer_length(&a->out) == buffer_length(&b->out) &&
              memcmp(buffer_bytes(&a->out), buffer_bytes(&b->out), buffer_length(&a->out)) == 0,
          "STDOUT differs with pieces of %zu", step);
    CHECK(buffer_length(&a->err) == buffer_length(&b->err) &&
              memcmp(buffer_bytes(&a->err), buffer_bytes(&b->err), buffer_length(&a->err)) == 0,
          "STDERR differs with pieces of %zu", step);
    if (a->ended)
        CHECK(a->app_status == b->app_status && a->protocol_status == b->protocol_status,
              "END_REQUEST differs with pieces of %zu", step);
}

static void release(struct outcome *o)
{
    buffer_free(&o->out);
    buffer_free(&o->err);
}

/* The CGI head properties of script output d[0..n) (see the top). */
static void cgi_head(const char *d, size_t n)
{
    struct buffer http = BUFFER_INIT;
    ssize_t used = fcgi_cgi_head(d, n, &http);

    CHECK(used <= (ssize_t)n, "a head of %zd bytes in %zu", used, n);
    if (used > 0) {
        size_t h = buffer_length(&http);
        CHECK(h >= 4 && memcmp(buffer_bytes(&http) + h - 4, "\r\n\r\n", 4) == 0, "an HTTP head without its end");
        for (size_t k = (size_t)used > 64 ? (size_t)used - 64 : 0; k < (size_t)used; k++) {
            struct buffer part = BUFFER_INIT;
            CHECK(fcgi_cgi_head(d, k, &part) == 0, "a prefix of %zu of a %zd-byte head was not incomplete", k, used);
            buffer_free(&part);
        }
    }
    buffer_free(&http);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    struct outcome whole, part;
    size_t steps[] = { 1, 7, len / 2 + 1 };

    feed(data, len, len ? len : 1, &whole);
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        feed(data, len, steps[i], &part);
        same(&whole, &part, steps[i]);
        release(&part);
    }
    cgi_head(buffer_bytes(&whole.out), buffer_length(&whole.out));
    cgi_head((const char *)data, len);
    release(&whole);
    return 0;
}
