/* fuzz_file_headers.c -- libFuzzer harness for what a request tells a pool
 * that serves files (file_path.c, conditional.c, http_date.c,
 * accept_encoding.c).
 *
 * The whole input is given to each reader as a header value (and as a
 * request target). Besides "no crash, no sanitizer report, no read past
 * the span" (each gets a copy of exactly its bytes), it checks:
 *
 *  - file_path_decode: a decoded path holds no NUL, no "//", no leading or
 *    trailing '/', no segment starting with '.', and fits its buffer.
 *  - range_parse: RANGE_ONE gives first <= last < size; an input that is
 *    RANGE_ONE or RANGE_UNSATISFIABLE for one size above zero is never
 *    RANGE_IGNORE for another (only the size decides satisfiability; an
 *    empty file ignores a suffix range, RFC 9110 14.1.1, so size 0 is
 *    checked apart: never RANGE_ONE).
 *  - etag_list_match: a strong match is also a weak match; `*` aside, a
 *    list never matches an etag it does not contain.
 *  - http_date_parse: a parsed date formats and parses back to itself.
 *  - accept_encoding_choose: the choice is among the allowed, and
 *    allowing fewer codings never changes a choice still allowed.
 *  - if_range_holds / conditional_evaluate: run on the input as every
 *    header, with the input's own tag as the current ETag.
 *
 * Build and run: see fuzz/README.md. */
#define _GNU_SOURCE /* memmem */
#include "accept_encoding.h"
#include "conditional.h"
#include "file_path.h"
#include "http_date.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                                           \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "fuzz_file_headers: property violated: %s\n  ", #cond); \
            fprintf(stderr, __VA_ARGS__);                                          \
            fprintf(stderr, "\n");                                                 \
            abort();                                                               \
        }                                                                          \
    } while (0)

static void check_decode(const char *s, size_t n)
{
    char out[256];
    bool slash;
    if (file_path_decode(s, n, out, sizeof out, &slash) != 0)
        return;
    size_t len = strlen(out);
    CHECK(len < sizeof out, "too long");
    CHECK(len == 0 || (out[0] != '/' && out[len - 1] != '/'), "a '/' at an end: %s", out);
    CHECK(!strstr(out, "//"), "an empty segment: %s", out);
    for (size_t i = 0; i < len; i++)
        CHECK(!(out[i] == '.' && (i == 0 || out[i - 1] == '/')), "a dot segment: %s", out);
    /* No decoded NUL hides part of the path: strlen is the whole of it,
     * never longer than the path's bytes. */
    const char *q = memchr(s, '?', n);
    size_t path = q ? (size_t)(q - s) : n;
    CHECK(len < path, "decoded %zu bytes from a path of %zu", len, path);
}

static void check_range(const char *s, size_t n)
{
    static const uint64_t sizes[] = { 0, 1, 100, 1000000, UINT64_MAX };
    enum range_outcome seen = RANGE_IGNORE;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        uint64_t first = 7, last = 7;
        enum range_outcome r = range_parse(s, n, sizes[k], &first, &last);
        if (r == RANGE_ONE)
            CHECK(first <= last && last < sizes[k], "%llu-%llu of %llu", (unsigned long long)first,
                  (unsigned long long)last, (unsigned long long)sizes[k]);
        if (sizes[k] == 0)
            CHECK(r != RANGE_ONE, "a range of an empty file");
        else if (k > 1)
            CHECK((r == RANGE_IGNORE) == (seen == RANGE_IGNORE), "ignored for one size only");
        seen = r;
    }
}

static void check_etags(const char *s, size_t n)
{
    static const char *const tags[] = { "\"5f3c-1a2b\"", "W/\"5f3c-1a2b\"", "\"\"", "\"a\"" };
    bool star = false;
    for (size_t i = 0; i < n; i++)
        star |= s[i] == '*';
    for (size_t k = 0; k < sizeof tags / sizeof tags[0]; k++) {
        size_t tl = strlen(tags[k]);
        bool strong = etag_list_match(s, n, tags[k], tl, false);
        bool weak = etag_list_match(s, n, tags[k], tl, true);
        CHECK(!strong || weak, "a strong match that is not a weak one (%s)", tags[k]);
        /* The opaque part must appear in the list for a match. */
        const char *opaque = tags[k][0] == 'W' ? tags[k] + 2 : tags[k];
        CHECK(!weak || star || memmem(s, n, opaque, strlen(opaque)), "matched %s without it", tags[k]);
    }
}

static void check_date(const char *s, size_t n)
{
    time_t t;
    if (http_date_parse(s, n, &t) != 0)
        return;
    char buf[HTTP_DATE_SIZE];
    time_t back;
    CHECK(http_date_format(t, buf) != 0 || (http_date_parse(buf, 29, &back) == 0 && back == t),
          "%lld formats as %s", (long long)t, buf);
}

static void check_accept_encoding(const char *s, size_t n)
{
    enum encoding all = accept_encoding_choose(s, n, ENCODING_ALL);
    for (unsigned mask = 0; mask <= ENCODING_ALL; mask += 2) {
        enum encoding c = accept_encoding_choose(s, n, mask);
        CHECK(c == ENCODING_NONE || (mask & ENCODING_BIT(c)), "%d not allowed by %u", c, mask);
        if (all != ENCODING_NONE && (mask & ENCODING_BIT(all)))
            CHECK(c == all, "allowing fewer changed %d to %d", all, c);
    }
}

static void check_conditionals(const char *s, size_t n)
{
    static const char etag[] = "\"5f3c-1a2b\"";
    struct conditional_headers h = { s, n, s, n, s, n, s, n };
    enum conditional_outcome o = conditional_evaluate(&h, true, etag, sizeof etag - 1, 784111777);
    CHECK(o == CONDITIONAL_PROCEED || o == CONDITIONAL_NOT_MODIFIED || o == CONDITIONAL_PRECONDITION_FAILED,
          "outcome %d", o);
    (void)if_range_holds(s, n, etag, sizeof etag - 1, 784111777);
    (void)media_type_compressible(s, n, NULL, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size ? size : 1); /* exactly the input: ASan sees any overread */
    if (!s)
        return 0;
    memcpy(s, data, size);
    check_decode(s, size);
    check_range(s, size);
    check_etags(s, size);
    check_date(s, size);
    check_accept_encoding(s, size);
    check_conditionals(s, size);
    free(s);
    return 0;
}
