/* fuzz_http_client.c -- libFuzzer harness for the response parser of
 * rsp's own HTTPS client (http_client_response.c: the head through
 * http_parse_response, the framing through response_check, the body
 * through body.c's framer), which reads what a CA's server sends the ACME
 * client: hostile input.
 *
 * The input's first byte chooses: bit 0, the request was HEAD; bits 1-3,
 * max_response (0, 1, 5, 64, 1000, 16 KiB, 1 MiB, or no limit); bits 4-7
 * seed the random pieces. The rest is what the server sends, then it
 * closes. Besides "no crash, no sanitizer report, no leak", it checks:
 *
 *  - Pieces: the bytes fed in one piece, one byte at a time and in random
 *    pieces give the same outcome: complete (before or at the close) or
 *    failed with the same error, and a complete response the same status,
 *    headers and body. Once the parser has a result, more bytes or the
 *    close change nothing.
 *  - A complete response is sane: status 200..599 (interim 1xx heads are
 *    skipped, a 101 is an error); header names are tokens, values have no
 *    CR, LF, NUL or other control byte but tab and no surrounding blank;
 *    the body is NUL-terminated, at most max_response bytes, and empty for
 *    HEAD; http_client_header finds the first header of each name, in any
 *    case.
 *  - Limits: with no body limit, an outcome that was not "response too
 *    large" is the same (and a complete response the same).
 *  - A failure has a message.
 *
 * Build and run: see fuzz/README.md. */
#include "http_client.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "fuzz_http_client: property violated: %s\n  ", #cond); \
            fprintf(stderr, __VA_ARGS__);                                         \
            fprintf(stderr, "\n");                                                \
            abort();                                                              \
        }                                                                         \
    } while (0)

static const size_t max_responses[8] = { 0, 1, 5, 64, 1000, 16384, 1 << 20, SIZE_MAX };

/* How one feeding went. */
struct outcome {
    int result;                 /* 1 complete, -1 failed */
    bool before_close;          /* the result came before the close */
    const char *error;
    struct http_client_response response;
};

static uint64_t next_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* Feeds data to a new parser in pieces of `piece` bytes (0: random sizes
 * from seed), then the close. */
static struct outcome feed(const uint8_t *data, size_t len, bool head, size_t max_response, size_t piece,
                           uint64_t seed)
{
    struct http_client_parser p;
    struct outcome o = { 0 };
    size_t at = 0;
    int rc = 0;

    http_client_parser_init(&p, head, max_response);
    while (at < len) {
        size_t n = piece != 0 ? piece : 1 + (size_t)(next_random(&seed) % 97);
        if (n > len - at)
            n = len - at;
        /* A fresh, exactly-sized copy: ASan sees any read past it. */
        char *copy = malloc(n);
        CHECK(copy != NULL, "out of memory");
        memcpy(copy, data + at, n);
        int r = http_client_parser_feed(&p, copy, n);
        free(copy);
        CHECK(rc == 0 || r == rc, "a result changed with more bytes: %d then %d", rc, r);
        rc = r;
        at += n;
    }
    o.before_close = rc != 0;
    o.result = http_client_parser_end(&p);
    CHECK(rc == 0 || o.result == rc, "the close changed the result %d to %d", rc, o.result);
    CHECK(o.result == 1 || o.result == -1, "end returned %d", o.result);
    if (o.result == 1)
        CHECK(http_client_parser_take(&p, &o.response) == 0, "take failed");
    else
        o.error = p.error;
    http_client_parser_free(&p);
    return o;
}

static bool token_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Checks what a complete response must be. */
static void check_sane(const struct http_client_response *r, bool head, size_t max_response)
{
    CHECK(r->status >= 200 && r->status <= 599, "status %d", r->status);
    CHECK(r->body != NULL && r->body[r->body_length] == '\0', "body not NUL-terminated");
    CHECK(r->body_length <= max_response, "body of %zu bytes over %zu", r->body_length, max_response);
    CHECK(!head || r->body_length == 0, "a body of %zu bytes for HEAD", r->body_length);
    for (size_t i = 0; i < r->header_count; i++) {
        const char *name = r->headers[i].name, *value = r->headers[i].value;
        size_t vlen = strlen(value);
        CHECK(name[0] != '\0', "empty header name");
        for (const char *c = name; *c != '\0'; c++)
            CHECK(token_char((unsigned char)*c), "header name %s", name);
        for (const char *c = value; *c != '\0'; c++)
            CHECK((unsigned char)*c >= 0x20 ? *c != 0x7f : *c == '\t', "control byte in value of %s", name);
        CHECK(vlen == 0 || (value[0] != ' ' && value[0] != '\t' && value[vlen - 1] != ' ' &&
                            value[vlen - 1] != '\t'), "blank around the value of %s", name);
        /* http_client_header: the first of that name, any case. */
        size_t first = 0;
        while (strcasecmp(r->headers[first].name, name) != 0)
            first++;
        CHECK(http_client_header(r, name) == r->headers[first].value, "http_client_header(%s)", name);
    }
}

static void check_same(const struct outcome *a, const struct outcome *b, const char *how)
{
    CHECK(a->result == b->result, "%s: result %d vs %d (%s / %s)", how, a->result, b->result,
          a->error ? a->error : "-", b->error ? b->error : "-");
    if (a->result == -1) {
        CHECK(strcmp(a->error, b->error) == 0, "%s: error %s vs %s", how, a->error, b->error);
        return;
    }
    CHECK(a->before_close == b->before_close, "%s: complete before the close or not", how);
    CHECK(a->response.status == b->response.status, "%s: status", how);
    CHECK(a->response.header_count == b->response.header_count, "%s: header count", how);
    for (size_t i = 0; i < a->response.header_count; i++)
        CHECK(strcmp(a->response.headers[i].name, b->response.headers[i].name) == 0 &&
                  strcmp(a->response.headers[i].value, b->response.headers[i].value) == 0,
              "%s: header %zu", how, i);
    CHECK(a->response.body_length == b->response.body_length &&
              memcmp(a->response.body, b->response.body, a->response.body_length) == 0,
          "%s: body", how);
}

static void outcome_free(struct outcome *o)
{
    http_client_response_free(&o->response);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    bool head = data[0] & 1;
    size_t max_response = max_responses[(data[0] >> 1) & 7];
    uint64_t seed = ((uint64_t)(data[0] >> 4) << 32) | 0x9e3779b9u;
    data++;
    size--;

    struct outcome whole = feed(data, size, head, max_response, size ? size : 1, 0);
    struct outcome bytes = feed(data, size, head, max_response, 1, 0);
    struct outcome pieces = feed(data, size, head, max_response, 0, seed);
    struct outcome unlimited = feed(data, size, head, SIZE_MAX, size ? size : 1, 0);

    if (whole.result == 1)
        check_sane(&whole.response, head, max_response);
    else
        CHECK(whole.error != NULL && whole.error[0] != '\0', "a failure without a message");
    check_same(&whole, &bytes, "one byte at a time");
    check_same(&whole, &pieces, "random pieces");
    if (whole.result == 1 || strcmp(whole.error, "response too large") != 0)
        check_same(&whole, &unlimited, "without a body limit");
    outcome_free(&whole);
    outcome_free(&bytes);
    outcome_free(&pieces);
    outcome_free(&unlimited);
    return 0;
}
