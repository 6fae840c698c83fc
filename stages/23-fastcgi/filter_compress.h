/* filter_compress.h -- compression on the way out (chapter 21): a body
 * filter that encodes a response in the best coding the client accepts
 * (gzip, br or zstd, encoder.h), for proxied responses and files alike.
 *
 * Which coding the client accepts is read with the request's head (which
 * is gone when the response starts) into the exchange; whether a response
 * is compressed is decided on its final head: a 200 to a request other
 * than HEAD, of a compressible type, not already encoded, without
 * Cache-Control: no-transform, and not shorter than min_length when its
 * length is known. The filter edits the head (Content-Encoding, Vary,
 * no Content-Length nor Accept-Ranges, a weak ETag), encodes each piece
 * of the body as it passes, flushes the encoder at the end of each batch
 * (the client decodes what the backend sent so far) and ends the stream
 * with the body. Its output goes straight to the client's queue, so the
 * producer's usual backpressure bounds what waits; the encoder itself is
 * bounded by its window (encoder.c). Counted in the shared stats: each
 * compressed response by coding, the bytes before and after, and this
 * process's encoders and their memory. */
#ifndef RSP_FILTER_COMPRESS_H
#define RSP_FILTER_COMPRESS_H

#include "encoder.h"
#include "request.h"
#include "response_head.h"
#include "site_output.h"

struct relay;

/* The coding the client prefers among those of `allowed` (a mask of
 * ENCODING_BIT), from every Accept-Encoding field of the request (taken
 * together, as one list); ENCODING_NONE when it accepts none of them or
 * sent no such field. */
enum encoding filter_compress_accepted(const struct request_view *rq, unsigned allowed);

/* Adds the compression filter to the front of the exchange's chain if the
 * response whose final head is `head` is to be compressed under
 * `settings` (the filter then edits the head when body_filter_head passes
 * it). A filter already in the chain decides again on its own. Returns 0,
 * or -1 if out of memory. */
int filter_compress_attach(struct relay *relay, const struct response_head *head,
                           const struct compress_settings *settings);

#endif
