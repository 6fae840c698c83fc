/* body.c -- the request-body framer.
 *
 * The chunked parser is strict, on purpose: chunk sizes are hex digits only
 * (at most 15, so no size can overflow), every line ends in CRLF, and the
 * data of each chunk must be followed by CRLF; a trailer line is a header
 * line as http.c reads one in a head (a token name, a colon right after it,
 * no control characters, no folding), and there are no more of them than
 * header lines in a head. A body that any two programs could read
 * differently is refused, not guessed at. */
#include "body.h"

#include "http.h"

#include "hex.h"

/* Longest chunk-size line (with extensions) or trailer line we accept. */
#define BODY_MAX_LINE 4096

enum state {
    C_SIZE,            /* hex digits of a chunk size */
    C_EXTENSION,       /* after ';', up to the CR */
    C_SIZE_LF,         /* saw CR after the size line */
    C_DATA,            /* `remaining` bytes of chunk data */
    C_DATA_CR,         /* CRLF after the data */
    C_DATA_LF,
    C_TRAILER_START,   /* start of a trailer line, or the final empty line */
    C_TRAILER_NAME,    /* a trailer's name, up to the colon */
    C_TRAILER,         /* a trailer's value, up to the CR */
    C_TRAILER_LF,
    C_END_LF,          /* saw CR on the final empty line */
};

void body_framer_init_length(struct body_framer *f, uint64_t length)
{
    *f = (struct body_framer){ .chunked = false, .remaining = length, .done = length == 0 };
}

void body_framer_init_chunked(struct body_framer *f)
{
    *f = (struct body_framer){ .chunked = true, .state = C_SIZE };
}

void body_framer_skip(struct body_framer *f, uint64_t n)
{
    f->remaining -= n;
    if (f->remaining == 0)
        f->done = true;
}

/* Steps the chunked parser over data; see body_frame. */
static ssize_t frame_chunked(struct body_framer *f, const char *data, size_t len)
{
    size_t i = 0;

    while (i < len && !f->done) {
        unsigned char c = (unsigned char)data[i];

        if (f->state == C_DATA) {
            /* Skip over chunk data in one step: it can be anything. */
            size_t n = len - i < f->remaining ? len - i : (size_t)f->remaining;
            if (f->on_data != NULL)
                f->on_data(f->context, data + i, n);
            f->remaining -= n;
            i += n;
            if (f->remaining == 0)
                f->state = C_DATA_CR;
            continue;
        }
        if (++f->line_length > BODY_MAX_LINE)
            return -1;
        switch (f->state) {
        case C_SIZE:
            if (hex_value(c) >= 0) {
                if (++f->digits > 15)
                    return -1;
                f->remaining = f->remaining * 16 + (uint64_t)hex_value(c);
            } else if (f->digits > 0 && c == ';') {
                f->state = C_EXTENSION;
            } else if (f->digits > 0 && c == '\r') {
                f->state = C_SIZE_LF;
            } else {
                return -1;
            }
            break;
        case C_EXTENSION:
            if (c == '\r')
                f->state = C_SIZE_LF;
            else if (c < 0x20 && c != '\t')
                return -1;
            break;
        case C_SIZE_LF:
            if (c != '\n')
                return -1;
            f->line_length = 0;
            f->state = f->remaining > 0 ? C_DATA : C_TRAILER_START;
            break;
        case C_DATA_CR:
            if (c != '\r')
                return -1;
            f->state = C_DATA_LF;
            break;
        case C_DATA_LF:
            if (c != '\n')
                return -1;
            f->line_length = 0;
            f->digits = 0;
            f->state = C_SIZE;
            break;
        case C_TRAILER_START:
            if (c == '\r') {
                f->state = C_END_LF;
            } else if (http_is_token_char(c)) {
                if (++f->trailers > HTTP_MAX_HEADERS)
                    return -1;
                f->state = C_TRAILER_NAME;
            } else {
                return -1; /* includes obsolete line folding (SP, HTAB) */
            }
            break;
        case C_TRAILER_NAME:
            if (c == ':')
                f->state = C_TRAILER;
            else if (!http_is_token_char(c))
                return -1; /* includes white space before the colon, or no colon */
            break;
        case C_TRAILER:
            if (c == '\r')
                f->state = C_TRAILER_LF;
            else if (!http_is_value_char(c))
                return -1;
            break;
        case C_TRAILER_LF:
            if (c != '\n')
                return -1;
            f->line_length = 0;
            f->state = C_TRAILER_START;
            break;
        case C_END_LF:
            if (c != '\n')
                return -1;
            f->done = true;
            break;
        }
        i++;
    }
    return (ssize_t)i;
}

ssize_t body_frame(struct body_framer *f, const char *data, size_t len)
{
    if (f->done)
        return 0;
    if (f->chunked)
        return frame_chunked(f, data, len);
    if (len > f->remaining)
        len = (size_t)f->remaining;
    body_framer_skip(f, len);
    return (ssize_t)len;
}
