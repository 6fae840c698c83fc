/* tls_transport.c -- the TLS transport: OpenSSL over a non-blocking
 * socket.
 *
 * OpenSSL does the socket I/O itself. When it cannot go on it says which
 * way the socket must become ready: SSL_ERROR_WANT_READ or
 * SSL_ERROR_WANT_WRITE. Usually that is the way we were going anyway; when
 * it is not (a read that must first write a handshake message, a write
 * that must first read one), we set c->transport_wants and the connection
 * watches for the other direction until then (connection.c). The
 * handshake itself needs no code of its own: the first reads drive it, and
 * the relay's header_timeout bounds it like any slow request head.
 *
 * Reads never leave decrypted bytes inside OpenSSL: read-ahead is off, so
 * OpenSSL takes one record at a time from the socket, and every reader
 * passes a buffer of at least one record's plaintext (16 KiB, see
 * RELAY_READ_SIZE). Bytes not read yet therefore wait in the kernel, where
 * epoll sees them, never in OpenSSL, where it would not. */
#include "tls.h"
#include "tls_private.h"

#include "clock.h"
#include "connection.h"
#include "log.h"
#include "stats.h"

#include <openssl/err.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <sys/socket.h>

#define TLS_RECORD_PLAINTEXT 16384
#define FAILURE_REPORT_INTERVAL 1.0 /* seconds between two lines about failed handshakes */

static struct {
    double reported_at;
    unsigned long unreported;
} failures;

/* A handshake failed: a scanner, a client speaking plain HTTP to the
 * HTTPS port, a client that trusts nothing we have. Said at most once a
 * second, with how many more there were, so that a flood of garbage
 * cannot flood the log. */
static void handshake_failed(void)
{
    unsigned long e = ERR_peek_last_error();
    const char *reason = e != 0 ? ERR_reason_error_string(e) : NULL;
    double now = clock_now();

    stats_add_own(&stats_row()->tls_failures, 1);
    if (now - failures.reported_at < FAILURE_REPORT_INTERVAL) {
        failures.unreported++;
        return;
    }
    if (failures.unreported > 0)
        log_msg("TLS handshake failed: %s (and %lu more since the last report)",
                reason != NULL ? reason : "connection closed", failures.unreported);
    else
        log_msg("TLS handshake failed: %s", reason != NULL ? reason : "connection closed");
    failures.reported_at = now;
    failures.unreported = 0;
}

/* True if c's peer had begun a handshake and has not finished it: its
 * end now is a failed handshake. A peer that goes before sending a byte
 * (a port scan, a load balancer's TCP check) never began one. */
static bool handshake_begun(SSL *ssl)
{
    return !SSL_is_init_finished(ssl) && BIO_number_read(SSL_get_rbio(ssl)) > 0;
}

/* A connection of rsp's own (tls_attach_client) failed: OpenSSL's reason
 * is kept in its app data (a static string) for tls_client_error, before
 * the error queue is cleared. */
static void client_failed(SSL *ssl)
{
    unsigned long e = ERR_peek_last_error();
    const char *reason = e != 0 ? ERR_reason_error_string(e) : NULL;

    if (reason != NULL)
        SSL_set_app_data(ssl, (void *)reason);
}

/* The connection failed for good: no close_notify is owed any more (and
 * OpenSSL must not be asked to send one). errno becomes `error`. Bytes
 * that were not TLS (`garbage`) fail a handshake even before it began. */
static ssize_t failed(SSL *ssl, int error, bool garbage)
{
    if (!SSL_is_server(ssl))
        client_failed(ssl); /* rsp's own request: its owner says why */
    else if (handshake_begun(ssl) || (garbage && !SSL_is_init_finished(ssl)))
        handshake_failed();
    SSL_set_quiet_shutdown(ssl, 1);
    ERR_clear_error();
    errno = error;
    return -1;
}

static size_t clamp(size_t len)
{
    return len > INT_MAX ? INT_MAX : len;
}

static ssize_t tls_read(struct connection *c, char *buf, size_t len)
{
    SSL *ssl = c->transport_state;
    bool handshaking = !SSL_is_init_finished(ssl);
    int n, error;

    ERR_clear_error();
    n = SSL_read(ssl, buf, (int)clamp(len));
    c->transport_wants &= ~TRANSPORT_READ_NEEDS_OUT;
    if (handshaking && SSL_is_init_finished(ssl) && SSL_is_server(ssl))
        stats_add_own(&stats_row()->tls_handshakes, 1);
    if (n > 0)
        return n;
    switch (error = SSL_get_error(ssl, n)) {
    case SSL_ERROR_WANT_WRITE:
        c->transport_wants |= TRANSPORT_READ_NEEDS_OUT;
        /* fall through */
    case SSL_ERROR_WANT_READ:
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        /* close_notify, or (SSL_OP_IGNORE_UNEXPECTED_EOF) a plain end of
         * file: in the middle of a handshake, one that failed. */
        if (SSL_is_server(ssl) && handshake_begun(ssl))
            handshake_failed();
        return 0;
    case SSL_ERROR_SYSCALL:
        return failed(ssl, errno != 0 ? errno : ECONNRESET, false);
    default:
        return failed(ssl, EPROTO, true); /* garbage, a failed handshake, a bad record */
    }
}

static ssize_t tls_write(struct connection *c, const char *data, size_t len)
{
    SSL *ssl = c->transport_state;
    int n;

    /* A server speaks first only to say a request timed out or was
     * refused; before the handshake is done there is nobody to say it to.
     * A client's first write starts the handshake (tls_attach_client). */
    if (SSL_is_server(ssl) && !SSL_is_init_finished(ssl)) {
        SSL_set_quiet_shutdown(ssl, 1);
        errno = EPROTO;
        return -1;
    }
    if (len == 0)
        return 0;
    ERR_clear_error();
    n = SSL_write(ssl, data, (int)clamp(len));
    c->transport_wants &= ~TRANSPORT_WRITE_NEEDS_IN;
    if (n > 0)
        return n;
    switch (SSL_get_error(ssl, n)) {
    case SSL_ERROR_WANT_READ:
        c->transport_wants |= TRANSPORT_WRITE_NEEDS_IN;
        return 0;
    case SSL_ERROR_WANT_WRITE:
        return 0;
    case SSL_ERROR_SYSCALL:
        return failed(ssl, errno != 0 ? errno : EPIPE, false);
    default:
        return failed(ssl, EPROTO, true);
    }
}

/* A close_notify alert, then the socket's own FIN. */
static int tls_shutdown(struct connection *c)
{
    SSL *ssl = c->transport_state;
    int rc;

    c->transport_wants &= ~TRANSPORT_WRITE_NEEDS_IN;
    if (SSL_is_init_finished(ssl) && !SSL_get_quiet_shutdown(ssl)) {
        ERR_clear_error();
        rc = SSL_shutdown(ssl);
        if (rc < 0) {
            switch (SSL_get_error(ssl, rc)) {
            case SSL_ERROR_WANT_WRITE:
                return 1;
            case SSL_ERROR_WANT_READ:
                c->transport_wants |= TRANSPORT_WRITE_NEEDS_IN;
                return 1;
            default:
                /* The peer is gone: the FIN below is all that is left. */
                SSL_set_quiet_shutdown(ssl, 1);
                ERR_clear_error();
                break;
            }
        }
    }
    if (shutdown(c->handler.fd, SHUT_WR) == -1 && errno != ENOTCONN)
        return -1;
    return 0;
}

static void tls_release(struct connection *c)
{
    SSL_free(c->transport_state);
}

static const struct transport transport_tls = {
    .name = "tls",
    .read = tls_read,
    .write = tls_write,
    .writev = NULL, /* one record per write: the connection joins pieces first */
    .splice_in = NULL, /* the bytes are encrypted: they pass through rsp */
    .splice_out = NULL,
    .sendfile = NULL, /* likewise: a file's bytes are read and encrypted */
    .shutdown = tls_shutdown,
    .release = tls_release,
};

/* The ex_data slot of a server SSL whose ALPN may choose h2; -1 until
 * the first one is made. */
static int h2_slot = -1;
static char h2_offered; /* what the slot points to when it may */

bool tls_offers_h2(const SSL *ssl)
{
    return h2_slot != -1 && SSL_get_ex_data(ssl, h2_slot) == &h2_offered;
}

int tls_attach(struct connection *c, struct tls_context *t, bool http2)
{
    SSL *ssl = SSL_new(tls_default_ctx(t));

    if (h2_slot == -1)
        h2_slot = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
    if (ssl == NULL || h2_slot == -1 || SSL_set_ex_data(ssl, h2_slot, http2 ? &h2_offered : NULL) != 1 ||
        tls_transport_set(c, ssl) == -1) {
        SSL_free(ssl);
        ERR_clear_error();
        return -1;
    }
    SSL_set_accept_state(ssl);
    return 0;
}

int tls_transport_set(struct connection *c, SSL *ssl)
{
    if (SSL_set_fd(ssl, c->handler.fd) != 1)
        return -1;
    c->transport = &transport_tls;
    c->transport_state = ssl;
    c->transport_wants = 0;
    return 0;
}

int tls_client_error(const struct connection *c, char *out, size_t size)
{
    SSL *ssl = c->transport_state;
    long verified;
    const char *reason;

    if (c->transport != &transport_tls || SSL_is_server(ssl))
        return -1;
    verified = SSL_get_verify_result(ssl);
    reason = SSL_get_app_data(ssl);
    if (verified != X509_V_OK)
        snprintf(out, size, "certificate verify failed: %s", X509_verify_cert_error_string(verified));
    else if (reason != NULL)
        snprintf(out, size, "TLS error: %s", reason);
    else
        return -1;
    return 0;
}

bool tls_established(const struct connection *c)
{
    return c->transport == &transport_tls && SSL_is_init_finished(c->transport_state);
}

bool tls_chose_h2(const struct connection *c)
{
    const unsigned char *protocol;
    unsigned int length;

    if (c->transport != &transport_tls)
        return false;
    SSL_get0_alpn_selected(c->transport_state, &protocol, &length);
    return length == 2 && protocol[0] == 'h' && protocol[1] == '2';
}

_Static_assert(TLS_RECORD_PLAINTEXT == SSL3_RT_MAX_PLAIN_LENGTH, "one record's plaintext");
