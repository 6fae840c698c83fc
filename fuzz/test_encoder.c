/* test_encoder.c -- tests of the streaming encoders (src/encoder.c) on
 * their own, built with AddressSanitizer and UndefinedBehaviorSanitizer
 * (`make -C fuzz test-encoder`).
 *
 * For each encoding, random and text inputs of 0, 1, 16 KiB and 1 MiB are
 * written in odd-sized pieces with flushes in between, and what comes out
 * is fed as it comes to the real decoder (zlib's inflate with the gzip
 * wrapper, BrotliDecoderDecompressStream, ZSTD_decompressStream): after
 * each flush the decoder must have given back exactly the bytes written so
 * far, and after the finish exactly the input, with the stream ended. The
 * memory counters must stay under the bound and return to zero after
 * encoder_free; and with allocations made to fail one after another (the
 * counting allocator's test hook) encoder_new returns NULL and every call
 * returns -1 without leaking (ASan's leak check at exit). A failed
 * assertion prints the test, the condition and what came, and the program
 * exits 1 after all tests ran. */
#include "encoder.h"

#include "buffer.h"

#include <brotli/decode.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "check.h"

static char current[128];
static int failures;

/* The most an encoder of rsp's parameters may hold (encoder.c's figures
 * are well under it). */
#define MEMORY_BOUND (1024 * 1024)

static const enum encoding encodings[] = { ENCODING_GZIP, ENCODING_BR, ENCODING_ZSTD };

/* A decoder of one encoding, fed the encoder's output as it comes. */
struct decoder {
    enum encoding encoding;
    z_stream zlib;
    BrotliDecoderState *brotli;
    ZSTD_DStream *zstd;
    unsigned char *out;     /* everything decoded so far */
    size_t length, capacity;
    bool ended;             /* the stream's end was decoded */
    bool error;
};

static void decoder_init(struct decoder *d, enum encoding encoding)
{
    memset(d, 0, sizeof *d);
    d->encoding = encoding;
    d->capacity = 4096;
    d->out = malloc(d->capacity);
    if (encoding == ENCODING_GZIP)
        d->error = inflateInit2(&d->zlib, 15 + 16) != Z_OK;
    else if (encoding == ENCODING_BR)
        d->error = (d->brotli = BrotliDecoderCreateInstance(NULL, NULL, NULL)) == NULL;
    else
        d->error = (d->zstd = ZSTD_createDStream()) == NULL || ZSTD_isError(ZSTD_initDStream(d->zstd));
    if (d->out == NULL)
        abort();
}

static void decoder_free(struct decoder *d)
{
    if (d->encoding == ENCODING_GZIP)
        inflateEnd(&d->zlib);
    else if (d->encoding == ENCODING_BR)
        BrotliDecoderDestroyInstance(d->brotli);
    else
        ZSTD_freeDStream(d->zstd);
    free(d->out);
}

/* Room for at least 64 KiB more decoded bytes. */
static void decoder_room(struct decoder *d)
{
    while (d->capacity - d->length < 65536) {
        d->capacity *= 2;
        d->out = realloc(d->out, d->capacity);
        if (d->out == NULL)
            abort();
    }
}

/* Feeds len compressed bytes, decoding all that they allow. */
static void decoder_feed(struct decoder *d, const unsigned char *in, size_t len)
{
    while (!d->error) {
        size_t room;

        decoder_room(d);
        room = d->capacity - d->length;
        if (d->ended) {
            d->error = len > 0; /* bytes after the end */
            return;
        }
        if (d->encoding == ENCODING_GZIP) {
            int rc;

            d->zlib.next_in = (Bytef *)in;
            d->zlib.avail_in = (uInt)len;
            d->zlib.next_out = d->out + d->length;
            d->zlib.avail_out = (uInt)room;
            rc = inflate(&d->zlib, Z_NO_FLUSH);
            d->error = rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR;
            d->ended = rc == Z_STREAM_END;
            in += len - d->zlib.avail_in;
            len = d->zlib.avail_in;
            d->length += room - d->zlib.avail_out;
            if (d->zlib.avail_out != 0 && (len == 0 || d->ended))
                break;
        } else if (d->encoding == ENCODING_BR) {
            uint8_t *next_out = d->out + d->length;
            size_t avail_out = room;
            BrotliDecoderResult rc =
                BrotliDecoderDecompressStream(d->brotli, &len, &in, &avail_out, &next_out, NULL);

            d->length += room - avail_out;
            d->error = rc == BROTLI_DECODER_RESULT_ERROR;
            d->ended = rc == BROTLI_DECODER_RESULT_SUCCESS;
            /* Brotli 1.0.9's decoder may say NEEDS_MORE_INPUT while its
             * ring buffer, past a wrap, still holds decoded bytes: it is
             * called again until a call gives nothing. */
            if (rc != BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT && (len == 0 || d->ended) &&
                (avail_out == room || d->ended))
                break;
        } else {
            ZSTD_inBuffer input = { in, len, 0 };
            ZSTD_outBuffer output = { d->out + d->length, room, 0 };
            size_t rc = ZSTD_decompressStream(d->zstd, &output, &input);

            d->error = ZSTD_isError(rc);
            d->ended = rc == 0;
            in += input.pos;
            len -= input.pos;
            d->length += output.pos;
            if (output.pos < room && (len == 0 || d->ended))
                break;
        }
    }
    if (d->ended && len > 0)
        d->error = true;
}

/* Deterministic pseudo-random numbers (xorshift64). */
static uint64_t rng_state = 88172645463325252ULL;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* len bytes of noise (text false) or of HTML-ish text (text true). */
static unsigned char *make_input(size_t len, bool text)
{
    static const char *words[] = { "<p class=\"note\">", "the", "proxy", "sends", "a", "response",
                                   "</p>\n", "body", "of", "compressed", "bytes", "to", "client",
                                   "<a href=\"/docs/", "\">", "</a>", "window", "and", "memory", "42",
                                   "stream", "flush", "&amp;", "{color:#333}", "function(x){return x+1}" };
    unsigned char *p = malloc(len + 1);
    size_t i = 0;

    if (p == NULL)
        abort();
    while (i < len) {
        if (text) {
            const char *w = words[rng() % (sizeof words / sizeof words[0])];
            size_t n = strlen(w);

            if (n > len - i)
                n = len - i;
            memcpy(p + i, w, n);
            i += n;
            if (i < len)
                p[i++] = ' ';
        } else {
            p[i++] = (unsigned char)rng();
        }
    }
    return p;
}

/* Checks the decoder has given back exactly the first n bytes of input. */
static void expect_decoded(const struct decoder *d, const unsigned char *input, size_t n, const char *when)
{
    CHECK(!d->error, "the decoder failed %s", when);
    CHECK(d->length == n, "%s: decoded %zu bytes, written %zu", when, d->length, n);
    if (d->length == n)
        CHECK(memcmp(d->out, input, n) == 0, "%s: the decoded bytes differ from those written", when);
}

/* Moves what the encoder appended to out into the decoder. */
static void pass(struct buffer *out, struct decoder *d)
{
    decoder_feed(d, (const unsigned char *)buffer_bytes(out), buffer_length(out));
    buffer_consume(out, buffer_length(out));
}

/* Compresses len bytes of input in odd pieces, with a flush every few,
 * decoding as it goes. */
static void round_trip(enum encoding encoding, size_t len, bool text)
{
    static const size_t pieces[] = { 1, 7, 333, 4099, 16411, 65537, 2, 100003 };
    unsigned char *input = make_input(len, text);
    struct encoder *enc = encoder_new(encoding);
    struct buffer out = BUFFER_INIT;
    struct decoder d;
    size_t done = 0, peak = 0, count, bytes;
    int k = 0;

    snprintf(current, sizeof current, "%s, %zu bytes of %s", encoding_name(encoding), len,
             text ? "text" : "noise");
    decoder_init(&d, encoding);
    CHECK(enc != NULL && !d.error, "encoder_new or the decoder failed");
    if (enc == NULL || d.error)
        goto out;
    while (done < len) {
        size_t n = pieces[k++ % (sizeof pieces / sizeof pieces[0])];

        if (n > len - done)
            n = len - done;
        CHECK(encoder_write(enc, input + done, n, &out) == 0, "encoder_write of %zu bytes failed", n);
        done += n;
        if (encoder_memory(enc) > peak)
            peak = encoder_memory(enc);
        pass(&out, &d);
        CHECK(d.length <= done, "decoded %zu bytes, more than the %zu written", d.length, done);
        if (k % 3 == 0) {
            CHECK(encoder_flush(enc, &out) == 0, "encoder_flush failed");
            pass(&out, &d);
            expect_decoded(&d, input, done, "after a flush");
            CHECK(!d.ended, "the stream ended at a flush");
        }
    }
    CHECK(encoder_flush(enc, &out) == 0, "encoder_flush failed");
    CHECK(encoder_flush(enc, &out) == 0, "a second encoder_flush in a row failed");
    pass(&out, &d);
    expect_decoded(&d, input, len, "after the last flush");
    CHECK(encoder_finish(enc, &out) == 0, "encoder_finish failed");
    pass(&out, &d);
    expect_decoded(&d, input, len, "after the finish");
    CHECK(d.ended, "the decoder did not see the stream's end");
    CHECK(encoder_write(enc, "x", 1, &out) == -1, "encoder_write after the finish did not fail");
    CHECK(encoder_finish(enc, &out) == -1, "a second encoder_finish did not fail");
    if (encoder_memory(enc) > peak)
        peak = encoder_memory(enc);
    CHECK(peak <= MEMORY_BOUND, "the encoder held %zu bytes, over the bound %d", peak, MEMORY_BOUND);
    encoder_totals(&count, &bytes);
    CHECK(count == 1 && bytes == encoder_memory(enc), "totals %zu encoders, %zu bytes; the encoder %zu",
          count, bytes, encoder_memory(enc));
    encoder_free(enc);
    encoder_totals(&count, &bytes);
    CHECK(count == 0 && bytes == 0, "after encoder_free: %zu encoders, %zu bytes", count, bytes);
out:
    decoder_free(&d);
    buffer_free(&out);
    free(input);
}

/* Two encoders at once: the totals are their sum. */
static void test_totals(void)
{
    struct encoder *a, *b;
    size_t count, bytes;

    snprintf(current, sizeof current, "totals of two encoders");
    a = encoder_new(ENCODING_GZIP);
    b = encoder_new(ENCODING_ZSTD);
    CHECK(a != NULL && b != NULL, "encoder_new failed");
    if (a != NULL && b != NULL) {
        encoder_totals(&count, &bytes);
        CHECK(count == 2 && bytes == encoder_memory(a) + encoder_memory(b),
              "%zu encoders, %zu bytes; the two hold %zu and %zu", count, bytes, encoder_memory(a),
              encoder_memory(b));
        CHECK(encoder_memory(a) > 0 && encoder_memory(b) > 0, "an encoder counts no memory");
    }
    encoder_free(a);
    encoder_free(b);
    encoder_totals(&count, &bytes);
    CHECK(count == 0 && bytes == 0, "after encoder_free: %zu encoders, %zu bytes", count, bytes);
    CHECK(encoder_new(ENCODING_NONE) == NULL, "encoder_new(ENCODING_NONE) gave an encoder");
    CHECK(strcmp(encoding_name(ENCODING_GZIP), "gzip") == 0 && strcmp(encoding_name(ENCODING_BR), "br") == 0 &&
          strcmp(encoding_name(ENCODING_ZSTD), "zstd") == 0, "the names are wrong");
}

/* The allocation after `after` ones fails, for after = 0, 1, ... until a
 * whole stream gets through: encoder_new gives NULL, or a call gives -1
 * and every later one too; nothing is left counted (or leaked: ASan). */
static void test_failing_allocator(enum encoding encoding)
{
    unsigned char *input = make_input(200000, true);
    long after;
    int new_failures = 0, call_failures = 0;

    snprintf(current, sizeof current, "%s with failing allocations", encoding_name(encoding));
    for (after = 0; after < 1000; after++) {
        struct buffer out = BUFFER_INIT;
        struct encoder *enc;
        size_t count, bytes;
        int rc = 0;

        encoder_fail_allocations_after(after);
        enc = encoder_new(encoding);
        if (enc == NULL) {
            new_failures++;
        } else {
            for (size_t i = 0; i < 200000 && rc == 0; i += 50000)
                rc = encoder_write(enc, input + i, 50000, &out) == 0 && encoder_flush(enc, &out) == 0 ? 0 : -1;
            if (rc == 0)
                rc = encoder_finish(enc, &out);
            if (rc == -1) {
                call_failures++;
                CHECK(encoder_write(enc, "x", 1, &out) == -1 && encoder_flush(enc, &out) == -1 &&
                      encoder_finish(enc, &out) == -1, "a call after a failure succeeded (after %ld)", after);
            }
        }
        encoder_fail_allocations_after(-1);
        encoder_free(enc);
        buffer_free(&out);
        encoder_totals(&count, &bytes);
        CHECK(count == 0 && bytes == 0, "after %ld allocations: %zu encoders, %zu bytes left", after, count,
              bytes);
        if (enc != NULL && rc == 0)
            break;
    }
    CHECK(after < 1000, "never got through");
    CHECK(new_failures > 0, "encoder_new never failed");
    fprintf(stderr, "%s: encoder_new failed %d times, a later call %d times, then %ld allocations were enough\n",
            encoding_name(encoding), new_failures, call_failures, after);
    free(input);
}

int main(void)
{
    static const size_t sizes[] = { 0, 1, 16384, 1024 * 1024 };

    for (size_t e = 0; e < sizeof encodings / sizeof encodings[0]; e++) {
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            round_trip(encodings[e], sizes[s], true);
            round_trip(encodings[e], sizes[s], false);
        }
        test_failing_allocator(encodings[e]);
    }
    test_totals();
    if (failures > 0) {
        fprintf(stderr, "test_encoder: %d checks failed\n", failures);
        return 1;
    }
    fprintf(stderr, "test_encoder: all checks passed\n");
    return 0;
}
