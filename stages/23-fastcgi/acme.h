/* acme.h -- ACME http-01 challenges, answered from a directory.
 *
 * To prove that a name is ours, an ACME server (Let's Encrypt) fetches
 * http://NAME/.well-known/acme-challenge/TOKEN over plain HTTP; certbot
 * --webroot -w DIR has written the expected answer to
 * DIR/.well-known/acme-challenge/TOKEN. rsp serves exactly those files
 * (config acme_webroot), and nothing else from that directory. */
#ifndef RSP_ACME_H
#define RSP_ACME_H

#include "buffer.h"

#include <stdbool.h>
#include <stddef.h>

#define ACME_PREFIX "/.well-known/acme-challenge/"

/* True if path (length bytes, in normal form) is under ACME_PREFIX. */
bool acme_path(const char *path, size_t length);

/* Appends the whole answer to a request for path (acme_path is true) to
 * out: 200 with the token file's bytes as application/octet-stream, if
 * the method is GET or HEAD (head_only), the token is of the RFC 8555
 * alphabet and webroot/.well-known/acme-challenge/TOKEN is a regular file
 * reached without following a symbolic link; 405 for another method; 404
 * for anything else. `connection` is the Connection line (reply.h).
 * Returns 0, or -1 if out of memory. */
int acme_answer(const char *webroot, const char *path, size_t length, bool get_or_head,
                bool head_only, const char *connection, struct buffer *out);

#endif
