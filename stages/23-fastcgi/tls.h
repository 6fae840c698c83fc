/* tls.h -- HTTPS: the certificates a config serves, and the transport
 * that speaks TLS over a client's socket (chapter 14).
 *
 * A config generation loads its certificates into a tls_context: one
 * OpenSSL SSL_CTX per certificate, all set up alike (TLS 1.2 and 1.3,
 * Mozilla's "intermediate" ciphers, ALPN h2 then http/1.1, session tickets). The
 * first certificate is the default; during the handshake the name the
 * client asks for (SNI) picks the certificate whose names match it. A
 * reload loads a new context, so renewed files are read again; a
 * connection keeps the SSL_CTX it began with (OpenSSL counts references),
 * whatever happens to its generation. */
#ifndef RSP_TLS_H
#define RSP_TLS_H

#include <stdbool.h>
#include <stddef.h>

struct connection;
struct tls_context;

/* One certificate of the `tls.certificates` setting. */
struct tls_files {
    const char *cert;           /* PEM: the certificate, then its chain */
    const char *key;            /* PEM: its private key */
};

/* Loads count certificates into a new context (count 0: none
 * yet, every certificate comes from tls.acme). Checks each:
 * files readable and PEM, the key matches the certificate; an expired (or
 * not yet valid) certificate is loaded with a warning. Messages are config
 * errors: "rsp: PATH: setting 'tls.certificates[N].cert': ...". Returns
 * the context, or NULL after printing what is wrong. */
struct tls_context *tls_context_load(const char *path, const struct tls_files *files, size_t count);

/* True if a certificate of t covers name (lower case), exactly or by a
 * wildcard. */
bool tls_context_covers(const struct tls_context *t, const char *name);

/* Frees the context (connections still using its SSL_CTXs keep them). */
void tls_context_free(struct tls_context *t);

/* Puts TLS under c, a client connection just accepted: the handshake
 * happens in the first reads (and writes) through it; with http2 (the
 * setting tls.http2) ALPN offers h2 before http/1.1. Returns 0, or -1 if
 * out of memory (c is left plain and should be closed). */
int tls_attach(struct connection *c, struct tls_context *t, bool http2);

/* Puts TLS in client mode under c, a connection rsp opened itself (its
 * connect done) to `host`: a DNS name, or an IPv4 or IPv6 address
 * without brackets. The handshake starts with the first write. TLS 1.2
 * or later; SNI names a DNS host; the server's certificate must chain to
 * one of the system's CAs or, if ca_file is not NULL, to one in that PEM
 * file, and be for host (name or address). Returns 0, or -1 with why in
 * error (c is left plain and should be closed). */
int tls_attach_client(struct connection *c, const char *host, const char *ca_file, char *error,
                      size_t error_size);

/* Why a client connection (tls_attach_client) failed, in out: the
 * certificate that did not verify ("certificate verify failed: ..."), or
 * OpenSSL's reason. Returns 0, or -1 if TLS has nothing to say (the
 * socket's errno does). */
int tls_client_error(const struct connection *c, char *out, size_t size);

/* True if c's TLS handshake has completed (false for a plain one). */
bool tls_established(const struct connection *c);

/* True if c's handshake chose ALPN h2: the client speaks HTTP/2. */
bool tls_chose_h2(const struct connection *c);

#endif
