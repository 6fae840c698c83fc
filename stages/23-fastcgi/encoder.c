/* encoder.c -- gzip, Brotli and zstd streaming encoders with counted
 * memory (see encoder.h). */
#include "encoder.h"

#include <brotli/encode.h>
#include <limits.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <zlib.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_customMem: exported by libzstd.so since 1.0 */
#include <zstd.h>

/* The defaults, chosen with bench/compress (bench/results/compress.md)
 * on a 100 KiB HTML page written in 16 KiB pieces with a flush every
 * 64 KiB: ratio, CPU ms per MiB, peak memory per encoder.
 *
 *   gzip 1: 2.99, 8.9, 262 KiB; 4: 3.30, 15; 5: 3.39, 23; 6: 3.49, 40;
 *     7..9: 3.51, 47..51. Level 5: 6 costs 70 % more CPU for 3 % more.
 *     memLevel 5..9 (150..390 KiB) change nothing else: zlib's 8.
 *   br 0..1: 2.7..2.8 (worse than gzip 1), 100..170 KiB; 2: 3.28, 7.0,
 *     807 KiB at lgwin 16 (1191 at 18, 8871 at the default 22); 3..4: no
 *     better; 5: 3.49, 25, but 1607 KiB even at lgwin 16 (10 MiB at 22);
 *     10..11: 3.9..4.0 at 400..1100 ms/MiB. Quality 2, lgwin 16: the
 *     window changes nothing else here, only the memory.
 *   zstd 1: 3.14, 2.3, 489 KiB at windowLog 16; 3: 3.33, 3.0, 841 KiB
 *     (1530 at 18, 5626 at 22); 4..19: 3.39..3.86 at 8..235 ms/MiB and
 *     4..6 MiB. Level 3 (zstd's own default), windowLog 16.
 */
static const struct encoder_params defaults[] = {
    [ENCODING_GZIP] = { .level = 5, .window_log = 15, .mem_level = 8 },
    [ENCODING_BR] = { .level = 2, .window_log = 16, .mem_level = 0 },
    [ENCODING_ZSTD] = { .level = 3, .window_log = 16, .mem_level = 0 },
};

/* Output is made in steps of this size, then appended to the caller's
 * buffer. */
#define STEP 16384

struct encoder {
    enum encoding encoding;
    bool finished;          /* encoder_finish succeeded */
    bool broken;            /* a call failed: only encoder_free remains */
    size_t memory;          /* bytes held: this struct and the library's blocks */
    union {
        z_stream zlib;
        BrotliEncoderState *brotli;
        ZSTD_CStream *zstd;
    } u;
};

/* Process-wide: encoders alive and the bytes they hold. */
static size_t live_count, live_bytes;

/* The test hook's countdown: allocations left before they fail (-1: never). */
static long allocations_left = -1;

/* Each block starts with this header, so that freeing knows its size. */
union block_header {
    size_t size;
    max_align_t align;
};

/* Allocates size bytes charged to enc (NULL: none counted yet, the struct
 * itself). Returns NULL when memory ran out (or, if may_fail, when the test
 * hook says so). */
static void *counted_alloc(struct encoder *enc, size_t size, bool may_fail)
{
    union block_header *h;

    if (may_fail && allocations_left == 0)
        return NULL;
    if (may_fail && allocations_left > 0)
        allocations_left--;
    if (size > SIZE_MAX - sizeof *h)
        return NULL;
    h = malloc(sizeof *h + size);
    if (h == NULL)
        return NULL;
    h->size = size;
    if (enc != NULL)
        enc->memory += sizeof *h + size;
    live_bytes += sizeof *h + size;
    return h + 1;
}

/* Frees a block of counted_alloc's charged to enc. */
static void counted_free(struct encoder *enc, void *p)
{
    union block_header *h;

    if (p == NULL)
        return;
    h = (union block_header *)p - 1;
    if (enc != NULL)
        enc->memory -= sizeof *h + h->size;
    live_bytes -= sizeof *h + h->size;
    free(h);
}

/* The three libraries' allocator signatures, over counted_alloc. */
static voidpf zlib_alloc(voidpf opaque, uInt items, uInt size)
{
    if (size != 0 && items > SIZE_MAX / size)
        return Z_NULL;
    return counted_alloc(opaque, (size_t)items * size, true);
}

static void zlib_free(voidpf opaque, voidpf p) { counted_free(opaque, p); }
/* Brotli's encoder (1.0.9 and 1.1 as distributions build them, with
 * BROTLI_ENCODER_EXIT_ON_OOM) calls exit() when one of its blocks cannot
 * be had: only the state's own block, in BrotliEncoderCreateInstance, may
 * fail. The test hook fails no other; a real failure ends the worker
 * (which Linux's overcommit makes unlikely for blocks of these sizes), the
 * master then starting another. */
static void *brotli_alloc(void *opaque, size_t size)
{
    struct encoder *enc = opaque;

    return counted_alloc(enc, size, enc->u.brotli == NULL);
}


static void brotli_free(void *opaque, void *p) { counted_free(opaque, p); }
static void *zstd_alloc(void *opaque, size_t size) { return counted_alloc(opaque, size, true); }
static void zstd_free(void *opaque, void *p) { counted_free(opaque, p); }

const char *encoding_name(enum encoding encoding)
{
    switch (encoding) {
    case ENCODING_GZIP: return "gzip";
    case ENCODING_BR: return "br";
    case ENCODING_ZSTD: return "zstd";
    case ENCODING_NONE: break;
    }
    return "identity";
}

struct encoder_params encoder_defaults(enum encoding encoding)
{
    struct encoder_params none = { 0, 0, 0 };

    return encoding == ENCODING_NONE ? none : defaults[encoding];
}

/* Starts zlib with the gzip wrapper (windowBits + 16). Returns 0 or -1. */
static int start_gzip(struct encoder *enc, const struct encoder_params *p)
{
    enc->u.zlib.zalloc = zlib_alloc;
    enc->u.zlib.zfree = zlib_free;
    enc->u.zlib.opaque = enc;
    if (p->window_log < 9 || p->window_log > 15 || p->mem_level < 1 || p->mem_level > 9)
        return -1;
    return deflateInit2(&enc->u.zlib, p->level, Z_DEFLATED, p->window_log + 16, p->mem_level,
                        Z_DEFAULT_STRATEGY) == Z_OK ? 0 : -1;
}

/* Starts a Brotli encoder with quality and lgwin. Returns 0 or -1. */
static int start_brotli(struct encoder *enc, const struct encoder_params *p)
{
    BrotliEncoderState *s = BrotliEncoderCreateInstance(brotli_alloc, brotli_free, enc);

    if (s == NULL)
        return -1;
    enc->u.brotli = s;
    if (p->window_log > BROTLI_MAX_WINDOW_BITS)
        return -1; /* the large-window extension is not HTTP's Brotli */
    if (!BrotliEncoderSetParameter(s, BROTLI_PARAM_QUALITY, (uint32_t)p->level) ||
        !BrotliEncoderSetParameter(s, BROTLI_PARAM_LGWIN, (uint32_t)p->window_log) ||
        p->level < BROTLI_MIN_QUALITY || p->level > BROTLI_MAX_QUALITY ||
        p->window_log < BROTLI_MIN_WINDOW_BITS)
        return -1;
    return 0;
}

/* Starts a zstd stream with level and windowLog. Returns 0 or -1. */
static int start_zstd(struct encoder *enc, const struct encoder_params *p)
{
    ZSTD_customMem mem = { zstd_alloc, zstd_free, enc };
    ZSTD_CCtx *c = ZSTD_createCCtx_advanced(mem);

    if (c == NULL)
        return -1;
    enc->u.zstd = c;
    if (ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, p->level)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, p->window_log)) ||
        /* The level's tables sized for a source as large as the window
         * (otherwise level 3 keeps its 512 KiB hash table whatever the
         * window). */
        ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_srcSizeHint, 1 << p->window_log)))
        return -1;
    return 0;
}

/* Frees what the library of enc holds (whatever start_* got done). */
static void stop(struct encoder *enc)
{
    switch (enc->encoding) {
    case ENCODING_GZIP:
        if (enc->u.zlib.state != NULL)
            deflateEnd(&enc->u.zlib);
        break;
    case ENCODING_BR:
        if (enc->u.brotli != NULL)
            BrotliEncoderDestroyInstance(enc->u.brotli);
        break;
    case ENCODING_ZSTD:
        ZSTD_freeCCtx(enc->u.zstd);
        break;
    case ENCODING_NONE:
        break;
    }
}

struct encoder *encoder_new_params(enum encoding encoding, const struct encoder_params *params)
{
    struct encoder *enc;
    int rc = -1;

    if (encoding != ENCODING_GZIP && encoding != ENCODING_BR && encoding != ENCODING_ZSTD)
        return NULL;
    enc = counted_alloc(NULL, sizeof *enc, true);
    if (enc == NULL)
        return NULL;
    *enc = (struct encoder){ .encoding = encoding, .memory = sizeof(union block_header) + sizeof *enc };
    live_count++;
    switch (encoding) {
    case ENCODING_GZIP: rc = start_gzip(enc, params); break;
    case ENCODING_BR: rc = start_brotli(enc, params); break;
    case ENCODING_ZSTD: rc = start_zstd(enc, params); break;
    case ENCODING_NONE: break;
    }
    if (rc == -1) {
        encoder_free(enc);
        return NULL;
    }
    return enc;
}

struct encoder *encoder_new(enum encoding encoding)
{
    struct encoder_params params = encoder_defaults(encoding);

    return encoder_new_params(encoding, &params);
}

/* Appends n bytes of step to out. Returns 0 or -1. (buffer_append is not
 * called for nothing: an empty buffer has no data to add 0 to.) */
static int append(struct buffer *out, const void *step, size_t n)
{
    return n == 0 ? 0 : buffer_append(out, step, n);
}

/* Runs deflate over in with flush (Z_NO_FLUSH, Z_SYNC_FLUSH, Z_FINISH)
 * until it has taken all of in and, when flushing, said all it has.
 * Returns 0 or -1. */
static int run_gzip(struct encoder *enc, const void *in, size_t len, int flush, struct buffer *out)
{
    z_stream *z = &enc->u.zlib;
    unsigned char step[STEP];
    const unsigned char *next = in;

    for (;;) {
        int rc;
        size_t take = len > UINT_MAX ? UINT_MAX : len;

        z->next_in = (Bytef *)next;
        z->avail_in = (uInt)take;
        z->next_out = step;
        z->avail_out = sizeof step;
        /* zlib's avail_in is 32 bits: a last flush only once all is in. */
        rc = deflate(z, take == len ? flush : Z_NO_FLUSH);
        if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
            return -1;
        next += take - z->avail_in;
        len -= take - z->avail_in;
        if (append(out, step, sizeof step - z->avail_out) == -1)
            return -1;
        if (rc == Z_STREAM_END)
            return 0;
        /* Room left in step: deflate has said all it has for this flush. */
        if (len == 0 && z->avail_out != 0 && flush != Z_FINISH)
            return 0;
    }
}

/* Runs the Brotli encoder over in with op until it has taken all of in
 * and has no more output (for FINISH: until the stream is finished).
 * Returns 0 or -1. */
static int run_brotli(struct encoder *enc, const void *in, size_t len, BrotliEncoderOperation op,
                      struct buffer *out)
{
    const uint8_t *next = in;
    uint8_t step[STEP];

    for (;;) {
        uint8_t *next_out = step;
        size_t avail_out = sizeof step;

        if (!BrotliEncoderCompressStream(enc->u.brotli, op, &len, &next, &avail_out, &next_out, NULL))
            return -1;
        if (append(out, step, sizeof step - avail_out) == -1)
            return -1;
        if (len == 0 && !BrotliEncoderHasMoreOutput(enc->u.brotli) &&
            (op != BROTLI_OPERATION_FINISH || BrotliEncoderIsFinished(enc->u.brotli)))
            return 0;
    }
}

/* Runs ZSTD_compressStream2 over in with mode until it has taken all of
 * in and, for a flush or the end, returned 0 (all output given). Returns 0
 * or -1. */
static int run_zstd(struct encoder *enc, const void *in, size_t len, ZSTD_EndDirective mode,
                    struct buffer *out)
{
    ZSTD_inBuffer input = { in, len, 0 };
    char step[STEP];

    for (;;) {
        ZSTD_outBuffer output = { step, sizeof step, 0 };
        size_t left = ZSTD_compressStream2(enc->u.zstd, &output, &input, mode);

        if (ZSTD_isError(left))
            return -1;
        if (append(out, step, output.pos) == -1)
            return -1;
        if (input.pos == input.size && (mode == ZSTD_e_continue || left == 0))
            return 0;
    }
}

/* What encoder_write, encoder_flush and encoder_finish share: in goes
 * through with action 0 (write), 1 (flush) or 2 (finish). */
static int encode(struct encoder *enc, const void *in, size_t len, int action, struct buffer *out)
{
    static const int zlib_flush[] = { Z_NO_FLUSH, Z_SYNC_FLUSH, Z_FINISH };
    static const BrotliEncoderOperation brotli_op[] = {
        BROTLI_OPERATION_PROCESS, BROTLI_OPERATION_FLUSH, BROTLI_OPERATION_FINISH };
    static const ZSTD_EndDirective zstd_mode[] = { ZSTD_e_continue, ZSTD_e_flush, ZSTD_e_end };
    int rc = -1;

    if (enc->broken || enc->finished)
        return -1;
    switch (enc->encoding) {
    case ENCODING_GZIP: rc = run_gzip(enc, in, len, zlib_flush[action], out); break;
    case ENCODING_BR: rc = run_brotli(enc, in, len, brotli_op[action], out); break;
    case ENCODING_ZSTD: rc = run_zstd(enc, in, len, zstd_mode[action], out); break;
    case ENCODING_NONE: break;
    }
    if (rc == -1)
        enc->broken = true;
    else if (action == 2)
        enc->finished = true;
    return rc;
}

int encoder_write(struct encoder *enc, const void *in, size_t len, struct buffer *out)
{
    if (len == 0)
        return enc->broken || enc->finished ? -1 : 0;
    return encode(enc, in, len, 0, out);
}

int encoder_flush(struct encoder *enc, struct buffer *out)
{
    return encode(enc, "", 0, 1, out);
}

int encoder_finish(struct encoder *enc, struct buffer *out)
{
    return encode(enc, "", 0, 2, out);
}

void encoder_free(struct encoder *enc)
{
    if (enc == NULL)
        return;
    stop(enc);
    live_count--;
    counted_free(NULL, enc);
}

size_t encoder_memory(const struct encoder *enc)
{
    return enc->memory;
}

void encoder_totals(size_t *count, size_t *bytes)
{
    *count = live_count;
    *bytes = live_bytes;
}

void encoder_fail_allocations_after(long after)
{
    allocations_left = after < 0 ? -1 : after;
}
