/* reply.h -- the answers rsp gives by itself, when it cannot or will not
 * forward a request. */
#ifndef RSP_REPLY_H
#define RSP_REPLY_H

#include "connection.h"

#include <stdbool.h>
#include <stddef.h>

/* Writes a complete response with the given status (400, 405, 414, 421,
 * 431, 502, 503, 505) and a short HTML body to out (size bytes; 1024 is
 * plenty), with Connection: close, and Allow for a 405. For a HEAD request
 * (head_only) the headers are the same but the body is left out, as HTTP
 * requires. Returns its length. */
size_t reply_format(char *out, size_t size, int status, bool head_only);

/* Queues a complete response with the given status on c, as reply_format
 * writes it. */
void reply_error(struct connection *c, int status, bool head_only);

#endif
