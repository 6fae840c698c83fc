/* reply.h -- the answers rsp gives by itself, when it cannot or will not
 * forward a request. */
#ifndef RSP_REPLY_H
#define RSP_REPLY_H

#include "connection.h"

#include <stdbool.h>
#include <stddef.h>

/* The reason phrase for a status code ("Not Found"), or "" for a code
 * without a registered one (HTTP allows an empty phrase). */
const char *reply_reason(int status);

/* Writes a short HTML page for status to out (size bytes), with a sentence
 * of explanation if that is not NULL. Returns its length (at most
 * size - 1; size 1024 is plenty). */
size_t reply_page(char *out, size_t size, int status, const char *explanation);

/* Writes a complete response with the given status and a short HTML body
 * to out (size bytes; 1536 is plenty), with Connection: close, and Allow
 * for a 405. For a HEAD request (head_only) the headers are the same but
 * the body is left out, as HTTP requires. Returns its length. */
size_t reply_format(char *out, size_t size, int status, bool head_only);

/* Queues a complete response with the given status (400, 414, 421, 431,
 * 405, 500, 502, 505, ...) on c, as reply_format writes it. */
void reply_error(struct connection *c, int status, bool head_only);

#endif
