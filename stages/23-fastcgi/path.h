/* path.h -- the path of a request target, in the one spelling that rules
 * match against, and that the backend receives.
 *
 * "/static/x", "/%73tatic/x", "/a/../static/x" and "//static/x" all name
 * the same file to most backends. A rule written against one spelling must
 * not be dodged with another, so route() sees paths in a normal form. */
#ifndef RSP_PATH_H
#define RSP_PATH_H

#include <stddef.h>

/* Writes the normal form of the path `in` (in_length bytes; the part of a
 * target before any '?') to out, which must have room for 3 * in_length bytes,
 * and returns its length. The normal form:
 *   - percent-escapes of unreserved characters (A-Z a-z 0-9 - . _ ~) are
 *     decoded; other escapes keep their meaning and get upper-case hex
 *     digits ("%2f" becomes "%2F", never "/"); a '%' not followed by two
 *     hex digits is written "%25", the escape of '%' itself;
 *   - runs of '/' become one '/';
 *   - "." segments are removed, and ".." removes the segment before it
 *     (never climbing above the root);
 *   - a path that does not begin with '/' ("*", "host:443") is copied as
 *     it is.
 * Normalizing a normal form changes nothing. */
size_t path_normalize(const char *in, size_t in_length, char *out);

#endif
