/* fuzz_proxy_protocol.c -- libFuzzer harness for the PROXY protocol's
 * header parser (proxy_protocol.c).
 *
 * The input is the first bytes a load balancer sends. Besides "no crash,
 * no sanitizer report", it checks what the listener relies on when it
 * feeds the parser bytes as they arrive:
 *
 *  - PROXY_MORE only with fewer than PROXY_HEADER_MAX bytes (bounded);
 *  - a header's length is within the input and at most PROXY_HEADER_MAX;
 *  - incremental: every prefix shorter than a header gives PROXY_MORE,
 *    and every longer one the same header (same length, same address);
 *    once refused, every longer input is refused too;
 *  - an address carried is AF_INET or AF_INET6; an error has a reason.
 *
 * Build and run: see fuzz/README.md. */
#include "proxy_protocol.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "fuzz_proxy_protocol: property violated: %s\n  ", #cond); \
            fprintf(stderr, __VA_ARGS__);                                             \
            fprintf(stderr, "\n");                                                    \
            abort();                                                                  \
        }                                                                             \
    } while (0)

/* Parses an exactly sized copy of data[0..n), so ASan sees any overread. */
static enum proxy_result parse_copy(const uint8_t *data, size_t n, struct proxy_header *out)
{
    unsigned char *copy = malloc(n ? n : 1);
    enum proxy_result r;

    CHECK(copy != NULL, "out of memory");
    memcpy(copy, data, n);
    r = proxy_parse(copy, n, out);
    free(copy);
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    struct proxy_header whole, part;
    enum proxy_result r = parse_copy(data, len, &whole);
    size_t first_error = SIZE_MAX;

    CHECK(r != PROXY_MORE || len < PROXY_HEADER_MAX, "needs more after %zu bytes", len);
    CHECK(r != PROXY_ERROR || whole.error != NULL, "an error without a reason");
    if (r == PROXY_DONE) {
        CHECK(whole.length > 0 && whole.length <= len && whole.length <= PROXY_HEADER_MAX,
              "a header of %zu bytes in %zu", whole.length, len);
        CHECK(whole.local || whole.source.ss_family == AF_INET || whole.source.ss_family == AF_INET6,
              "an address of family %d", whole.source.ss_family);
    }
    for (size_t k = 0; k <= len && k <= PROXY_HEADER_MAX + 1; k++) {
        enum proxy_result p = parse_copy(data, k, &part);
        if (r == PROXY_DONE && k < whole.length)
            CHECK(p == PROXY_MORE, "a prefix of %zu bytes of a %zu-byte header gave %d", k, whole.length, p);
        if (r == PROXY_DONE && k >= whole.length)
            CHECK(p == PROXY_DONE && part.length == whole.length && part.local == whole.local &&
                      memcmp(&part.source, &whole.source, sizeof part.source) == 0,
                  "%zu bytes read differently from %zu", k, len);
        if (r != PROXY_DONE)
            CHECK(p != PROXY_DONE, "%zu bytes made a header, %zu do not", k, len);
        if (p == PROXY_ERROR && first_error == SIZE_MAX)
            first_error = k;
        if (first_error != SIZE_MAX)
            CHECK(p == PROXY_ERROR, "refused at %zu bytes, not at %zu", first_error, k);
    }
    return 0;
}
