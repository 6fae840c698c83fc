/* tls_client.c -- TLS in client mode, for the connections rsp opens
 * itself (http_client.c, the ACME client's requests): the context that
 * trusts the system's CAs and an optional extra root, and the checks on
 * the server's certificate. The transport is tls_transport.c's, the same
 * one the HTTPS listener uses. */
#include "tls.h"
#include "tls_private.h"

#include "connection.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The client context in use: made for one extra root file (or none) as
 * it was when read. Loading the system's CAs takes milliseconds, so it is
 * made again only when the file asked for, or the file itself, changes;
 * connections keep the context they began with (OpenSSL counts). */
static struct {
    SSL_CTX *ctx;
    char *ca_file;              /* NULL: the system's CAs alone */
    struct stat file;           /* ca_file's identity when it was loaded */
} current;

/* The reason OpenSSL gave for its last error, for a message. */
static const char *openssl_reason(void)
{
    unsigned long e = ERR_peek_last_error();
    const char *reason = e != 0 ? ERR_reason_error_string(e) : NULL;

    return reason != NULL ? reason : "unknown error";
}

/* True if the context in use was made from ca_file as it is now (st). */
static bool current_fits(const char *ca_file, const struct stat *st)
{
    if (current.ctx == NULL || (ca_file == NULL) != (current.ca_file == NULL))
        return false;
    if (ca_file == NULL)
        return true;
    return strcmp(ca_file, current.ca_file) == 0 && st->st_dev == current.file.st_dev &&
           st->st_ino == current.file.st_ino && st->st_size == current.file.st_size &&
           st->st_mtim.tv_sec == current.file.st_mtim.tv_sec &&
           st->st_mtim.tv_nsec == current.file.st_mtim.tv_nsec;
}

/* A new client context trusting the system's CAs and those of ca_file.
 * Returns it, or NULL with why in error. */
static SSL_CTX *new_client_context(const char *ca_file, char *error, size_t size)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

    if (ctx == NULL || SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
        SSL_CTX_set_default_verify_paths(ctx) != 1) {
        snprintf(error, size, "cannot set up TLS: %s", openssl_reason());
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (ca_file != NULL && SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
        snprintf(error, size, "cannot load the CA file %s: %s", ca_file, openssl_reason());
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    /* As for the listener's: partial writes from a queue that may move. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    return ctx;
}

/* The client context for ca_file (NULL: none), made if need be. Returns
 * it, or NULL with why in error. */
static SSL_CTX *client_context(const char *ca_file, char *error, size_t size)
{
    struct stat st = { 0 };
    char *copy = NULL;
    SSL_CTX *ctx;

    if (ca_file != NULL && stat(ca_file, &st) == -1) {
        snprintf(error, size, "cannot read the CA file %s: %s", ca_file, strerror(errno));
        return NULL;
    }
    if (current_fits(ca_file, &st))
        return current.ctx;
    if (ca_file != NULL && (copy = strdup(ca_file)) == NULL) {
        snprintf(error, size, "out of memory");
        return NULL;
    }
    ctx = new_client_context(ca_file, error, size);
    if (ctx == NULL) {
        free(copy);
        ERR_clear_error();
        return NULL;
    }
    SSL_CTX_free(current.ctx);
    free(current.ca_file);
    current.ctx = ctx;
    current.ca_file = copy;
    current.file = st;
    return ctx;
}

/* True if host is an IPv4 or IPv6 address rather than a name. */
static bool is_address(const char *host)
{
    unsigned char address[sizeof(struct in6_addr)];

    return inet_pton(AF_INET, host, address) == 1 || inet_pton(AF_INET6, host, address) == 1;
}

/* Sets ssl up to talk to host: SNI and the name the certificate must
 * have, or the address it must have. Returns 0, or -1. */
static int set_peer(SSL *ssl, const char *host)
{
    if (is_address(host)) /* no SNI for an address (RFC 6066, 3) */
        return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1 ? 0 : -1;
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (SSL_set_tlsext_host_name(ssl, host) != 1 || SSL_set1_host(ssl, host) != 1)
        return -1;
    return 0;
}

int tls_attach_client(struct connection *c, const char *host, const char *ca_file, char *error,
                      size_t error_size)
{
    SSL_CTX *ctx = client_context(ca_file, error, error_size);
    SSL *ssl;

    if (ctx == NULL)
        return -1;
    ssl = SSL_new(ctx);
    if (ssl == NULL || set_peer(ssl, host) == -1 || tls_transport_set(c, ssl) == -1) {
        snprintf(error, error_size, "cannot set up TLS for %s: %s", host, openssl_reason());
        SSL_free(ssl);
        ERR_clear_error();
        return -1;
    }
    SSL_set_connect_state(ssl);
    return 0;
}
