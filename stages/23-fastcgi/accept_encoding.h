/* accept_encoding.h -- which content coding a response may be sent in:
 * the client's Accept-Encoding (RFC 9110 12.5.3) against the codings the
 * server is willing to use (br, zstd, gzip), and whether a media type is
 * worth compressing at all (text is, JPEG is not). Used for precompressed
 * files (x.br beside x) and for compressing responses on the way out. */
#ifndef RSP_ACCEPT_ENCODING_H
#define RSP_ACCEPT_ENCODING_H

#include "encoder.h"

#include <stdbool.h>
#include <stddef.h>

/* The codings are encoder.h's enum encoding (ENCODING_NONE: the response
 * as it is). The server's allowed set is a mask of ENCODING_BIT(encoding). */
#define ENCODING_BIT(encoding) (1u << (encoding))
#define ENCODING_ALL (ENCODING_BIT(ENCODING_BR) | ENCODING_BIT(ENCODING_ZSTD) | ENCODING_BIT(ENCODING_GZIP))

/* The coding the client prefers among those allowed (a mask of ENCODING_BIT)
 * given its Accept-Encoding value (length bytes at value; NULL: no such
 * header): the highest q above 0, a listed coding's own q else that of
 * `*`, ties br > zstd > gzip; x-gzip counts as gzip. An entry with a q
 * that is not 0..1 with at most three decimals is ignored, as are other
 * parameters and codings rsp does not know. ENCODING_NONE when nothing
 * allowed is acceptable, and always for an absent header. */
enum encoding accept_encoding_choose(const char *value, size_t length, unsigned allowed);

/* ".br", ".zst" or ".gz": the precompressed file's suffix; NULL for
 * ENCODING_NONE. (The Content-Encoding value is encoding_name's.) */
const char *encoding_file_suffix(enum encoding encoding);

/* "-br", "-zst" or "-gz": what a precompressed file's ETag gets inside its
 * quotes; NULL for ENCODING_NONE. */
const char *encoding_etag_suffix(enum encoding encoding);

/* Whether the media type of a Content-Type value (length bytes; its
 * parameters ignored, compared case-insensitively) is in types: count
 * patterns, each a media type ("application/json"), a type with any
 * subtype ("text" then a slash and a star) or a type with any subtype
 * ending in a suffix ("application", slash, star, "+json"). With count 0
 * the default list applies (default_types in accept_encoding.c: text of
 * every kind, JSON, JavaScript, XML, wasm, SVG, and every +json and +xml
 * type such as application/ld+json and application/rss+xml). */
bool media_type_compressible(const char *content_type, size_t length, char **types, size_t count);

#endif
