/* tls_private.h -- what tls.c gives tls_transport.c. */
#ifndef RSP_TLS_PRIVATE_H
#define RSP_TLS_PRIVATE_H

#include "tls.h"

#include <openssl/ssl.h>

/* The context of the first (the default) certificate: every connection
 * starts on it, and SNI may move it to another. */
SSL_CTX *tls_default_ctx(struct tls_context *t);

#endif
