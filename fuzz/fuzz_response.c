/* fuzz_response.c -- libFuzzer harness for what a backend sends: the
 * response-head parser (http_parse_response, http.c), what rsp makes of a
 * head (response_check, response_write_head, response.c) and the framer
 * of the body after it (body.c, with on_data).
 *
 * The input's first byte chooses: bit 0, the request was HEAD. The rest is
 * what the backend sends: heads, as exchange.c reads them (interim 1xx
 * heads other than 101 are passed on and the next head follows them), then
 * the body of the final one. Besides "no crash, no sanitizer report", it
 * checks, for every head:
 *
 *  - Incremental parsing: the head parsed with exchange.c's limits in one
 *    piece, one byte at a time, and in random pieces (each call gets a
 *    fresh, exactly-sized copy of what arrived so far) gives the same
 *    result and the same spans; the head alone parses the same. With
 *    smaller limits, a result other than 502 is the same.
 *  - A complete head is well formed: the status line is what
 *    http_parse_status_line reads (status 100..599, HTTP/1.0 or 1.1), every
 *    span lies inside the head, in order; names are tokens, values have no
 *    CTLs and no surrounding blanks; no bare CR, no line over max_line.
 *  - Lists: http_list_next yields exactly the comma-separated, trimmed,
 *    non-empty elements of every value; http_list_has and
 *    http_list_has_word agree with a reference reader.
 *  - response_check: 0 or 502, and framing, length and backend_closes as
 *    response.h's table (RFC 9112, 6.3) says, computed here independently:
 *    HEAD, 1xx, 204, 304: no body; else Transfer-Encoding ending in chunked:
 *    chunked (chunked before another coding: 502); other
 *    Transfer-Encoding: until close; else Content-Length (digits, at most
 *    15; two different values: 502; 0: no body); else until close. An
 *    invalid or contradictory Content-Length is 502 whatever the status.
 *    backend_closes: close-delimited, Transfer-Encoding in an HTTP/1.0
 *    response (RFC 9112, 6.1), or what Connection says for the version.
 *  - response_head_from_backend then response_head_write (with the mode's
 *    Connection line), for each connection mode and dechunk false/true:
 *    the head parses again to HTTP_DONE as HTTP/1.1 with the same status
 *    and reason; its headers are the backend's end-to-end ones, in order
 *    and unchanged, then exactly the mode's Connection line: no
 *    Connection, Keep-Alive, Proxy-Connection, TE, Trailer or Upgrade
 *    (but Upgrade with CONNECTION_UPGRADE), nothing the backend's
 *    Connection lists (but Content-Length and Transfer-Encoding, which
 *    frame the body, as request.c keeps them for requests), no
 *    Content-Length beside Transfer-Encoding or when
 *    dechunking, no Transfer-Encoding when dechunking. A client reading it
 *    frames the body as rsp does (without dechunk; with it, no body or
 *    until close) and keeps the connection exactly as the mode says.
 *  - The body after the final head (Content-Length or chunked), framed in
 *    one piece and in random pieces: never more consumed than given; a
 *    length framer takes min(input, length) and calls no on_data; a
 *    chunked framer agrees with a reference decoder on error, incomplete
 *    or where the body ends, and what on_data collected is exactly the
 *    reference's decoded data.
 *
 * Build and run: see fuzz/README.md. */
#include "body.h"
#include "buffer.h"
#include "http.h"
#include "response.h"
#include "response_head.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz_response: property violated: %s\n  ", #cond); \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* exchange.c's response_limits. */
static const struct http_limits response_limits = { 65536, 65536 };
static const struct http_limits small_limits = { 256, 2048 };
static const struct http_limits big_limits = { 1 << 20, 1 << 22 };

/* Interim heads followed before giving up on an input (exchange.c has no
 * limit; more would only repeat the same checks). */
#define MAX_HEADS 8

/* What body.c promises (BODY_MAX_LINE). */
#define MAX_LINE 4096

/* -- helpers ---------------------------------------------------------------- */

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

static char *copy_of(const void *data, size_t len)
{
    char *copy = malloc(len ? len : 1);
    CHECK(copy != NULL, "out of memory");
    memcpy(copy, data, len);
    return copy;
}

static bool is_token_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
}

static bool same_ci(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (lower(a[i]) != lower(b[i]))
            return false;
    return true;
}

static bool same_span(struct http_span a, struct http_span b)
{
    return a.offset == b.offset && a.length == b.length;
}

static bool span_inside(struct http_span s, size_t limit)
{
    return s.offset <= limit && s.length <= limit - s.offset;
}

/* True if header `h` of res is called `name` (lower case). */
static bool named(const struct http_request *res, const char *buf, size_t h, const char *name)
{
    return http_span_is(buf, res->headers[h].name, name);
}

static size_t count_headers(const struct http_request *res, const char *buf, const char *name)
{
    size_t n = 0;
    for (size_t h = 0; h < res->header_count; h++)
        n += named(res, buf, h, name);
    return n;
}

/* -- a reference list reader ------------------------------------------------ */

/* The elements of a list value (RFC 9110, 5.6.1), split at commas, trimmed
 * of SP and HTAB, empty ones skipped: written apart from http_list_next.
 * next_element gives them one by one. */
struct element_walk {
    const char *buf;
    struct http_span value;
    size_t at;      /* where the next element begins, relative to value */
    bool finished;
};

static bool next_element(struct element_walk *w, struct http_span *element)
{
    const char *v = w->buf + w->value.offset;
    size_t n = w->value.length;

    while (!w->finished) {
        size_t end = w->at, a = w->at, z;
        while (end < n && v[end] != ',')
            end++;
        z = end;
        while (a < z && (v[a] == ' ' || v[a] == '\t'))
            a++;
        while (z > a && (v[z - 1] == ' ' || v[z - 1] == '\t'))
            z--;
        if (end >= n)
            w->finished = true;
        w->at = end + 1;
        if (z > a) {
            *element = (struct http_span){ w->value.offset + a, z - a };
            return true;
        }
    }
    return false;
}

/* True if a list header called `header` holds word[0..length), ignoring case. */
static bool ref_list_has(const struct http_request *res, const char *buf, const char *header,
                         const char *word, size_t length)
{
    for (size_t h = 0; h < res->header_count; h++) {
        struct element_walk w = { buf, res->headers[h].value, 0, false };
        struct http_span e;

        if (!named(res, buf, h, header))
            continue;
        while (next_element(&w, &e))
            if (e.length == length && same_ci(buf + e.offset, word, length))
                return true;
    }
    return false;
}

static bool ref_list_has_word(const struct http_request *res, const char *buf, const char *header,
                              const char *word)
{
    return ref_list_has(res, buf, header, word, strlen(word));
}

/* http_list_next, http_list_has and http_list_has_word against the
 * reference. */
static void check_lists(const struct http_request *res, const char *buf)
{
    static const char *const words[] = { "close", "keep-alive", "upgrade", "chunked" };
    static const char *const lists[] = { "connection", "transfer-encoding" };

    for (size_t h = 0; h < res->header_count; h++) {
        struct element_walk w = { buf, res->headers[h].value, 0, false };
        struct http_span want, got;
        size_t position = 0, count = 0;

        for (;;) {
            bool more = next_element(&w, &want);
            size_t before = position;
            bool has = http_list_next(buf, res->headers[h].value, &position, &got);
            CHECK(has == more, "header %zu, element %zu: http_list_next says %d, the reference %d", h,
                  count, has, more);
            if (!more)
                break;
            CHECK(position > before, "http_list_next did not move on");
            CHECK(same_span(want, got), "header %zu, element %zu: %zu+%zu, the reference %zu+%zu", h,
                  count, got.offset, got.length, want.offset, want.length);
            count++;
        }
        /* Every header's name, as a Connection option. */
        struct http_span name = res->headers[h].name;
        CHECK(http_list_has(buf, res->headers, res->header_count, "connection", name) ==
                  ref_list_has(res, buf, "connection", buf + name.offset, name.length),
              "http_list_has(connection, %.*s)", (int)name.length, buf + name.offset);
    }
    for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++)
        for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
            CHECK(http_list_has_word(buf, res->headers, res->header_count, lists[l], words[i]) ==
                      ref_list_has_word(res, buf, lists[l], words[i]),
                  "http_list_has_word(%s, %s)", lists[l], words[i]);
}

/* -- parsing ------------------------------------------------------------------ */

static int parse_whole(struct http_request *res, const char *buf, size_t len,
                       const struct http_limits *limits)
{
    http_request_init(res);
    int rc = http_parse_response(res, buf, len, limits);
    CHECK(rc == HTTP_INCOMPLETE || rc == HTTP_DONE || rc == 502, "status %d", rc);
    return rc;
}

/* One more byte per call, on the caller's buffer. */
static int parse_bytewise(struct http_request *res, const char *buf, size_t len)
{
    int rc = HTTP_INCOMPLETE;

    http_request_init(res);
    for (size_t have = 1; have <= len && rc == HTTP_INCOMPLETE; have++) {
        rc = http_parse_response(res, buf, have, &response_limits);
        CHECK(rc == HTTP_INCOMPLETE || rc == HTTP_DONE || rc == 502, "status %d", rc);
    }
    return rc;
}

/* In pieces of random sizes, each call on a fresh, exactly-sized copy of
 * everything so far, as exchange.c's growing buffer may move. */
static int parse_pieces(struct http_request *res, const char *buf, size_t len, uint64_t seed)
{
    size_t have = 0;
    int rc = HTTP_INCOMPLETE;

    http_request_init(res);
    while (have < len) {
        size_t most = have / 2 > 64 ? have / 2 : 64;
        size_t step = 1 + next_random(&seed) % most;
        if (step > len - have || next_random(&seed) % 8 == 0)
            step = len - have;
        have += step;
        char *copy = copy_of(buf, have);
        rc = http_parse_response(res, copy, have, &response_limits);
        free(copy);
        CHECK(rc == HTTP_INCOMPLETE || rc == HTTP_DONE || rc == 502, "status %d", rc);
        if (rc != HTTP_INCOMPLETE)
            break;
    }
    return rc;
}

static void check_same(const char *how, int rc_a, const struct http_request *a, int rc_b,
                       const struct http_request *b)
{
    CHECK(rc_a == rc_b, "%s: status %d, in one piece %d", how, rc_b, rc_a);
    if (rc_a != HTTP_DONE)
        return;
    CHECK(a->head_length == b->head_length, "%s: head_length %zu vs %zu", how, b->head_length,
          a->head_length);
    CHECK(a->status == b->status && a->minor_version == b->minor_version, "%s: status line", how);
    CHECK(a->header_count == b->header_count, "%s: %zu headers vs %zu", how, b->header_count,
          a->header_count);
    for (size_t i = 0; i < a->header_count; i++)
        CHECK(same_span(a->headers[i].name, b->headers[i].name) &&
                  same_span(a->headers[i].value, b->headers[i].value),
              "%s: header %zu", how, i);
}

/* The end of the status line's text (before CR LF or LF). */
static size_t status_line_end(const char *buf, size_t head)
{
    size_t end = 0;
    while (end < head && buf[end] != '\n')
        end++;
    CHECK(end < head, "no LF in the head");
    return end > 0 && buf[end - 1] == '\r' ? end - 1 : end;
}

/* A complete head is well formed. */
static void check_done(const struct http_request *res, const char *buf, size_t len)
{
    size_t head = res->head_length;

    CHECK(head >= 1 && head <= len && head <= response_limits.max_head, "head_length %zu, input %zu",
          head, len);
    CHECK(buf[head - 1] == '\n', "the head ends in 0x%02x", (uint8_t)buf[head - 1]);
    for (size_t i = 0, line = 0; i < head; i++) {
        if (buf[i] == '\r')
            CHECK(i + 1 < head && buf[i + 1] == '\n', "a bare CR at offset %zu was accepted", i);
        if (buf[i] == '\n') {
            CHECK(i + 1 - line <= response_limits.max_line, "line at %zu is %zu bytes", line,
                  i + 1 - line);
            line = i + 1;
        }
    }
    int status = http_parse_status_line(buf, head, response_limits.max_line);
    CHECK(status == res->status && status >= 100 && status <= 599,
          "status %d, http_parse_status_line %d", res->status, status);
    CHECK(res->minor_version == buf[7] - '0' && (res->minor_version == 0 || res->minor_version == 1),
          "minor version %d", res->minor_version);

    CHECK(res->header_count <= HTTP_MAX_HEADERS, "%zu headers", res->header_count);
    size_t after = status_line_end(buf, head);
    for (size_t h = 0; h < res->header_count; h++) {
        struct http_span n = res->headers[h].name, val = res->headers[h].value;
        CHECK(n.length > 0 && span_inside(n, head) && n.offset > after, "header %zu name span", h);
        CHECK(buf[n.offset - 1] == '\n', "header %zu does not start a line", h);
        for (size_t i = 0; i < n.length; i++)
            CHECK(is_token_char((uint8_t)buf[n.offset + i]), "header %zu name byte 0x%02x", h,
                  (uint8_t)buf[n.offset + i]);
        CHECK(buf[n.offset + n.length] == ':', "header %zu: no colon after the name", h);
        CHECK(span_inside(val, head) && val.offset > n.offset + n.length, "header %zu value span", h);
        for (size_t i = n.offset + n.length + 1; i < val.offset; i++)
            CHECK(buf[i] == ' ' || buf[i] == '\t', "header %zu: byte 0x%02x before the value", h,
                  (uint8_t)buf[i]);
        if (val.length > 0) {
            CHECK(buf[val.offset] != ' ' && buf[val.offset] != '\t', "header %zu: leading blank", h);
            CHECK(buf[val.offset + val.length - 1] != ' ' && buf[val.offset + val.length - 1] != '\t',
                  "header %zu: trailing blank", h);
        }
        for (size_t i = 0; i < val.length; i++) {
            uint8_t c = (uint8_t)buf[val.offset + i];
            CHECK(c == '\t' || (c >= 0x20 && c != 0x7f), "header %zu value byte 0x%02x", h, c);
        }
        size_t end = val.offset + val.length;
        while (end < head && (buf[end] == ' ' || buf[end] == '\t'))
            end++;
        CHECK(end < head && (buf[end] == '\r' || buf[end] == '\n'), "header %zu: junk after the value",
              h);
        after = end;
    }
}

/* -- framing: the reference ------------------------------------------------- */

static bool no_body_status(int status, bool head_request)
{
    return head_request || (status >= 100 && status < 200) || status == 204 || status == 304;
}

/* Content-Length as response.c accepts it: 1 to 15 digits. */
static bool ref_length(const char *buf, struct http_span value, uint64_t *length)
{
    uint64_t n = 0;

    if (value.length == 0 || value.length > 15)
        return false;
    for (size_t i = 0; i < value.length; i++) {
        char c = buf[value.offset + i];
        if (c < '0' || c > '9')
            return false;
        n = n * 10 + (uint64_t)(c - '0');
    }
    *length = n;
    return true;
}

/* Returns 0 and fills *info as response.h's table says, or 502. */
static int ref_framing(const struct http_request *res, const char *buf, bool head_request,
                       struct response_info *info)
{
    bool has_length = false, has_encoding = false;
    uint64_t length = 0;

    memset(info, 0, sizeof *info);
    for (size_t h = 0; h < res->header_count; h++) {
        uint64_t n;
        if (named(res, buf, h, "transfer-encoding"))
            has_encoding = true;
        if (!named(res, buf, h, "content-length"))
            continue;
        if (!ref_length(buf, res->headers[h].value, &n) || (has_length && n != length))
            return 502;
        has_length = true;
        length = n;
    }
    info->length = length;
    if (no_body_status(res->status, head_request)) {
        info->framing = FRAMING_NONE;
    } else if (has_encoding) {
        /* The codings of all Transfer-Encoding lines, in order: chunked
         * may only be the last one. */
        bool chunked_last = false;
        for (size_t h = 0; h < res->header_count; h++) {
            struct element_walk w = { buf, res->headers[h].value, 0, false };
            struct http_span e;
            if (!named(res, buf, h, "transfer-encoding"))
                continue;
            while (next_element(&w, &e)) {
                if (chunked_last)
                    return 502;
                chunked_last = e.length == 7 && same_ci(buf + e.offset, "chunked", 7);
            }
        }
        info->framing = chunked_last ? FRAMING_CHUNKED : FRAMING_CLOSE;
    } else if (has_length) {
        info->framing = length > 0 ? FRAMING_LENGTH : FRAMING_NONE;
    } else {
        info->framing = FRAMING_CLOSE;
    }
    info->backend_closes = info->framing == FRAMING_CLOSE || (has_encoding && res->minor_version == 0) ||
                           (res->minor_version == 0 ? !ref_list_has_word(res, buf, "connection", "keep-alive")
                                                    : ref_list_has_word(res, buf, "connection", "close"));
    return 0;
}

static const char *framing_name(enum response_framing f)
{
    switch (f) {
    case FRAMING_NONE: return "none";
    case FRAMING_LENGTH: return "length";
    case FRAMING_CHUNKED: return "chunked";
    case FRAMING_CLOSE: return "close";
    }
    return "?";
}

static int check_framing(const struct http_request *res, const char *buf, bool head_request,
                         struct response_info *info)
{
    struct response_info want;
    int rc = response_check(res, buf, head_request, info);
    int ref = ref_framing(res, buf, head_request, &want);

    CHECK(rc == 0 || rc == 502, "response_check returned %d", rc);
    CHECK(rc == ref, "response_check %d, the reference %d (status %d, HEAD %d)", rc, ref, res->status,
          head_request);
    if (rc != 0)
        return rc;
    CHECK(info->framing == want.framing, "framing %s, the reference %s (status %d, HEAD %d)",
          framing_name(info->framing), framing_name(want.framing), res->status, head_request);
    CHECK(info->framing != FRAMING_LENGTH || info->length == want.length, "length %llu, the reference %llu",
          (unsigned long long)info->length, (unsigned long long)want.length);
    CHECK(info->backend_closes == want.backend_closes, "backend_closes %d, the reference %d",
          info->backend_closes, want.backend_closes);
    return 0;
}

/* -- the head the client receives ------------------------------------------- */

static const char *const mode_lines[] = {
    [CONNECTION_PERSIST] = "",
    [CONNECTION_KEEP_ALIVE] = "Connection: keep-alive\r\n",
    [CONNECTION_CLOSE] = "Connection: close\r\n",
    [CONNECTION_UPGRADE] = "Connection: upgrade\r\n",
};

/* The headers that frame the body: never dropped for being listed in
 * Connection (as request.c's essential_headers), since rsp frames by them. */
static bool frames(const char *buf, struct http_span name)
{
    return http_span_is(buf, name, "content-length") || http_span_is(buf, name, "transfer-encoding");
}

/* Whether the backend's header h reaches the client, by response.h (and
 * frames()). */
static bool passes(const struct http_request *res, const char *buf, size_t h,
                   enum response_connection mode, bool dechunk)
{
    static const char *const hop_by_hop[] = { "connection", "keep-alive", "proxy-connection",
                                              "te", "trailer", "upgrade" };
    struct http_span name = res->headers[h].name;

    if (!(mode == CONNECTION_UPGRADE && named(res, buf, h, "upgrade"))) {
        for (size_t i = 0; i < sizeof hop_by_hop / sizeof hop_by_hop[0]; i++)
            if (named(res, buf, h, hop_by_hop[i]))
                return false;
        if (!frames(buf, name) && ref_list_has(res, buf, "connection", buf + name.offset, name.length))
            return false;
    }
    if (named(res, buf, h, "content-length") &&
        (dechunk || count_headers(res, buf, "transfer-encoding") > 0))
        return false;
    if (named(res, buf, h, "transfer-encoding") && dechunk)
        return false;
    return true;
}

static void check_written(const struct http_request *res, const char *buf,
                          enum response_connection mode, bool dechunk, bool head_request,
                          const struct response_info *info)
{
    struct buffer out = BUFFER_INIT;
    const char *line = response_connection_line(mode);

    CHECK(strcmp(line, mode_lines[mode]) == 0, "response_connection_line(%d) is \"%s\"", mode, line);
    struct response_head_options options = { mode == CONNECTION_UPGRADE, dechunk, false };
    struct response_head head;
    /* The framing decides the head's body, not its fields: any will do
     * for a head whose framing is broken (info NULL). */
    CHECK(response_head_from_backend(&head, res, buf, info != NULL ? info->framing : FRAMING_CLOSE,
                                     info != NULL ? info->length : 0, &options) == 0,
          "response_head_from_backend failed");
    CHECK(response_head_write(&head, line, &out) == 0, "response_head_write failed");
    response_head_free(&head);
    size_t len = buffer_length(&out);
    char *sent = copy_of(out.data + out.start, len);
    buffer_free(&out);

    struct http_request *again = malloc(sizeof *again);
    CHECK(again != NULL, "out of memory");
    http_request_init(again);
    int rc = http_parse_response(again, sent, len, &big_limits);
    CHECK(rc == HTTP_DONE && again->head_length == len,
          "mode %d, dechunk %d: the head written gives %d (head_length %zu of %zu):\n%.*s", mode,
          dechunk, rc, again->head_length, len, (int)len, sent);

    /* The status line: HTTP/1.1, then the backend's status and reason. */
    size_t end = status_line_end(buf, res->head_length);
    CHECK(again->status == res->status && again->minor_version == 1 &&
              memcmp(sent, "HTTP/1.1 ", 9) == 0 && status_line_end(sent, len) == end &&
              memcmp(sent + 9, buf + 9, end - 9) == 0,
          "the status line written:\n%.*s", (int)len, sent);

    /* The headers: those that pass, in order and as sent, then the mode's
     * Connection line. */
    size_t g = 0;
    for (size_t h = 0; h < res->header_count; h++) {
        if (!passes(res, buf, h, mode, dechunk))
            continue;
        const struct http_header *a = &res->headers[h];
        CHECK(g < again->header_count, "mode %d, dechunk %d: %.*s is missing:\n%.*s", mode, dechunk,
              (int)a->name.length, buf + a->name.offset, (int)len, sent);
        const struct http_header *b = &again->headers[g++];
        CHECK(a->name.length == b->name.length && a->value.length == b->value.length &&
                  memcmp(buf + a->name.offset, sent + b->name.offset, a->name.length) == 0 &&
                  memcmp(buf + a->value.offset, sent + b->value.offset, a->value.length) == 0,
              "mode %d, dechunk %d: header %zu written as %.*s:\n%.*s", mode, dechunk, h,
              (int)b->name.length, sent + b->name.offset, (int)len, sent);
    }
    if (mode != CONNECTION_PERSIST) {
        CHECK(g + 1 == again->header_count, "mode %d, dechunk %d: %zu headers, not %zu:\n%.*s", mode,
              dechunk, again->header_count, g + 1, (int)len, sent);
        const struct http_header *c = &again->headers[g];
        size_t l = strlen(line);
        CHECK(c->name.offset + l == len - 2 && memcmp(sent + c->name.offset, line, l) == 0,
              "mode %d: not \"%.*s\" last:\n%.*s", mode, (int)l - 2, line, (int)len, sent);
    } else {
        CHECK(g == again->header_count, "dechunk %d: %zu headers, not %zu:\n%.*s", dechunk,
              again->header_count, g, (int)len, sent);
    }

    /* What must not reach the client, stated on its own. */
    CHECK(count_headers(again, sent, "connection") == (mode != CONNECTION_PERSIST),
          "mode %d: Connection headers:\n%.*s", mode, (int)len, sent);
    static const char *const gone[] = { "keep-alive", "proxy-connection", "te", "trailer" };
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
        CHECK(count_headers(again, sent, gone[i]) == 0, "%s passed on:\n%.*s", gone[i], (int)len, sent);
    CHECK(mode == CONNECTION_UPGRADE ? count_headers(again, sent, "upgrade") == count_headers(res, buf, "upgrade")
                                     : count_headers(again, sent, "upgrade") == 0,
          "mode %d: Upgrade headers:\n%.*s", mode, (int)len, sent);
    for (size_t h = 0; h + (mode != CONNECTION_PERSIST) < again->header_count; h++) {
        struct http_span n = again->headers[h].name;
        CHECK((mode == CONNECTION_UPGRADE && named(again, sent, h, "upgrade")) || frames(sent, n) ||
                  !ref_list_has(res, buf, "connection", sent + n.offset, n.length),
              "%.*s, listed in the backend's Connection, passed on:\n%.*s", (int)n.length,
              sent + n.offset, (int)len, sent);
    }
    if (count_headers(res, buf, "transfer-encoding") > 0 || dechunk)
        CHECK(count_headers(again, sent, "content-length") == 0,
              "Content-Length beside Transfer-Encoding, or dechunked:\n%.*s", (int)len, sent);
    if (dechunk)
        CHECK(count_headers(again, sent, "transfer-encoding") == 0,
              "Transfer-Encoding passed on when dechunking:\n%.*s", (int)len, sent);

    /* A client frames what it receives as rsp frames what it sends, and
     * keeps the connection as the mode says. */
    if (info != NULL) {
        struct response_info seen;
        rc = response_check(again, sent, head_request, &seen);
        CHECK(rc == 0, "the head written fails response_check (%d):\n%.*s", rc, (int)len, sent);
        enum response_framing want =
            !dechunk ? info->framing
                     : no_body_status(res->status, head_request) ? FRAMING_NONE : FRAMING_CLOSE;
        CHECK(seen.framing == want && (want != FRAMING_LENGTH || seen.length == info->length),
              "mode %d, dechunk %d: rsp frames the body as %s, a client would as %s:\n%.*s", mode,
              dechunk, framing_name(want), framing_name(seen.framing), (int)len, sent);
        CHECK(seen.backend_closes == (mode == CONNECTION_CLOSE || seen.framing == FRAMING_CLOSE),
              "mode %d: a client reads backend_closes %d:\n%.*s", mode, seen.backend_closes, (int)len,
              sent);
    }
    free(again);
    free(sent);
}

/* -- the body ----------------------------------------------------------------- */

struct collected {
    char *data;
    size_t length, size;
    size_t calls;
};

static void collect(void *context, const char *data, size_t len)
{
    struct collected *c = context;

    c->calls++;
    CHECK(len > 0, "on_data called with no bytes");
    if (c->length + len > c->size) {
        c->size = (c->length + len) * 2;
        c->data = realloc(c->data, c->size);
        CHECK(c->data != NULL, "out of memory");
    }
    memcpy(c->data + c->length, data, len);
    c->length += len;
}

enum { REF_ERROR = -1, REF_INCOMPLETE = -2 };

static int hex_digit(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* And no more trailer lines than header lines in a head (HTTP_MAX_HEADERS). */
#define MAX_TRAILERS 100

/* RFC 9110's tchar, written out again rather than taken from http.c. */
static bool is_tchar(uint8_t c)
{
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
        return true;
    return (c >= '0' && c <= '9') || (c != 0 && memchr("!#$%&'*+-.^_`|~", c, 15) != NULL);
}

/* A reference decoder of body.c's chunked grammar (see fuzz_chunked.c's
 * reference_chunked, of which this is a copy that also collects the chunk
 * data into *out). Returns where the body ends, REF_ERROR or
 * REF_INCOMPLETE; *out holds the data up to where it stopped. */
static long long reference_dechunk(const uint8_t *d, size_t len, struct collected *out)
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
        if (len - i < size) {
            if (len > i)
                collect(out, (const char *)d + i, len - i);
            return REF_INCOMPLETE;
        }
        collect(out, (const char *)d + i, (size_t)size);
        i += size;
        line = i;
        NEED();
        if (d[i++] != '\r')
            return REF_ERROR;
        NEED();
        if (d[i++] != '\n')
            return REF_ERROR;
    }
    for (int trailers = 0;; trailers++) {
        line = i;
        NEED();
        if (d[i] == '\r') {
            i++;
            NEED();
            return d[i] == '\n' ? (long long)i + 1 : REF_ERROR;
        }
        if (trailers == MAX_TRAILERS || !is_tchar(d[i]))
            return REF_ERROR;
        for (i++;; i++) {
            NEED();
            if (d[i] == ':')
                break;
            if (!is_tchar(d[i]))
                return REF_ERROR;
        }
        for (i++;; i++) {
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

struct outcome {
    bool error, done;
    size_t consumed;
};

/* Frames data in one piece (seed 0) or random pieces, each a fresh copy. */
static struct outcome frame(struct body_framer *f, const uint8_t *data, size_t len, uint64_t seed)
{
    struct outcome o = { false, f->done, 0 };
    size_t at = 0;

    while (at < len && !o.done) {
        size_t n = len - at;
        if (seed != 0 && next_random(&seed) % 8 != 0)
            n = 1 + next_random(&seed) % (n < 300 ? n : 300);
        char *piece = copy_of(data + at, n);
        ssize_t got = body_frame(f, piece, n);
        free(piece);
        if (got < 0) {
            CHECK(got == -1 && f->chunked, "body_frame returned %zd", got);
            o.error = true;
            break;
        }
        CHECK((size_t)got <= n, "consumed %zd of a %zu-byte piece", got, n);
        CHECK(f->done || (size_t)got == n, "not done, yet consumed only %zd of %zu", got, n);
        o.consumed += (size_t)got;
        o.done = f->done;
        at += n;
    }
    if (o.done)
        CHECK(body_frame(f, "x", 1) == 0 && f->done, "a done framer took another byte");
    return o;
}

static void check_body(const struct response_info *info, const uint8_t *data, size_t len,
                       uint64_t seed)
{
    struct body_framer f;

    if (info->framing == FRAMING_LENGTH) {
        size_t want = len < info->length ? len : (size_t)info->length;
        for (int i = 0; i < 2; i++) {
            struct collected c = { 0 };
            body_framer_init_length(&f, info->length);
            f.on_data = collect;
            f.context = &c;
            struct outcome o = frame(&f, data, len, i ? seed : 0);
            CHECK(!o.error && o.consumed == want && o.done == (len >= info->length),
                  "length %llu, %zu bytes: consumed %zu, done %d", (unsigned long long)info->length,
                  len, o.consumed, o.done);
            CHECK(c.calls == 0, "on_data called for a Content-Length body");
            free(c.data);
        }
        return;
    }
    if (info->framing != FRAMING_CHUNKED)
        return;

    struct collected ref = { 0 };
    long long end = reference_dechunk(data, len, &ref);
    for (int i = 0; i < 2; i++) {
        struct collected c = { 0 };
        body_framer_init_chunked(&f);
        f.on_data = collect;
        f.context = &c;
        struct outcome o = frame(&f, data, len, i ? seed : 0);
        if (end == REF_ERROR)
            CHECK(o.error, "the reference refuses the body; the framer: done %d consumed %zu", o.done,
                  o.consumed);
        else if (end == REF_INCOMPLETE)
            CHECK(!o.error && !o.done && o.consumed == len,
                  "the reference wants more; the framer: error %d done %d consumed %zu of %zu", o.error,
                  o.done, o.consumed, len);
        else
            CHECK(!o.error && o.done && o.consumed == (size_t)end,
                  "the reference ends the body at %lld; the framer: error %d done %d consumed %zu", end,
                  o.error, o.done, o.consumed);
        CHECK(c.length == ref.length && (c.length == 0 || memcmp(c.data, ref.data, c.length) == 0),
              "on_data collected %zu bytes, the reference decoded %zu (or other bytes)", c.length,
              ref.length);
        free(c.data);
    }
    free(ref.data);
}

/* -- one head, then the next -------------------------------------------------- */

/* Checks the head at the start of buf[0..len) (an exact copy). Returns its
 * length if it is complete and an interim one that another head follows,
 * else 0. */
static size_t check_head(const char *buf, size_t len, bool head_request, uint64_t seed)
{
    /* struct http_request is ~3 KiB: on the heap, so ASan sees overruns. */
    struct http_request *whole = malloc(sizeof *whole), *other = malloc(sizeof *other);
    size_t next = 0;

    CHECK(whole != NULL && other != NULL, "out of memory");
    int rc = parse_whole(whole, buf, len, &response_limits);
    check_same("in pieces", rc, whole, parse_pieces(other, buf, len, seed), other);
    if (len <= 4096)
        check_same("byte by byte", rc, whole, parse_bytewise(other, buf, len), other);
    int rc_small = parse_whole(other, buf, len, &small_limits);
    if (rc_small != 502)
        check_same("with smaller limits", rc_small, other, rc, whole);

    if (rc == HTTP_DONE) {
        size_t head = whole->head_length;
        check_done(whole, buf, len);
        check_same("the head alone", rc, whole, parse_whole(other, buf, head, &response_limits), other);
        check_lists(whole, buf);

        struct response_info info;
        bool ok = check_framing(whole, buf, head_request, &info) == 0;
        for (int mode = CONNECTION_PERSIST; mode <= CONNECTION_UPGRADE; mode++)
            for (int dechunk = 0; dechunk < 2; dechunk++)
                check_written(whole, buf, (enum response_connection)mode, dechunk, head_request,
                              ok ? &info : NULL);

        if (whole->status < 200 && whole->status != 101)
            next = head; /* exchange.c reads the next head after it */
        else if (ok)
            check_body(&info, (const uint8_t *)buf + head, len - head, seed);
    }
    free(whole);
    free(other);
    return next;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    if (len == 0)
        return 0;
    bool head_request = data[0] & 1;
    uint64_t seed = hash(data, len);

    data++;
    len--;
    for (int heads = 0; heads < MAX_HEADS; heads++) {
        /* An exactly sized copy of what is left: ASan sees a read past it. */
        char *buf = copy_of(data, len);
        size_t used = check_head(buf, len, head_request, seed + (uint64_t)heads);
        free(buf);
        if (used == 0)
            break;
        data += used;
        len -= used;
    }
    return 0;
}
