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
 *    ("-" for an absent one);
 *  - in vhost_combined, the host (the Referer's bytes, used as a Host
 *    too) comes first without a space or quote, then ":PORT ";
 *  - in json, the line is ASCII without control bytes, and the strings
 *    "request", "referer" and "user_agent", unescaped (\" \\ \u00HH),
 *    give back exactly the client's bytes (null for an absent one).
 *
 * Build and run: see fuzz/README.md. */
#include "access_log.h"

#include <ctype.h>
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

/* Checks the JSON string value of key in line (the key's first
 * occurrence: in values every '"' is escaped, so it cannot match there)
 * is `want` (NULL data: null). */
static void check_json_field(const char *line, const char *key, struct log_text want, char *scratch)
{
    const char *at = strstr(line, key);
    size_t n = 0;

    CHECK(at != NULL, "no %s in a json line", key);
    at += strlen(key);
    if (want.data == NULL) {
        CHECK(strncmp(at, "null", 4) == 0, "an absent %s is not null", key);
        return;
    }
    CHECK(*at == '"', "%s is not a string", key);
    for (at++; *at != '"'; at++) {
        CHECK(*at != '\0' && *at != '\n', "%s has no closing quote", key);
        if (*at == '\\') {
            if (at[1] == '"' || at[1] == '\\') {
                scratch[n++] = at[1];
                at++;
            } else {
                CHECK(strncmp(at, "\\u00", 4) == 0 && at[4] != '\0' && at[5] != '\0',
                      "an escape that is not \\\", \\\\ or \\u00HH in %s", key);
                scratch[n++] = (char)(hex_value((char)toupper(at[4])) * 16 + hex_value((char)toupper(at[5])));
                at += 5;
            }
        } else {
            scratch[n++] = *at;
        }
    }
    CHECK(n == want.length && memcmp(scratch, want.data, n) == 0, "%s changed on its way", key);
}

/* The json format's checks on one line. */
static void check_json(const char *line, size_t length, const struct log_text fields[3], struct log_text host)
{
    char *scratch = malloc(length + 1);

    if (scratch == NULL)
        abort();
    CHECK(length > 2 && line[0] == '{' && line[length - 2] == '}' && line[length - 1] == '\n', "not {...}\\n");
    for (size_t i = 0; i + 1 < length; i++)
        CHECK(line[i] >= 0x20 && line[i] <= 0x7e, "byte 0x%02x at %zu", (unsigned char)line[i], i);
    check_json_field(line, "\"request\":", fields[0], scratch);
    check_json_field(line, "\"referer\":", fields[1], scratch);
    check_json_field(line, "\"user_agent\":", fields[2], scratch);
    check_json_field(line, "\"host\":", host, scratch);
    free(scratch);
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
    for (int format = ACCESS_COMBINED; format <= ACCESS_JSON; format++) {
        bool timed = format == ACCESS_TIMED;
        struct log_text host = fields[1];
        struct access_entry e = {
            .client = "192.0.2.1", .host = host, .port = "8080", .request = fields[0], .status = 200, .body_bytes = 12,
            .referer = fields[1], .agent = fields[2], .seconds = 0.25,
            .backend = timed ? "127.0.0.1:8001" : NULL,
        };
        struct buffer out = BUFFER_INIT;
        const char *line;
        size_t length;
        char *scratch;

        if (host.data != NULL && (memchr(host.data, ':', host.length) != NULL ||
                                  (host.length > 0 && host.data[0] == '[')))
            e.host.data = NULL; /* a port would be cut off: keep the round trip exact */
        if (access_log_format(&out, &e, "25/Nov/2026:13:40:55 +0000", (enum access_format)format) == -1)
            abort();
        line = buffer_bytes(&out);
        length = buffer_length(&out);
        if (format == ACCESS_JSON) {
            check_json(line, length, fields, e.host);
            buffer_free(&out);
            continue;
        }
        if (format == ACCESS_VHOST_COMBINED) {
            const char *space = memchr(line, ' ', length), *colon;

            CHECK(space != NULL, "no space in a vhost_combined line");
            CHECK(space - line >= 6 && memcmp(space - 5, ":8080", 5) == 0, "no :PORT before the first space");
            colon = space - 5;
            CHECK(memchr(line, '"', (size_t)(colon - line)) == NULL, "a quote in the host");
        }
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
