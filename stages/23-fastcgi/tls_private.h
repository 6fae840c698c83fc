/* tls_private.h -- what tls.c and tls_client.c share with tls_transport.c. */
#ifndef RSP_TLS_PRIVATE_H
#define RSP_TLS_PRIVATE_H

#include "tls.h"

#include <openssl/ssl.h>

/* The context of the first (the default) certificate: every connection
 * starts on it, and SNI may move it to another. */
SSL_CTX *tls_default_ctx(struct tls_context *t);

/* Makes ssl (set up for c's socket's end, server or client) c's
 * transport; c frees it on close. Returns 0, or -1 if OpenSSL failed (c
 * is left as it was, and ssl the caller's). */
int tls_transport_set(struct connection *c, SSL *ssl);

/* True if ssl, a client's connection, may choose ALPN h2 (tls_attach). */
bool tls_offers_h2(const SSL *ssl);

/* A new server context with everything but the certificate: versions,
 * ciphers, ALPN h2 then http/1.1, session tickets. NULL if OpenSSL fails. */
SSL_CTX *tls_new_server_ctx(void);

#endif
