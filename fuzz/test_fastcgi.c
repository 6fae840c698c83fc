/* test_fastcgi.c -- tests of the FastCGI record layer (src/fastcgi.c) on
 * its own, built with AddressSanitizer and UndefinedBehaviorSanitizer
 * (`make -C fuzz test-fastcgi`; make regressions runs them too).
 *
 * Streams are encoded and parsed back, whole and in every split into two
 * pieces, and byte by byte; name-value pairs round-trip with 1- and
 * 4-byte lengths; each refusal is met with its reason. A failed check
 * prints the case and what came; the program exits 1 after all ran. */
#include "fastcgi.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static char current[128];
static int failures;

/* What parsing a response gave. */
struct parsed {
    struct buffer out, err;
    bool ended, refused;
    const char *error;
    uint32_t app_status;
    int protocol_status;
};

/* Parses data[0..len) cut at `cut` (and fed byte by byte when cut is 0). */
static void parse(const char *data, size_t len, size_t cut, struct parsed *r)
{
    struct fcgi_parser p;
    size_t pieces[2] = { cut, len - cut }, at = 0;

    memset(r, 0, sizeof *r);
    fcgi_parser_init(&p);
    for (size_t i = 0; at < len && !r->refused; i++) {
        size_t n = cut == 0 ? 1 : pieces[i];
        size_t off = 0;
        while (off < n && !r->refused) {
            struct fcgi_event ev;
            size_t used;
            enum fcgi_result rc = fcgi_parse(&p, data + at + off, n - off, &used, &ev);
            if (rc == FCGI_ERROR) {
                r->refused = true;
                r->error = p.error;
            } else if (rc == FCGI_EVENT && ev.kind == FCGI_EVENT_END) {
                r->ended = true;
                r->app_status = ev.app_status;
                r->protocol_status = ev.protocol_status;
            } else if (rc == FCGI_EVENT) {
                buffer_append(ev.kind == FCGI_EVENT_STDOUT ? &r->out : &r->err, ev.data, ev.length);
            }
            off += used;
        }
        at += n;
    }
}

static void parsed_free(struct parsed *r)
{
    buffer_free(&r->out);
    buffer_free(&r->err);
}

/* Appends an END_REQUEST record. */
static void append_end(struct buffer *b, uint32_t app, int protocol)
{
    unsigned char body[8] = { app >> 24, app >> 16, app >> 8, app, (unsigned char)protocol, 0, 0, 0 };
    fcgi_append_header(b, FCGI_END_REQUEST, 8, 0);
    buffer_append(b, (const char *)body, 8);
}

/* A response of `size` STDOUT bytes, a STDERR line, END_REQUEST: read back
 * whole, in every two-piece split (small ones), and byte by byte. */
static void round_trip(size_t size)
{
    char *text = malloc(size ? size : 1);
    struct buffer b = BUFFER_INIT;

    for (size_t i = 0; i < size; i++)
        text[i] = (char)('a' + i % 26);
    fcgi_append_stream(&b, FCGI_STDOUT, text, size);
    fcgi_append_stream(&b, FCGI_STDERR, "warning", 7);
    fcgi_append_stream(&b, FCGI_STDOUT, NULL, 0);
    fcgi_append_stream(&b, FCGI_STDERR, NULL, 0);
    append_end(&b, 258, FCGI_REQUEST_COMPLETE);
    size_t len = buffer_length(&b);
    for (size_t cut = 0; cut <= len; cut += (size <= 64 || cut == 0 ? 1 : len / 7 + 1)) {
        struct parsed r;
        snprintf(current, sizeof current, "round trip of %zu bytes cut at %zu", size, cut);
        parse(buffer_bytes(&b), len, cut, &r);
        CHECK(!r.refused, "refused: %s", r.error);
        CHECK(r.ended && r.app_status == 258 && r.protocol_status == 0, "end %d app %u", r.ended, r.app_status);
        CHECK(buffer_length(&r.out) == size && (size == 0 || memcmp(buffer_bytes(&r.out), text, size) == 0),
              "stdout of %zu bytes", buffer_length(&r.out));
        CHECK(buffer_length(&r.err) == 7 && memcmp(buffer_bytes(&r.err), "warning", 7) == 0, "stderr");
        parsed_free(&r);
    }
    buffer_free(&b);
    free(text);
}

/* The records a stream is cut into: at most 65535 bytes each, padded to 8. */
static void stream_layout(void)
{
    struct buffer b = BUFFER_INIT;
    size_t size = 65535 + 65535 + 10;
    char *data = calloc(1, size);

    snprintf(current, sizeof current, "stream layout");
    fcgi_append_stream(&b, FCGI_STDIN, data, size);
    const unsigned char *h = (const unsigned char *)buffer_bytes(&b);
    size_t at = 0, records = 0, total = 0;
    while (at < buffer_length(&b)) {
        size_t n = (size_t)h[at + 4] << 8 | h[at + 5], pad = h[at + 6];
        CHECK(h[at] == 1 && h[at + 1] == FCGI_STDIN && h[at + 2] == 0 && h[at + 3] == 1, "header %zu", records);
        CHECK((n + pad) % 8 == 0 && pad < 8, "record %zu: %zu + %zu", records, n, pad);
        total += n;
        records++;
        at += 8 + n + pad;
    }
    CHECK(records == 3 && total == size && at == buffer_length(&b), "%zu records of %zu bytes", records, total);
    buffer_free(&b);
    fcgi_append_stream(&b, FCGI_PARAMS, NULL, 0);
    CHECK(buffer_length(&b) == 8 && buffer_bytes(&b)[1] == FCGI_PARAMS && buffer_bytes(&b)[5] == 0, "empty record");
    buffer_free(&b);
    fcgi_append_begin(&b, true);
    const char *s = buffer_bytes(&b);
    CHECK(buffer_length(&b) == 16 && s[1] == FCGI_BEGIN_REQUEST && s[5] == 8 && s[9] == FCGI_RESPONDER &&
              s[10] == FCGI_KEEP_CONN, "BEGIN_REQUEST");
    buffer_free(&b);
    free(data);
}

/* A name-value pair of these lengths encodes and decodes back. */
static void pair(size_t name_length, size_t value_length)
{
    char *name = malloc(name_length + 1), *value = malloc(value_length + 1);
    struct buffer b = BUFFER_INIT;
    const char *n, *v;
    size_t nl, vl, used;

    snprintf(current, sizeof current, "pair %zu/%zu", name_length, value_length);
    memset(name, 'N', name_length);
    memset(value, 'v', value_length);
    CHECK(fcgi_append_pair(&b, name, name_length, value, value_length) == 0, "append");
    size_t expect = (name_length < 128 ? 1 : 4) + (value_length < 128 ? 1 : 4) + name_length + value_length;
    CHECK(buffer_length(&b) == expect, "%zu bytes, not %zu", buffer_length(&b), expect);
    CHECK(fcgi_pair_decode(buffer_bytes(&b), buffer_length(&b), &used, &n, &nl, &v, &vl) == 0 &&
              used == expect && nl == name_length && vl == value_length &&
              memcmp(n, name, nl) == 0 && memcmp(v, value, vl) == 0, "decoded back");
    for (size_t k = 0; k < buffer_length(&b); k += (k < 16 ? 1 : 997))
        CHECK(fcgi_pair_decode(buffer_bytes(&b), k, &used, &n, &nl, &v, &vl) == -1, "a prefix of %zu decoded", k);
    buffer_free(&b);
    free(name);
    free(value);
}

/* A response that is refused, whole and byte by byte, with its reason. */
static void refused(const char *name, const unsigned char *bytes, size_t len, const char *reason)
{
    for (size_t cut = 0; cut <= len; cut += len) {
        struct parsed r;
        snprintf(current, sizeof current, "refuses %s (cut %zu)", name, cut);
        parse((const char *)bytes, len, cut, &r);
        CHECK(r.refused && r.error != NULL && strstr(r.error, reason) != NULL, "got %s", r.error ? r.error : "no refusal");
        parsed_free(&r);
        if (len == 0)
            break;
    }
}

static void refusals(void)
{
    static const unsigned char version2[] = { 2, 6, 0, 1, 0, 0, 0, 0 };
    static const unsigned char id2[] = { 1, 6, 0, 2, 0, 1, 7, 0, 'x', 0, 0, 0, 0, 0, 0, 0 };
    static const unsigned char id0[] = { 1, 10, 0, 0, 0, 0, 0, 0 };
    static const unsigned char params[] = { 1, 4, 0, 1, 0, 0, 0, 0 };
    static const unsigned char stdin_[] = { 1, 5, 0, 1, 0, 0, 0, 0 };
    static const unsigned char unknown[] = { 1, 11, 0, 1, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
    static const unsigned char type99[] = { 1, 99, 0, 1, 0, 0, 0, 0 };
    static const unsigned char short_end[] = { 1, 3, 0, 1, 0, 7, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
    static const unsigned char long_end[] = { 1, 3, 0, 1, 0, 9, 7, 0 };
    static const unsigned char after_end[] = { 1, 3, 0, 1, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 6, 0, 1, 0, 0, 0, 0 };

    refused("version 2", version2, sizeof version2, "version");
    refused("request id 2", id2, sizeof id2, "request id");
    refused("a management record (id 0)", id0, sizeof id0, "request id");
    refused("PARAMS from a responder", params, sizeof params, "type");
    refused("STDIN from a responder", stdin_, sizeof stdin_, "type");
    refused("UNKNOWN_TYPE", unknown, sizeof unknown, "type");
    refused("type 99", type99, sizeof type99, "type");
    refused("END_REQUEST of 7 bytes", short_end, sizeof short_end, "8 bytes");
    refused("END_REQUEST of 9 bytes", long_end, sizeof long_end, "8 bytes");
    refused("bytes after END_REQUEST", after_end, sizeof after_end, "after END_REQUEST");
}

/* END_REQUEST's statuses are read as sent; an incomplete response is no end. */
static void end_statuses(void)
{
    struct buffer b = BUFFER_INIT;
    struct parsed r;

    snprintf(current, sizeof current, "END_REQUEST overloaded, padded");
    unsigned char body[8] = { 0, 0, 0, 0, FCGI_OVERLOADED, 0, 0, 0 };
    fcgi_append_header(&b, FCGI_END_REQUEST, 8, 5);
    buffer_append(&b, (const char *)body, 8);
    buffer_append(&b, "\0\0\0\0\0", 5);
    parse(buffer_bytes(&b), buffer_length(&b), 0, &r);
    CHECK(!r.refused && r.ended && r.protocol_status == FCGI_OVERLOADED, "protocol status %d", r.protocol_status);
    parsed_free(&r);
    parse(buffer_bytes(&b), buffer_length(&b) - 1, 0, &r);
    CHECK(!r.refused && !r.ended, "ended before its padding");
    parsed_free(&r);
    buffer_free(&b);
}

int main(void)
{
    size_t sizes[] = { 0, 1, 7, 8, 9, 64, 65534, 65535, 65536, 200000 };

    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        round_trip(sizes[i]);
    stream_layout();
    pair(0, 0);
    pair(127, 128);
    pair(128, 127);
    pair(5, 70000);
    pair(300, 0);
    refusals();
    end_statuses();
    if (failures > 0) {
        fprintf(stderr, "test_fastcgi: %d checks failed\n", failures);
        return 1;
    }
    printf("test_fastcgi: all checks passed\n");
    return 0;
}
