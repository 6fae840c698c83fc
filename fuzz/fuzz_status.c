/* fuzz_status.c -- libFuzzer harness for the status-line reader
 * (http_parse_status_line in http.c), which health checks apply to
 * whatever a backend answers.
 *
 * The input is the start of a response. Besides "no crash, no sanitizer
 * report", it checks:
 *
 *  - the result is -1, 0, or a status from 100 to 599;
 *  - a status comes only from a line that starts "HTTP/1.0 " or
 *    "HTTP/1.1 " followed by those three digits, and ends in LF;
 *  - a result other than 0 never changes when more bytes follow, and the
 *    input read a byte at a time gives 0 until that same result: a reader
 *    that calls it after every read() decides as one that waited;
 *  - nothing past `max` bytes is looked at: the same input with max smaller
 *    than it gives -1 or the same status from a line within max.
 *
 * Build and run: see fuzz/README.md. */
#include "http.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "fuzz_status: property violated: %s\n  ", #cond); \
            fprintf(stderr, __VA_ARGS__);                                    \
            fprintf(stderr, "\n");                                           \
            abort();                                                         \
        }                                                                    \
    } while (0)

#define MAX 256 /* what health.c reads at most */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    /* An exactly sized copy: ASan sees any read past the end. */
    char *buf = malloc(len ? len : 1);
    int whole, previous = 0;

    CHECK(buf != NULL, "out of memory");
    memcpy(buf, data, len);
    whole = http_parse_status_line(buf, len, MAX);
    CHECK(whole == -1 || whole == 0 || (whole >= 100 && whole <= 599), "result %d", whole);
    if (whole > 0) {
        char digits[4];
        const char *lf = memchr(buf, '\n', len);
        snprintf(digits, sizeof digits, "%d", whole);
        CHECK(len >= 13 && (memcmp(buf, "HTTP/1.0 ", 9) == 0 || memcmp(buf, "HTTP/1.1 ", 9) == 0) &&
                  memcmp(buf + 9, digits, 3) == 0 && lf != NULL && lf - buf < MAX,
              "status %d from \"%.*s\"", whole, (int)(len < 40 ? len : 40), buf);
    }
    /* Byte by byte: 0 until the result, then the result for good. */
    for (size_t n = 0; n <= len; n++) {
        int r = http_parse_status_line(buf, n, MAX);
        CHECK(previous == 0 || r == previous, "%d after %zu bytes, %d before", r, n, previous);
        previous = r;
    }
    CHECK(previous == whole, "byte by byte %d, whole %d", previous, whole);
    /* A smaller max: -1, or the same status (its line ends within max). */
    if (len > 16) {
        int smaller = http_parse_status_line(buf, len, 16);
        CHECK(smaller == -1 || smaller == 0 || smaller == whole, "max 16: %d, max %d: %d", smaller,
              MAX, whole);
        CHECK(smaller != 0, "max 16 with %zu bytes must decide", len);
    }
    free(buf);
    return 0;
}
