/* conditional.h -- the validators of a file response and the requests that
 * use them (RFC 9110 8.8, 13, 14): the ETag rsp makes from a file's
 * modification time and size, the If-Match / If-None-Match /
 * If-Modified-Since / If-Unmodified-Since evaluation that turns a request
 * into 304 or 412, and Range with If-Range (one range, or none).
 *
 * Header values come as (pointer, length) spans into the request buffer,
 * never NUL-terminated; a NULL pointer means the header is absent. */
#ifndef RSP_CONDITIONAL_H
#define RSP_CONDITIONAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Room for the longest ETag: quotes, 16 + 1 + 16 hex digits, a suffix of
 * up to 8 bytes, and a NUL. */
#define ETAG_SIZE 48

/* Writes the strong ETag "<mtime hex>-<size hex><suffix>" (quotes
 * included; suffix "-br" and the like for a precompressed variant, NULL
 * for none, at most 8 bytes of etagc) and a NUL to out; returns its
 * length. */
size_t etag_format(char out[ETAG_SIZE], time_t mtime, uint64_t size, const char *suffix);

/* Whether the entity-tag list of an If-Match (weak false: strong
 * comparison) or If-None-Match (weak true) value holds a tag that matches
 * etag (a whole entity-tag, "..." or W/"...", etag_length bytes). A value
 * that is just `*` matches any etag. Entries after a malformed one are not
 * read (a malformed list matches only through what came before). */
bool etag_list_match(const char *list, size_t length, const char *etag, size_t etag_length,
                     bool weak);

/* The conditional headers of a request, as spans (NULL: absent). */
struct conditional_headers {
    const char *if_match; size_t if_match_length;
    const char *if_none_match; size_t if_none_match_length;
    const char *if_modified_since; size_t if_modified_since_length;
    const char *if_unmodified_since; size_t if_unmodified_since_length;
};

enum conditional_outcome {
    CONDITIONAL_PROCEED,             /* answer as if unconditional (200, or a Range's 206/416) */
    CONDITIONAL_NOT_MODIFIED,        /* 304 */
    CONDITIONAL_PRECONDITION_FAILED, /* 412 */
};

/* Evaluates the headers against the representation (etag, and mtime, its
 * Last-Modified) in RFC 9110 13.2.2's order: If-Match (no strong match:
 * 412), else If-Unmodified-Since (a valid date before mtime: 412);
 * If-None-Match (a weak match: 304 for GET and HEAD, 412 for any other
 * method); else, for GET and HEAD, If-Modified-Since (a valid date not
 * before mtime: 304). Invalid dates are ignored. */
enum conditional_outcome conditional_evaluate(const struct conditional_headers *headers,
                                              bool get_or_head, const char *etag,
                                              size_t etag_length, time_t mtime);

enum range_outcome {
    RANGE_IGNORE,        /* no Range, or one rsp ignores: send the whole (200) */
    RANGE_ONE,           /* one satisfiable range: 206 with *first..*last */
    RANGE_UNSATISFIABLE, /* 416, its Content-Range naming only the size */
};

/* Reads a Range value (length bytes; NULL: absent) against a
 * representation of size bytes: "bytes=" (unit case-insensitive) and
 * exactly one range-spec, first-last, first- or -suffix, with optional
 * whitespace around commas and empty list elements. On RANGE_ONE,
 * *first <= *last < size (last clamped to size - 1, a suffix longer than
 * the file is the whole file). RANGE_UNSATISFIABLE when first >= size or
 * the suffix is 0 (every range of an empty file). Several ranges, another
 * unit, last < first or any syntax error: RANGE_IGNORE. */
enum range_outcome range_parse(const char *value, size_t length, uint64_t size, uint64_t *first,
                               uint64_t *last);

/* Whether an If-Range value (length bytes; NULL: absent, which holds)
 * lets the Range apply: an entity-tag that matches etag strongly, or an
 * HTTP-date equal to mtime. Anything else (a weak tag, another date,
 * garbage) does not hold: the whole representation is sent. */
bool if_range_holds(const char *value, size_t length, const char *etag, size_t etag_length,
                    time_t mtime);

#endif
