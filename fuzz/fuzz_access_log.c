/* fuzz_access_log.c -- libFuzzer harness for the access log's line
 * format (access_log_format in access_log.c).
 *
 * The input is cut into the three fields a client controls: the request
 * line, Referer and User-Agent (the first two bytes give the first two
 * lengths; a field is absent when its length byte is 255). Besides "no
 * crash, no sanitizer report", it checks what log readers rely on:
 *
 *  - the line ends in one '\n' and holds no other byte below 0x20 or
 *    above 0x7e: a client cannot start a line of its own, or hide one;
 *  - it has exactly two '"' per quoted field (three, or four in the timed
 *    format), so a parser splitting on quotes finds every field;
 *  - each quoted field, unescaped, gives back exactly the client's bytes
 *    ("-" for an absent one).
 *
 * Build and run: see fuzz/README.md. */
#include "access_log.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "fuzz_access_log: property violated: %s\n  ", #cond); \
            fprintf(stderr, __VA_ARGS__);                                        \
            fprintf(stderr, "\n");                                               \
            abort();                                                             \
        }                                                                        \
    } while (0)

static int hex_value(char c)
{
    return c <= '9' ? c - '0' : c - 'A' + 10;
}

/* Unescapes the quoted field starting at line[*at] (its opening quote)
 * into out; moves *at past its closing quote. Returns the length. */
static size_t unquote(const char *line, size_t length, size_t *at, char *out)
{
    size_t i = *at + 1, n = 0;

    CHECK(line[*at] == '"', "no opening quote at %zu", *at);
    while (i < length && line[i] != '"') {
        if (line[i] == '\\') {
            CHECK(i + 3 < length && line[i + 1] == 'x', "a backslash that is not \\xHH at %zu", i);
            out[n++] = (char)(hex_value(line[i + 2]) * 16 + hex_value(line[i + 3]));
            i += 4;
        } else {
            out[n++] = line[i++];
        }
    }
    CHECK(i < length, "a field without its closing quote");
    *at = i + 1;
    return n;
}

/* Checks that the quoted field at *at is `want` (NULL data: "-"). */
static void check_field(const char *line, size_t length, size_t *at, struct log_text want, char *scratch)
{
    size_t n = unquote(line, length, at, scratch);

    if (want.data == NULL)
        CHECK(n == 1 && scratch[0] == '-', "an absent field is not \"-\"");
    else
        CHECK(n == want.length && memcmp(scratch, want.data, n) == 0, "a field changed on its way");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct log_text fields[3] = { { 0 } };
    size_t lengths[2], at = 0, quotes = 0;

    if (size < 2)
        return 0;
    lengths[0] = data[0];
    lengths[1] = data[1];
    data += 2;
    size -= 2;
    for (int i = 0; i < 3; i++) {
        size_t n = i < 2 ? lengths[i] : size;

        if (i < 2 && n == 255)
            continue; /* absent */
        if (n > size)
            n = size;
        fields[i] = (struct log_text){ (const char *)data, n };
        data += n;
        size -= n;
    }
    for (int timed = 0; timed <= 1; timed++) {
        struct access_entry e = {
            .client = "192.0.2.1", .request = fields[0], .status = 200, .body_bytes = 12,
            .referer = fields[1], .agent = fields[2], .seconds = 0.25,
            .backend = timed ? "127.0.0.1:8001" : NULL,
        };
        struct buffer out = BUFFER_INIT;
        const char *line;
        size_t length;
        char *scratch;

        if (access_log_format(&out, &e, "25/Nov/2026:13:40:55 +0000", timed) == -1)
            abort();
        line = buffer_bytes(&out);
        length = buffer_length(&out);
        CHECK(length > 0 && line[length - 1] == '\n', "the line does not end in a newline");
        quotes = 0;
        for (size_t i = 0; i + 1 < length; i++) {
            CHECK(line[i] >= 0x20 && line[i] <= 0x7e, "byte 0x%02x at %zu", (unsigned char)line[i], i);
            quotes += line[i] == '"';
        }
        CHECK(quotes == (timed ? 8u : 6u), "%zu quotes", quotes);
        scratch = malloc(length);
        if (scratch == NULL)
            abort();
        at = (size_t)(strchr(line, '"') - line);
        check_field(line, length, &at, fields[0], scratch);
        at = (size_t)(strchr(line + at, '"') - line);
        check_field(line, length, &at, fields[1], scratch);
        at++;
        check_field(line, length, &at, fields[2], scratch);
        if (timed) {
            at = (size_t)(strchr(line + at, '"') - line);
            check_field(line, length, &at, (struct log_text){ "127.0.0.1:8001", 14 }, scratch);
        }
        free(scratch);
        buffer_free(&out);
    }
    return 0;
}
