/* accept_encoding.h -- which content coding a response may be sent in:
 * the client's Accept-Encoding (RFC 9110 12.5.3) against the codings the
 * server is willing to use (br, zstd, gzip), and whether a media type is
 * worth compressing at all (text is, JPEG is not). Used for precompressed
 * files (x.br beside x) and for compressing responses on the way out. */
#ifndef RSP_ACCEPT_ENCODING_H
#define RSP_ACCEPT_ENCODING_H

#include <stdbool.h>
#include <stddef.h>

/* The codings rsp sends; CODING_NONE is the response as it is. The
 * server's allowed set is a mask of CODING_BIT(coding). */
enum content_coding { CODING_NONE, CODING_BR, CODING_ZSTD, CODING_GZIP };
#define CODING_BIT(coding) (1u << (coding))
#define CODING_ALL (CODING_BIT(CODING_BR) | CODING_BIT(CODING_ZSTD) | CODING_BIT(CODING_GZIP))

/* The coding the client prefers among those allowed (a mask of CODING_BIT)
 * given its Accept-Encoding value (length bytes at value; NULL: no such
 * header): the highest q above 0, a listed coding's own q else that of
 * `*`, ties br > zstd > gzip; x-gzip counts as gzip. An entry with a q
 * that is not 0..1 with at most three decimals is ignored, as are other
 * parameters and codings rsp does not know. CODING_NONE when nothing
 * allowed is acceptable, and always for an absent header. */
enum content_coding accept_encoding_choose(const char *value, size_t length, unsigned allowed);

/* "br", "zstd" or "gzip": the Content-Encoding value; NULL for CODING_NONE. */
const char *content_coding_name(enum content_coding coding);

/* ".br", ".zst" or ".gz": the precompressed file's suffix; NULL for CODING_NONE. */
const char *content_coding_file_suffix(enum content_coding coding);

/* "-br", "-zst" or "-gz": what a precompressed file's ETag gets inside its
 * quotes; NULL for CODING_NONE. */
const char *content_coding_etag_suffix(enum content_coding coding);

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
