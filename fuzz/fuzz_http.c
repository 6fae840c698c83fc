/* fuzz_http.c -- libFuzzer harness for the request-head parser (http.c) and
 * what rsp does with a parsed head (request.c).
 *
 * The input is the bytes a client sends. Besides "no crash, no sanitizer
 * report", it checks properties the rest of rsp relies on; a violation
 * aborts with a message saying which:
 *
 *  - Incremental parsing: the input parsed in one piece, in random pieces
 *    (each call gets a fresh, exactly-sized copy of what arrived so far, so
 *    a parser that remembers a pointer or reads past `len` is caught), and
 *    one byte at a time, gives the same status and the same spans.
 *  - Limits: with smaller limits a result other than 414/431 is the same as
 *    with larger ones; a complete head is no longer than max_head and no
 *    line in it is longer than max_line.
 *  - A complete head is well formed: every span lies inside head_length and
 *    the spans are in order; method and names are tokens, the target is
 *    visible ASCII, values have no surrounding blanks and no CR/LF; the
 *    version is HTTP/1.0 or 1.1; at most HTTP_MAX_HEADERS headers; the head
 *    ends in LF and holds no bare CR.
 *  - Round trip: the head rebuilt from the spans parses to the same request.
 *  - request.c: request_check's keep_alive, idempotent and upgrade agree
 *    with request.h's rules, read with a reference list reader. If it
 *    accepts the head, the head rsp writes for the backend (keeping the
 *    backend connection or not) parses completely as HTTP/1.1, passes
 *    request_check itself with the same body framing, host, Host value,
 *    and path and query (its target is in origin form, its path already
 *    normal: the path route judged), with keep_alive and upgrade as rsp
 *    means them; it carries exactly one X-Forwarded-For, X-Forwarded-Port
 *    (the one rsp was given), Forwarded and Host, Connection exactly as
 *    the mode says (close; none when kept; upgrade with the one Upgrade
 *    header for an upgrade), no hop-by-hop,
 *    spoofable or Connection-listed header (but framing, Host and rsp's
 *    own), no header name with '_', and the client's framing headers.
 *
 * Build and run: see fuzz/README.md. */
#include "body.h"
#include "buffer.h"
#include "http.h"
#include "request.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "fuzz_http: property violated: %s\n  ", #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, "\n");                                         \
            abort();                                                       \
        }                                                                  \
    } while (0)

/* From the smallest to the largest; each is at least as large as the one
 * before in both limits. rsp's config accepts 256 .. 1048576. */
static const struct http_limits limit_sets[] = {
    { 256, 256 },          /* the smallest a config allows */
    { 256, 2048 },
    { 8192, 32768 },       /* rsp's defaults */
};
#define LIMIT_SETS (sizeof limit_sets / sizeof limit_sets[0])
static const struct http_limits big_limits = { 1 << 20, 1 << 22 };

static bool is_token_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool valid_status(int rc)
{
    return rc == HTTP_INCOMPLETE || rc == HTTP_DONE || rc == 400 || rc == 414 || rc == 431 ||
           rc == 505;
}

/* A small deterministic PRNG, seeded from the input, for the split points. */
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

/* Parses data in one call. */
static int parse_whole(struct http_request *req, const uint8_t *data, size_t len,
                       const struct http_limits *limits)
{
    http_request_init(req);
    int rc = http_parse_request(req, (const char *)data, len, limits);
    CHECK(valid_status(rc), "status %d", rc);
    return rc;
}

/* Parses data as it would arrive in pieces of random sizes: each call sees
 * a new, exactly-sized copy of everything received so far. */
static int parse_pieces(struct http_request *req, const uint8_t *data, size_t len,
                        const struct http_limits *limits, uint64_t seed)
{
    size_t have = 0;
    int rc = HTTP_INCOMPLETE;

    http_request_init(req);
    while (have < len) {
        /* Mostly small pieces, larger as the head grows (so a long input
         * costs O(n log n) copying, not O(n^2)); now and then the rest. */
        size_t most = have / 2 > 64 ? have / 2 : 64;
        size_t step = 1 + next_random(&seed) % most;
        if (step > len - have || next_random(&seed) % 8 == 0)
            step = len - have;
        have += step;
        char *copy = malloc(have);
        CHECK(copy != NULL, "out of memory");
        memcpy(copy, data, have);
        rc = http_parse_request(req, copy, have, limits);
        free(copy);
        CHECK(valid_status(rc), "status %d", rc);
        if (rc != HTTP_INCOMPLETE)
            break;
    }
    return rc;
}

/* Parses data one more byte per call. */
static int parse_bytewise(struct http_request *req, const uint8_t *data, size_t len,
                          const struct http_limits *limits)
{
    int rc = HTTP_INCOMPLETE;

    http_request_init(req);
    for (size_t have = 1; have <= len && rc == HTTP_INCOMPLETE; have++) {
        rc = http_parse_request(req, (const char *)data, have, limits);
        CHECK(valid_status(rc), "status %d", rc);
    }
    return rc;
}

static bool same_span(struct http_span a, struct http_span b)
{
    return a.offset == b.offset && a.length == b.length;
}

/* The results of two parses of the same bytes must agree. */
static void check_same(const char *how, int rc_a, const struct http_request *a, int rc_b,
                       const struct http_request *b)
{
    CHECK(rc_a == rc_b, "%s: status %d, in one piece %d", how, rc_b, rc_a);
    if (rc_a != HTTP_DONE)
        return;
    CHECK(a->head_length == b->head_length, "%s: head_length %zu vs %zu", how, b->head_length,
          a->head_length);
    CHECK(same_span(a->method, b->method) && same_span(a->target, b->target), "%s: request line",
          how);
    CHECK(a->minor_version == b->minor_version, "%s: version", how);
    CHECK(a->header_count == b->header_count, "%s: %zu headers vs %zu", how, b->header_count,
          a->header_count);
    for (size_t i = 0; i < a->header_count; i++)
        CHECK(same_span(a->headers[i].name, b->headers[i].name) &&
                  same_span(a->headers[i].value, b->headers[i].value),
              "%s: header %zu", how, i);
}

static bool span_inside(struct http_span s, size_t limit)
{
    return s.offset <= limit && s.length <= limit - s.offset;
}

/* A complete head must be well formed (see the top of the file). */
static void check_done(const struct http_request *req, const uint8_t *buf, size_t len,
                       const struct http_limits *limits)
{
    size_t head = req->head_length;

    CHECK(head >= 1 && head <= len, "head_length %zu, input %zu", head, len);
    CHECK(head <= limits->max_head, "head_length %zu > max_head %zu", head, limits->max_head);
    CHECK(buf[head - 1] == '\n', "the head ends in 0x%02x", buf[head - 1]);
    for (size_t i = 0, line = 0; i < head; i++) {
        if (buf[i] == '\r')
            CHECK(i + 1 < head && buf[i + 1] == '\n', "a bare CR at offset %zu was accepted", i);
        if (buf[i] == '\n') {
            CHECK(i + 1 - line <= limits->max_line, "line at %zu is %zu bytes, max_line %zu", line,
                  i + 1 - line, limits->max_line);
            line = i + 1;
        }
    }

    /* The request line: METHOD SP TARGET SP HTTP/1.x */
    struct http_span m = req->method, t = req->target;
    CHECK(m.length > 0 && span_inside(m, head), "method span %zu+%zu", m.offset, m.length);
    for (size_t i = 0; i < m.length; i++)
        CHECK(is_token_char(buf[m.offset + i]), "method byte 0x%02x", buf[m.offset + i]);
    CHECK(t.offset == m.offset + m.length + 1 && buf[t.offset - 1] == ' ', "method, SP, target");
    CHECK(t.length > 0 && span_inside(t, head), "target span %zu+%zu", t.offset, t.length);
    for (size_t i = 0; i < t.length; i++)
        CHECK(buf[t.offset + i] > 0x20 && buf[t.offset + i] < 0x7f, "target byte 0x%02x",
              buf[t.offset + i]);
    size_t v = t.offset + t.length;
    CHECK(v + 9 <= head && buf[v] == ' ' && memcmp(buf + v + 1, "HTTP/1.", 7) == 0 &&
              buf[v + 8] == '0' + req->minor_version,
          "version after the target");
    CHECK(req->minor_version == 0 || req->minor_version == 1, "minor version %d",
          req->minor_version);
    CHECK(v + 9 < head && (buf[v + 9] == '\n' || buf[v + 9] == '\r'),
          "the request line ends after the version");
    for (size_t i = 0; i < m.offset; i++)
        CHECK(buf[i] == '\r' || buf[i] == '\n', "byte 0x%02x before the method", buf[i]);

    /* Headers: in order, each NAME ":" blanks VALUE blanks EOL. */
    CHECK(req->header_count <= HTTP_MAX_HEADERS, "%zu headers", req->header_count);
    size_t after = v + 9;
    for (size_t h = 0; h < req->header_count; h++) {
        struct http_span n = req->headers[h].name, val = req->headers[h].value;
        CHECK(n.length > 0 && span_inside(n, head) && n.offset > after, "header %zu name span", h);
        CHECK(buf[n.offset - 1] == '\n', "header %zu does not start a line", h);
        for (size_t i = 0; i < n.length; i++)
            CHECK(is_token_char(buf[n.offset + i]), "header %zu name byte 0x%02x", h,
                  buf[n.offset + i]);
        CHECK(buf[n.offset + n.length] == ':', "header %zu: no colon after the name", h);
        CHECK(span_inside(val, head) && val.offset > n.offset + n.length, "header %zu value span", h);
        for (size_t i = n.offset + n.length + 1; i < val.offset; i++)
            CHECK(buf[i] == ' ' || buf[i] == '\t', "header %zu: byte 0x%02x before the value", h,
                  buf[i]);
        if (val.length > 0) {
            CHECK(buf[val.offset] != ' ' && buf[val.offset] != '\t', "header %zu: leading blank", h);
            CHECK(buf[val.offset + val.length - 1] != ' ' && buf[val.offset + val.length - 1] != '\t',
                  "header %zu: trailing blank", h);
        }
        for (size_t i = 0; i < val.length; i++) {
            uint8_t c = buf[val.offset + i];
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

/* Rebuilds a canonical head from the spans, with CRLF line ends. */
static char *rebuild(const struct http_request *req, const uint8_t *buf, size_t *out_len)
{
    struct buffer out = BUFFER_INIT;
    int rc = 0;

    rc |= buffer_append(&out, (const char *)buf + req->method.offset, req->method.length);
    rc |= buffer_append(&out, " ", 1);
    rc |= buffer_append(&out, (const char *)buf + req->target.offset, req->target.length);
    rc |= buffer_append(&out, req->minor_version ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n", 11);
    for (size_t h = 0; h < req->header_count; h++) {
        const struct http_header *hd = &req->headers[h];
        rc |= buffer_append(&out, (const char *)buf + hd->name.offset, hd->name.length);
        rc |= buffer_append(&out, ": ", 2);
        rc |= buffer_append(&out, (const char *)buf + hd->value.offset, hd->value.length);
        rc |= buffer_append(&out, "\r\n", 2);
    }
    rc |= buffer_append(&out, "\r\n", 2);
    CHECK(rc == 0, "out of memory");
    *out_len = buffer_length(&out);
    char *copy = malloc(*out_len);
    CHECK(copy != NULL, "out of memory");
    memcpy(copy, out.data + out.start, *out_len);
    buffer_free(&out);
    return copy;
}

static bool span_text_equal(const uint8_t *a_buf, struct http_span a, const char *b_buf,
                            struct http_span b)
{
    return a.length == b.length && memcmp(a_buf + a.offset, b_buf + b.offset, a.length) == 0;
}

static void check_round_trip(const struct http_request *req, const uint8_t *buf)
{
    size_t len;
    char *again = rebuild(req, buf, &len);
    struct http_request *re = malloc(sizeof *re);
    CHECK(re != NULL, "out of memory");

    http_request_init(re);
    int rc = http_parse_request(re, again, len, &big_limits);
    CHECK(rc == HTTP_DONE, "the rebuilt head gives status %d", rc);
    CHECK(re->head_length == len, "the rebuilt head ends at %zu of %zu", re->head_length, len);
    CHECK(span_text_equal(buf, req->method, again, re->method) &&
              span_text_equal(buf, req->target, again, re->target) &&
              re->minor_version == req->minor_version,
          "the rebuilt request line differs");
    CHECK(re->header_count == req->header_count, "rebuilt: %zu headers, not %zu", re->header_count,
          req->header_count);
    for (size_t h = 0; h < req->header_count; h++)
        CHECK(span_text_equal(buf, req->headers[h].name, again, re->headers[h].name) &&
                  span_text_equal(buf, req->headers[h].value, again, re->headers[h].value),
              "rebuilt header %zu differs", h);
    free(re);
    free(again);
}

static size_t count_headers(const struct http_request *req, const char *buf, const char *name)
{
    size_t n = 0;
    for (size_t h = 0; h < req->header_count; h++)
        n += http_span_is(buf, req->headers[h].name, name);
    return n;
}

/* True if no header name in req has a '_'. */
static bool no_underscore_names(const struct http_request *req, const char *buf)
{
    for (size_t h = 0; h < req->header_count; h++)
        if (memchr(buf + req->headers[h].name.offset, '_', req->headers[h].name.length) != NULL)
            return false;
    return true;
}

/* ASCII letters compared ignoring case (header names and list words). */
static bool same_ci(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char x = a[i] >= 'A' && a[i] <= 'Z' ? (char)(a[i] + 32) : a[i];
        char y = b[i] >= 'A' && b[i] <= 'Z' ? (char)(b[i] + 32) : b[i];
        if (x != y)
            return false;
    }
    return true;
}

/* A reference reader of list headers (RFC 9110, 5.6.1), written apart from
 * http_list_next: true if an element of any header called `header` equals
 * word[0..length), ignoring case. Elements are split at commas and trimmed
 * of SP and HTAB. */
static bool ref_list_has(const struct http_request *req, const char *buf, const char *header,
                         const char *word, size_t length)
{
    for (size_t h = 0; h < req->header_count; h++) {
        const char *v = buf + req->headers[h].value.offset;
        size_t n = req->headers[h].value.length;

        if (!http_span_is(buf, req->headers[h].name, header))
            continue;
        for (size_t start = 0; start <= n;) {
            size_t end = start, a = start, z;
            while (end < n && v[end] != ',')
                end++;
            z = end;
            while (a < z && (v[a] == ' ' || v[a] == '\t'))
                a++;
            while (z > a && (v[z - 1] == ' ' || v[z - 1] == '\t'))
                z--;
            if (length > 0 && z - a == length && same_ci(v + a, word, length))
                return true;
            start = end + 1;
        }
    }
    return false;
}

static bool ref_list_has_word(const struct http_request *req, const char *buf, const char *header,
                              const char *word)
{
    return ref_list_has(req, buf, header, word, strlen(word));
}

static bool method_is(const struct http_request *req, const char *buf, const char *name)
{
    return req->method.length == strlen(name) && memcmp(buf + req->method.offset, name, req->method.length) == 0;
}

/* What request_check says about the connection and the method, by the
 * rules of request.h, read again with the reference list reader. */
static void check_request_info(const struct http_request *req, const char *b,
                               const struct request_info *info)
{
    bool keep_alive = req->minor_version == 1 ? !ref_list_has_word(req, b, "connection", "close")
                                              : ref_list_has_word(req, b, "connection", "keep-alive");
    CHECK(info->keep_alive == keep_alive, "keep_alive %d, HTTP/1.%d", info->keep_alive,
          req->minor_version);
    bool idempotent = method_is(req, b, "GET") || method_is(req, b, "HEAD") ||
                      method_is(req, b, "OPTIONS") || method_is(req, b, "TRACE") ||
                      method_is(req, b, "PUT") || method_is(req, b, "DELETE");
    CHECK(info->idempotent == idempotent, "idempotent %d for method %.*s", info->idempotent,
          (int)req->method.length, b + req->method.offset);
    /* An upgrade: HTTP/1.1, "upgrade" in Connection, and the value of an
     * Upgrade header. */
    if (info->upgrade.length > 0) {
        bool found = false;
        for (size_t h = 0; h < req->header_count; h++)
            found |= http_span_is(b, req->headers[h].name, "upgrade") &&
                     same_span(req->headers[h].value, info->upgrade);
        CHECK(found && req->minor_version == 1 && ref_list_has_word(req, b, "connection", "upgrade"),
              "upgrade \"%.*s\" without an HTTP/1.1 Connection: upgrade and Upgrade",
              (int)info->upgrade.length, b + info->upgrade.offset);
    } else if (req->minor_version == 1 && ref_list_has_word(req, b, "connection", "upgrade") &&
               count_headers(req, b, "upgrade") == 1) {
        for (size_t h = 0; h < req->header_count; h++)
            CHECK(!http_span_is(b, req->headers[h].name, "upgrade") ||
                      req->headers[h].value.length == 0,
                  "HTTP/1.1, Connection: upgrade and one Upgrade header, yet no upgrade");
    }
}

/* The names rsp may send although the client listed them in Connection:
 * framing and Host, which Connection may not remove, and rsp's own. */
static bool may_send_listed(const char *sent, struct http_span name, bool upgrading)
{
    static const char *const kept[] = { "host", "content-length", "transfer-encoding",
                                        "x-forwarded-for", "x-real-ip", "x-forwarded-proto",
                                        "x-forwarded-host", "x-forwarded-port", "forwarded",
                                        "connection" };
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
        if (http_span_is(sent, name, kept[i]))
            return true;
    return upgrading && http_span_is(sent, name, "upgrade");
}

/* True if the first header called `name` has the value `value` (ignoring case). */
static bool header_is(const struct http_request *req, const char *buf, const char *name,
                      const char *value)
{
    for (size_t h = 0; h < req->header_count; h++)
        if (http_span_is(buf, req->headers[h].name, name))
            return req->headers[h].value.length == strlen(value) &&
                   same_ci(buf + req->headers[h].value.offset, value, strlen(value));
    return false;
}

/* What rsp sends on (keeping the backend connection or not) must itself be
 * a clean HTTP/1.1 request, framed the same way, with the target in origin
 * form holding exactly the path that was judged. */
static void check_sent_head(const struct http_request *req, const char *b,
                            const struct request_info *info, bool keep_backend)
{
    static const struct request_policy policy = { false, false };
    struct request_info info2;
    bool upgrading = info->upgrade.length > 0;

    struct buffer out = BUFFER_INIT;
    struct request_view view = request_view_of(req, b);
    /* keep_backend doubles as the chain's fate: both halves get exercised. */
    struct request_origin origin = { "192.0.2.1", "198.51.100.7", keep_backend };
    CHECK(request_write_head(&view, info, &policy, &origin, "8080", keep_backend, keep_backend,
                             &out) == 0,
          "request_write_head failed");
    size_t len = buffer_length(&out);
    char *sent = malloc(len);
    CHECK(sent != NULL, "out of memory");
    memcpy(sent, out.data + out.start, len);
    buffer_free(&out);

    struct http_request *fwd = malloc(sizeof *fwd);
    CHECK(fwd != NULL, "out of memory");
    http_request_init(fwd);
    int rc = http_parse_request(fwd, sent, len, &big_limits);
    CHECK(rc == HTTP_DONE && fwd->head_length == len,
          "the head sent to the backend gives status %d (head_length %zu of %zu):\n%.*s", rc,
          fwd->head_length, len, (int)len, sent);
    CHECK(span_text_equal((const uint8_t *)b, req->method, sent, fwd->method) &&
              fwd->minor_version == 1,
          "the request line sent on differs (or is not HTTP/1.1):\n%.*s", (int)len, sent);
    struct request_view fwd_view = request_view_of(fwd, sent);
    rc = request_check(&fwd_view, &policy, &info2);
    CHECK(rc == 0, "the head sent to the backend fails request_check (%d):\n%.*s", rc, (int)len, sent);
    CHECK(info2.form != TARGET_ABSOLUTE && info2.whole_server == info->whole_server,
          "the target sent on is not in origin form (or '*'):\n%.*s", (int)len, sent);
    /* The backend gets the path route judged: sent on, it is already in
     * normal form, so checking it again finds the very same path. */
    CHECK(info->whole_server ||
              (info2.path_length == info->path_length &&
               memcmp(info2.path, info->path, info->path_length) == 0 &&
               info2.has_query == info->has_query && info2.query.length == info->query.length &&
               memcmp(sent + info2.query.offset, b + info->query.offset, info->query.length) == 0),
          "the path or query sent on is not the one judged:\n%.*s", (int)len, sent);
    CHECK(info2.host.length == info->host.length &&
              memcmp(sent + info2.host.offset, b + info->host.offset, info->host.length) == 0 &&
              info2.host_header.length == info->host_header.length &&
              memcmp(sent + info2.host_header.offset, b + info->host_header.offset,
                     info->host_header.length) == 0,
          "the backend would see another host:\n%.*s", (int)len, sent);
    CHECK(info->body.chunked == info2.body.chunked && info->body.remaining == info2.body.remaining &&
              info->body.done == info2.body.done,
          "the backend would frame the body differently:\n%.*s", (int)len, sent);
    /* The backend reads the connection as rsp means it. */
    CHECK(info2.keep_alive == (keep_backend || upgrading) && info2.idempotent == info->idempotent &&
              info2.upgrade.length == info->upgrade.length &&
              memcmp(sent + info2.upgrade.offset, b + info->upgrade.offset, info->upgrade.length) == 0,
          "keep_backend %d: the backend reads keep_alive %d, upgrade \"%.*s\":\n%.*s", keep_backend,
          info2.keep_alive, (int)info2.upgrade.length, sent + info2.upgrade.offset, (int)len, sent);
    CHECK(count_headers(fwd, sent, "x-forwarded-for") == 1 &&
              count_headers(fwd, sent, "x-real-ip") == 1 &&
              count_headers(fwd, sent, "x-forwarded-proto") == 1 &&
              count_headers(fwd, sent, "x-forwarded-port") == 1 &&
              header_is(fwd, sent, "x-forwarded-port", "8080") &&
              count_headers(fwd, sent, "forwarded") == 1 &&
              count_headers(fwd, sent, "x-forwarded-host") == (info->host_header.length > 0),
          "forwarded headers:\n%.*s", (int)len, sent);
    /* Connection: upgrade for an upgrade, else close unless kept, else none. */
    if (upgrading)
        CHECK(count_headers(fwd, sent, "connection") == 1 && header_is(fwd, sent, "connection", "upgrade") &&
                  count_headers(fwd, sent, "upgrade") == 1,
              "an upgrade sent on without one Connection: upgrade and one Upgrade:\n%.*s", (int)len, sent);
    else if (keep_backend)
        CHECK(count_headers(fwd, sent, "connection") == 0 && count_headers(fwd, sent, "upgrade") == 0,
              "a Connection or Upgrade header with keep_backend:\n%.*s", (int)len, sent);
    else
        CHECK(count_headers(fwd, sent, "connection") == 1 && header_is(fwd, sent, "connection", "close") &&
                  count_headers(fwd, sent, "upgrade") == 0,
              "not one Connection: close without keep_backend:\n%.*s", (int)len, sent);
    static const char *const gone[] = { "keep-alive", "proxy-connection", "te", "trailer",
                                        "x-forwarded-ssl", "x-forwarded-scheme", "x-url-scheme",
                                        "front-end-https", "x-forwarded-prefix",
                                        "x-original-url", "x-rewrite-url" };
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
        CHECK(count_headers(fwd, sent, gone[i]) == 0, "%s sent on:\n%.*s", gone[i], (int)len, sent);
    CHECK(no_underscore_names(fwd, sent), "a header name with '_' sent on:\n%.*s", (int)len, sent);
    /* What the client's Connection lists stays with rsp. */
    for (size_t h = 0; h < fwd->header_count; h++) {
        struct http_span n = fwd->headers[h].name;
        CHECK(may_send_listed(sent, n, upgrading) ||
                  !ref_list_has(req, b, "connection", sent + n.offset, n.length),
              "%.*s, listed in the client's Connection, sent on:\n%.*s", (int)n.length,
              sent + n.offset, (int)len, sent);
    }
    /* (Identical Content-Length headers may go on as one.) One Host always:
     * the client's, an absolute target's authority, or an empty one for an
     * HTTP/1.0 request without. */
    CHECK((count_headers(fwd, sent, "content-length") > 0) == (count_headers(req, b, "content-length") > 0) &&
              count_headers(fwd, sent, "transfer-encoding") == count_headers(req, b, "transfer-encoding") &&
              count_headers(fwd, sent, "host") == 1,
          "framing or Host headers dropped:\n%.*s", (int)len, sent);
    request_info_free(&info2);
    free(fwd);
    free(sent);
}

static void check_forwarded_head(const struct http_request *req, const uint8_t *buf)
{
    static const struct request_policy policy = { false, false };
    struct request_info info;
    const char *b = (const char *)buf;
    struct request_view view = request_view_of(req, b);

    if (request_check(&view, &policy, &info) != 0) {
        request_info_free(&info);
        return;
    }
    check_request_info(req, b, &info);
    /* rsp adds up to eight headers of its own. A head that then has more
     * than HTTP_MAX_HEADERS is fine for most backends, but would be refused
     * (431) by rsp's own parser, which this check uses: skip those. */
    if (req->header_count + 8 > HTTP_MAX_HEADERS) {
        request_info_free(&info);
        return;
    }
    CHECK(span_inside(info.host, req->head_length) && span_inside(info.host_header, req->head_length),
          "host spans");
    CHECK(info.whole_server || (info.path != NULL && info.path_length > 0 && info.path[0] == '/'),
          "a forwarded path that does not begin with '/'");
    check_sent_head(req, b, &info, false);
    check_sent_head(req, b, &info, true);
    request_info_free(&info);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    /* struct http_request is ~3 KiB: on the heap, so ASan sees overruns. */
    struct http_request *whole = malloc(sizeof *whole), *other = malloc(sizeof *other);
    struct http_request *smaller = malloc(sizeof *smaller);
    int rc_smaller = -1;
    uint64_t seed = hash(data, len);

    CHECK(whole != NULL && other != NULL && smaller != NULL, "out of memory");
    for (size_t l = 0; l < LIMIT_SETS; l++) {
        const struct http_limits *limits = &limit_sets[l];
        int rc = parse_whole(whole, data, len, limits);

        check_same("in pieces", rc, whole, parse_pieces(other, data, len, limits, seed + l), other);
        if (l == LIMIT_SETS - 1 || len <= 4096)
            check_same("byte by byte", rc, whole, parse_bytewise(other, data, len, limits), other);
        if (rc_smaller != -1 && rc_smaller != 414 && rc_smaller != 431)
            check_same("with larger limits", rc_smaller, smaller, rc, whole);
        if (rc == HTTP_DONE) {
            check_done(whole, data, len, limits);
            /* Nothing after the head may change it. */
            int rc_head = parse_whole(other, data, whole->head_length, limits);
            check_same("the head alone", rc, whole, rc_head, other);
            if (l == LIMIT_SETS - 1) {
                check_round_trip(whole, data);
                check_forwarded_head(whole, data);
            }
        }
        memcpy(smaller, whole, sizeof *whole);
        rc_smaller = rc;
    }
    free(whole);
    free(other);
    free(smaller);
    return 0;
}
