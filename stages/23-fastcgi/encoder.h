/* encoder.h -- streaming compressors behind one interface: gzip (zlib,
 * gzip wrapper), br (Brotli) and zstd (Zstandard).
 *
 * An encoder takes a response body in pieces and appends the compressed
 * bytes to a struct buffer. encoder_flush makes everything written so far
 * decodable by the client at once (for a slow backend, the client sees
 * each batch as it comes); encoder_finish ends the stream (gzip's trailer,
 * Brotli's last meta-block, zstd's last block).
 *
 * Memory is bounded and counted. Each library allocates through our own
 * functions, which add every block to the encoder's count (encoder_memory)
 * and to the process's totals (encoder_totals: what status.json and
 * /metrics report). The bound comes from the windows and levels chosen in
 * encoder.c, measured with bench/compress: a Brotli encoder left at its
 * default window (4 MiB) would hold several MiB per connection.
 *
 * Every function that returns int returns 0, or -1 when memory ran out or
 * the library failed; after -1 the encoder is unusable (every later call
 * returns -1) and only encoder_free remains, though what was appended to
 * the buffer before the failure stays there. Writing, flushing or
 * finishing after encoder_finish returns -1 too. */
#ifndef RSP_ENCODER_H
#define RSP_ENCODER_H

#include "buffer.h"

#include <stddef.h>

/* A content coding. The names are the Content-Encoding tokens
 * (encoding_name). */
enum encoding { ENCODING_NONE, ENCODING_GZIP, ENCODING_BR, ENCODING_ZSTD };

struct encoder;

/* What an encoder compresses with. window_log: log2 of the window in
 * bytes (gzip's windowBits 9..15, Brotli's lgwin 10..24, zstd's windowLog
 * 10..); mem_level: zlib's memLevel 1..9 (gzip only). */
struct encoder_params {
    int level;
    int window_log;
    int mem_level;
};

/* "gzip", "br" or "zstd"; "identity" for ENCODING_NONE. */
const char *encoding_name(enum encoding encoding);

/* rsp's parameters for an encoding (the defaults chosen in encoder.c). */
struct encoder_params encoder_defaults(enum encoding encoding);

/* A new encoder of that kind with rsp's parameters. Returns NULL when
 * memory ran out or encoding is ENCODING_NONE. */
struct encoder *encoder_new(enum encoding encoding);

/* The same with the caller's parameters (bench/compress compares them).
 * Returns NULL when memory ran out or a parameter is out of range. */
struct encoder *encoder_new_params(enum encoding encoding, const struct encoder_params *params);

/* Compresses len bytes of in, appending to out what the library has ready
 * (it may keep some input back until a flush or the finish). One call
 * appends at most about what it was given plus what earlier calls held
 * back, which the window bounds: never an unbounded amount. */
int encoder_write(struct encoder *enc, const void *in, size_t len, struct buffer *out);

/* Appends to out everything needed for the client to decode all the bytes
 * written so far (zlib's Z_SYNC_FLUSH, BROTLI_OPERATION_FLUSH,
 * ZSTD_e_flush). The stream goes on. */
int encoder_flush(struct encoder *enc, struct buffer *out);

/* Ends the stream: appends what is left and the end (gzip's CRC and size
 * trailer). Nothing may be written afterwards. */
int encoder_finish(struct encoder *enc, struct buffer *out);

/* Frees the encoder and everything its library holds (NULL is fine). */
void encoder_free(struct encoder *enc);

/* Bytes this encoder holds now: its own struct and its library's blocks. */
size_t encoder_memory(const struct encoder *enc);

/* Encoders alive in this process, and the bytes they hold between them. */
void encoder_totals(size_t *count, size_t *bytes);

/* A test hook: the allocation after the next `after` ones fails (and
 * every one after it), as if memory ran out; -1 turns failures off. */
void encoder_fail_allocations_after(long after);

#endif
