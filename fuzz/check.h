/* check.h -- the CHECK macro of the test programs in fuzz/ (test_h2.c,
 * test_files.c, test_encoder.c, test_generation.c). A check that fails is
 * counted in `failures` and said on stderr with the case under way
 * (`current`), its place, the condition and a printf-style detail; the
 * program goes on to the next check. Each program defines `current` and
 * `failures`. */
#ifndef RSP_FUZZ_CHECK_H
#define RSP_FUZZ_CHECK_H

#include <stdio.h>

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        if (!(cond)) {                                                            \
            failures++;                                                           \
            fprintf(stderr, "FAIL %s (%s:%d): %s: ", current, __FILE__, __LINE__, \
                    #cond);                                                       \
            fprintf(stderr, __VA_ARGS__);                                         \
            fputc('\n', stderr);                                                  \
        }                                                                         \
    } while (0)

#endif
