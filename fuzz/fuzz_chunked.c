/* fuzz_chunked.c -- libFuzzer harness for the request-body framer (body.c).
 *
 * The input is what follows a request head on the connection: a chunked
 * body, and maybe bytes after it (the next request, or garbage). Besides
 * "no crash, no sanitizer report", it checks:
 *
 *  - Chunked framing in one piece, one byte at a time and in random pieces
 *    (each a fresh, exactly-sized copy) agrees on the error, the done flag
 *    and the number of bytes consumed; calls after the end return 0.
 *  - Without an error, everything is consumed until the body ends; once
 *    it ended, framing just the consumed bytes ends it at the same place
 *    (the framer never needs to see past the body).
 *  - An independent, line-by-line reference reader of the same strict
 *    grammar (see reference_chunked) agrees on error / incomplete / where
 *    the body ends.
 *  - A Content-Length framer, for several lengths, consumes exactly
 *    min(input, length) bytes however the input is split, never more than
 *    its length, and is done exactly when it has seen length bytes.
 *
 * Build and run: see fuzz/README.md. */
#include "body.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "fuzz_chunked: property violated: %s\n  ", #cond); \
            fprintf(stderr, __VA_ARGS__);                                     \
            fprintf(stderr, "\n");                                            \
            abort();                                                          \
        }                                                                     \
    } while (0)

/* What body.c promises (its BODY_MAX_LINE): a size line or trailer line,
 * CRLF included, is at most this long. */
#define MAX_LINE 4096
/* And no more trailer lines than header lines in a head (HTTP_MAX_HEADERS). */
#define MAX_TRAILERS 100

struct outcome {
    bool error;
    bool done;
    size_t consumed;   /* bytes that belong to the body (without error) */
};

static uint64_t next_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

static uint64_t hash(const uint8_t *data, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ data[i]) * 1099511628211ULL;
    return h | 1;
}

/* Feeds one piece; updates the outcome. Returns false once it is final. */
static bool feed(struct body_framer *f, struct outcome *o, const char *piece, size_t n)
{
    bool was_done = f->done;
    ssize_t got = body_frame(f, piece, n);

    if (got < 0) {
        CHECK(got == -1 && f->chunked, "body_frame returned %zd", got);
        o->error = true;
        return false;
    }
    CHECK((size_t)got <= n, "consumed %zd of a %zu-byte piece", got, n);
    if (was_done)
        CHECK(got == 0 && f->done, "a done framer consumed %zd more bytes", got);
    if (!f->done)
        CHECK((size_t)got == n, "not done, yet consumed only %zd of %zu bytes", got, n);
    o->consumed += (size_t)got;
    o->done = f->done;
    return !f->done;
}

/* mode 0: in one piece; 1: byte by byte; 2: random pieces. */
static struct outcome frame(struct body_framer *f, const uint8_t *data, size_t len, int mode,
                            uint64_t seed)
{
    struct outcome o = { .done = f->done };
    size_t at = 0;
    char byte[1]; /* byte by byte: ASan catches a read past it just as well */

    while (at < len) {
        size_t n = len - at;
        bool more;
        if (mode == 1) {
            byte[0] = (char)data[at];
            more = feed(f, &o, byte, 1);
            at++;
            if (!more)
                break;
            continue;
        }
        if (mode == 2 && next_random(&seed) % 8 != 0)
            n = 1 + next_random(&seed) % (n < 300 ? n : 300);
        char *piece = malloc(n);
        CHECK(piece != NULL, "out of memory");
        memcpy(piece, data + at, n);
        more = feed(f, &o, piece, n);
        free(piece);
        at += n;
        if (!more)
            break;
    }
    if (!o.error && o.done) {
        /* Later bytes are not the body's. */
        CHECK(body_frame(f, "x", 1) == 0 && f->done, "a done framer took another byte");
    }
    return o;
}

static void check_same(const char *how, struct outcome a, struct outcome b)
{
    CHECK(a.error == b.error && (a.error || (a.done == b.done && a.consumed == b.consumed)),
          "%s: error %d done %d consumed %zu; in one piece: error %d done %d consumed %zu", how,
          b.error, b.done, b.consumed, a.error, a.done, a.consumed);
}

static int hex_digit(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* RFC 9110's tchar, written out again rather than taken from http.c. */
static bool is_tchar(uint8_t c)
{
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
        return true;
    return (c >= '0' && c <= '9') || (c != 0 && memchr("!#$%&'*+-.^_`|~", c, 15) != NULL);
}

enum { REF_ERROR = -1, REF_INCOMPLETE = -2 };

/* An independent reader of the grammar body.c implements, for a whole
 * buffer, line by line:
 *   body    = *chunk last-chunk *trailer CRLF
 *   chunk   = size [ ";" ext ] CRLF data CRLF      size: 1-15 hex digits, > 0
 *   last-chunk = size [ ";" ext ] CRLF             size: 1-15 hex digits, = 0
 *   ext     = any bytes but CTLs (HTAB allowed), up to the CR
 *   trailer = 1*tchar ":" value CRLF
 *   value   = any bytes but CTLs and DEL (HTAB allowed)
 * and no size or trailer line longer than MAX_LINE bytes, CRLF included,
 * nor more than MAX_TRAILERS trailer lines.
 * Returns where the body ends, REF_ERROR or REF_INCOMPLETE, deciding at
 * the first byte that settles it, as an incremental reader would. */
static long long reference_chunked(const uint8_t *d, size_t len)
{
    size_t i = 0, line;

#define NEED()                                                  \
    do {                                                        \
        if (i >= len)                                           \
            return REF_INCOMPLETE;                              \
        if (i - line >= MAX_LINE)                               \
            return REF_ERROR;                                   \
    } while (0)

    for (;;) {
        uint64_t size = 0;
        int digits = 0;

        line = i;
        for (;;) {
            NEED();
            if (hex_digit(d[i]) < 0)
                break;
            if (++digits > 15)
                return REF_ERROR;
            size = size * 16 + (uint64_t)hex_digit(d[i]);
            i++;
        }
        if (digits == 0)
            return REF_ERROR;
        if (d[i] == ';') {
            for (i++;; i++) {
                NEED();
                if (d[i] == '\r')
                    break;
                if (d[i] < 0x20 && d[i] != '\t')
                    return REF_ERROR;
            }
        }
        if (d[i] != '\r')
            return REF_ERROR;
        i++;
        NEED();
        if (d[i] != '\n')
            return REF_ERROR;
        i++;
        if (size == 0)
            break;
        if (len - i < size)
            return REF_INCOMPLETE;
        i += size;
        line = i;
        NEED();
        if (d[i++] != '\r')
            return REF_ERROR;
        NEED();
        if (d[i++] != '\n')
            return REF_ERROR;
    }
    for (int trailers = 0;; trailers++) { /* trailer lines, then the empty line */
        line = i;
        NEED();
        if (d[i] == '\r') {
            i++;
            NEED();
            return d[i] == '\n' ? (long long)i + 1 : REF_ERROR;
        }
        if (trailers == MAX_TRAILERS || !is_tchar(d[i]))
            return REF_ERROR;
        for (i++;; i++) { /* the name, up to the colon */
            NEED();
            if (d[i] == ':')
                break;
            if (!is_tchar(d[i]))
                return REF_ERROR;
        }
        for (i++;; i++) { /* the value */
            NEED();
            if (d[i] == '\r')
                break;
            if ((d[i] < 0x20 && d[i] != '\t') || d[i] == 0x7f)
                return REF_ERROR;
        }
        i++;
        NEED();
        if (d[i++] != '\n')
            return REF_ERROR;
    }
#undef NEED
}

static void check_chunked(const uint8_t *data, size_t len, uint64_t seed)
{
    struct body_framer f;

    body_framer_init_chunked(&f);
    CHECK(!f.done, "a chunked framer starts done");
    struct outcome whole = frame(&f, data, len, 0, 0);
    body_framer_init_chunked(&f);
    check_same("byte by byte", whole, frame(&f, data, len, 1, 0));
    body_framer_init_chunked(&f);
    check_same("in pieces", whole, frame(&f, data, len, 2, seed));

    if (!whole.error && !whole.done)
        CHECK(whole.consumed == len, "incomplete, yet consumed %zu of %zu", whole.consumed, len);
    if (whole.done) {
        body_framer_init_chunked(&f);
        struct outcome body_only = frame(&f, data, whole.consumed, 0, 0);
        check_same("the body alone", whole, body_only);
    }

    long long ref = reference_chunked(data, len);
    if (ref == REF_ERROR)
        CHECK(whole.error, "the reference refuses the body; the framer: done %d consumed %zu",
              whole.done, whole.consumed);
    else if (ref == REF_INCOMPLETE)
        CHECK(!whole.error && !whole.done,
              "the reference wants more bytes; the framer: error %d done %d consumed %zu",
              whole.error, whole.done, whole.consumed);
    else
        CHECK(!whole.error && whole.done && whole.consumed == (size_t)ref,
              "the reference ends the body at %lld; the framer: error %d done %d consumed %zu", ref,
              whole.error, whole.done, whole.consumed);
}

static void check_length(const uint8_t *data, size_t len, uint64_t length, uint64_t seed,
                         bool bytewise)
{
    struct body_framer f;
    uint64_t want = len < length ? len : length;

    for (int mode = 0; mode < 3; mode++) {
        if (mode == 1 && (!bytewise || len > 4096))
            continue;
        body_framer_init_length(&f, length);
        CHECK(f.done == (length == 0) && !f.chunked, "a framer for %llu bytes starts done=%d",
              (unsigned long long)length, f.done);
        struct outcome o = frame(&f, data, len, mode, seed);
        CHECK(!o.error, "Content-Length framing failed");
        CHECK(o.consumed == want, "length %llu, input %zu: consumed %zu (mode %d)",
              (unsigned long long)length, len, o.consumed, mode);
        CHECK(o.done == (len >= length), "length %llu, input %zu: done=%d", (unsigned long long)length,
              len, o.done);
        CHECK(f.remaining == length - want, "length %llu: %llu remaining after %llu",
              (unsigned long long)length, (unsigned long long)f.remaining, (unsigned long long)want);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    uint64_t seed = hash(data, len);

    check_chunked(data, len, seed);

    uint64_t lengths[] = { 0, 1, len / 2, len, (uint64_t)len + 1, seed % (2 * (uint64_t)len + 2),
                           UINT64_MAX, (uint64_t)1 << 63 };
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++)
        check_length(data, len, lengths[i], seed + i, i == 2 || i == 5); /* bytewise: costly */
    return 0;
}
