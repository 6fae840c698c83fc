/* body.h -- finding where a request body ends.
 *
 * A request body is framed either by Content-Length (exactly N bytes) or
 * by the chunked transfer coding (hex-sized chunks, a zero-sized last
 * chunk, optional trailer lines, an empty line). The framer looks at the
 * bytes as they pass through, without copying or changing them, and says
 * how many belong to the body, so that nothing after it is forwarded. */
#ifndef RSP_BODY_H
#define RSP_BODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct body_framer {
    bool chunked;
    bool done;              /* the whole body has been seen */
    uint64_t remaining;     /* bytes left: of the body, or of this chunk's data */
    int state;              /* where the chunked parser is */
    int digits;             /* hex digits of the chunk size so far */
    int trailers;           /* trailer lines so far */
    size_t line_length;     /* length of the current size or trailer line */
    /* Optional, for a chunked body: called with each piece of chunk data
     * as it passes (to take the chunked coding off for an HTTP/1.0 client). */
    void (*on_data)(void *context, const char *data, size_t len);
    void *context;
};

/* A body of exactly length bytes (0: no body at all). */
void body_framer_init_length(struct body_framer *f, uint64_t length);

/* A chunked body. */
void body_framer_init_chunked(struct body_framer *f);

/* For a body framed by length: how many bytes of it are still to come.
 * Bytes moved without being looked at (spliced, chapter 16) are then
 * counted with body_framer_skip. */
static inline uint64_t body_framer_remaining(const struct body_framer *f)
{
    return f->remaining;
}

/* Counts n bytes of a length-framed body as passed, unseen; n must not be
 * more than body_framer_remaining. */
void body_framer_skip(struct body_framer *f, uint64_t n);

/* Looks at the next len bytes. Returns how many of them, from the start,
 * belong to the body (all of them unless the body ends within them; then
 * f->done is set), or -1 if the chunked framing is invalid. */
ssize_t body_frame(struct body_framer *f, const char *data, size_t len);

#endif
