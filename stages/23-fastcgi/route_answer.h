/* route_answer.h -- the response a route function may return, checked and
 * written out as HTTP. */
#ifndef RSP_ROUTE_ANSWER_H
#define RSP_ROUTE_ANSWER_H

#include "buffer.h"

#include <lua.h>
#include <stdbool.h>
#include <stddef.h>

/* Reads the response table at stack index `index` of L:
 *   { status = 200..599, location = "...", headers = { NAME = VALUE, ... },
 *     body = "..." }
 * where a VALUE is a string, a number or a list of strings (one header line
 * each), and writes the complete HTTP response into out (empty before) as
 * reply_append does: the body is left out for a HEAD request (head_only),
 * `connection` is its Connection header line. Without a body, a status of 300 or more
 * gets a short HTML page; 204 and 304 never have one. Raises a Lua error
 * that says what is wrong with the table (must run in a protected call);
 * out may then hold part of a response. */
void route_answer_write(lua_State *L, int index, bool head_only, const char *connection,
                        struct buffer *out);

/* True if s (length bytes) is a token (RFC 9110, section 5.6.2): a header
 * name. */
bool route_answer_is_token(const char *s, size_t length);

/* True if s (length bytes) may be a header's value: visible characters,
 * spaces, tabs and bytes of 0x80 and up; no other control characters (CR,
 * LF and NUL above all). The config's `headers` are checked alike. */
bool route_answer_is_field_value(const char *s, size_t length);

#endif
