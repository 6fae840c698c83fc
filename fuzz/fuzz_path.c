/* fuzz_path.c -- libFuzzer harness for request paths (path.c).
 *
 * The input is the path of a request target. Besides "no crash, no sanitizer report",
 * it checks what route() relies on:
 *
 *  - path_normalize writes at most 3 bytes per byte read (the output
 *    buffer is exactly that long, so ASan catches any overrun).
 *  - A normalized path that began with '/' still does, and holds no "//",
 *    no "." or ".." segment, and no percent-escape of an unreserved
 *    character or with lower-case hex digits.
 *  - Normalizing is idempotent: the normal form is its own normal form.
 *  - A path without '/' at its start is copied unchanged.
 *
 * Build and run: see fuzz/README.md. */
#include "path.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "fuzz_path: property violated: %s\n  ", #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, "\n");                                         \
            abort();                                                       \
        }                                                                  \
    } while (0)

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int hex_value(char c)
{
    return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

static bool is_unreserved(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

static void check_normal_form(const char *p, size_t n)
{
    CHECK(n >= 1 && p[0] == '/', "a normalized path must begin with '/': \"%.*s\"", (int)n, p);
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '/') {
            size_t end = i + 1;
            while (end < n && p[end] != '/')
                end++;
            size_t segment = end - i - 1;
            CHECK(!(segment == 0 && end < n), "\"//\" in \"%.*s\"", (int)n, p);
            CHECK(!(segment == 1 && p[i + 1] == '.'), "a \".\" segment in \"%.*s\"", (int)n, p);
            CHECK(!(segment == 2 && p[i + 1] == '.' && p[i + 2] == '.'),
                  "a \"..\" segment in \"%.*s\"", (int)n, p);
        }
        if (p[i] == '%' && i + 2 < n && is_hex(p[i + 1]) && is_hex(p[i + 2])) {
            int c = hex_value(p[i + 1]) * 16 + hex_value(p[i + 2]);
            CHECK(!is_unreserved(c), "an escaped unreserved character in \"%.*s\"", (int)n, p);
            CHECK(!(p[i + 1] >= 'a' && p[i + 1] <= 'f') && !(p[i + 2] >= 'a' && p[i + 2] <= 'f'),
                  "lower-case hex in \"%.*s\"", (int)n, p);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    const char *target = (const char *)data;
    char *once, *twice;
    size_t n1, n2;

    /* Exactly sized copies: ASan sees any read or write past the end. */
    once = malloc(len ? 3 * len : 1);
    CHECK(once != NULL, "out of memory");
    n1 = path_normalize(target, len, once);
    CHECK(n1 <= 3 * len, "normalizing %zu bytes gave %zu", len, n1);
    if (len == 0 || target[0] != '/') {
        CHECK(n1 == len && memcmp(once, target, len) == 0, "a path without '/' was changed");
    } else {
        check_normal_form(once, n1);
        twice = malloc(3 * n1);
        CHECK(twice != NULL, "out of memory");
        n2 = path_normalize(once, n1, twice);
        CHECK(n2 == n1 && memcmp(once, twice, n1) == 0,
              "not idempotent: \"%.*s\" -> \"%.*s\"", (int)n1, once, (int)n2, twice);
        free(twice);
    }
    free(once);
    return 0;
}
