/* reply.h -- the answers rsp gives by itself, when it cannot or will not
 * forward a request. */
#ifndef RSP_REPLY_H
#define RSP_REPLY_H

#include "connection.h"

#include <stdbool.h>

/* Queues a complete response with the given status (400, 414, 421, 431,
 * 502, 505, ...) and a short HTML body on c, with Connection: close. For
 * a HEAD request (head_only) the headers are the same but the body is left
 * out, as HTTP requires. */
void reply_error(struct connection *c, int status, bool head_only);

#endif
