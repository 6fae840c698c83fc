/* fuzz_tls.c -- libFuzzer harness for the start of an HTTPS connection:
 * the TLS transport (tls_transport.c) with the contexts tls.c sets up
 * (TLS 1.2 and 1.3, Mozilla's intermediate ciphers, ALPN, session
 * tickets, SNI choosing among certificates), driven through connection.c
 * as the relay drives a client connection, over a real socket.
 *
 * At start-up the harness makes two throwaway self-signed EC P-256
 * certificates with OpenSSL's API (the default one for "localhost", and
 * one for "example.com" and "*.example.com", which SNI picks), writes them
 * to a temp dir and loads them with tls_context_load, as a config with
 * `tls.certificates` does; the files are removed once loaded.
 *
 * For each input: a socketpair (AF_UNIX, SOCK_STREAM, both ends
 * non-blocking); rsp's end goes through connection_init and tls_attach as
 * an accepted client does. The input's first byte says how the rest
 * arrives and what rsp tries meanwhile:
 *
 *   bits 0-5: the size of each piece written to the other end (0: all at
 *             once); after each piece rsp reads until it would block, as
 *             it does on each EPOLLIN, and what rsp sent (a ServerHello,
 *             an alert) is read and dropped;
 *   bit 6:    rsp only shuts its write side, without writing an answer
 *             first (as when it gives up on a client that sent nothing);
 *   bit 7:    rsp answers (writes a 408, as on a header timeout, and shuts
 *             its write side) before the first byte arrives, not after
 *             the last.
 *
 * Then the other end shuts its write side (a FIN), rsp reads until the
 * end, writes an answer, shuts its write side, and closes. Besides "no
 * crash, no sanitizer report, no leak" (LeakSanitizer runs after each
 * input), it checks:
 *
 *  - no plaintext comes out of a read and the handshake never completes:
 *    bytes chosen blindly cannot complete a handshake whose key exchange
 *    takes a fresh random key of the server's (and a ticket needs keys
 *    made at random at start-up), so any byte read would be one the TLS
 *    layer let through unauthenticated;
 *  - a read that fails sets errno; EAGAIN (nothing more now) comes only
 *    when the socket holds no unread byte: rsp's epoll is level-triggered,
 *    and bytes left in the kernel would wake it again and again;
 *  - once the FIN has arrived, the connection ends (a read returns 0, or
 *    -1 with errno other than EAGAIN) within a few reads: a transport
 *    that kept saying "try again" would keep rsp's worker waking up for a
 *    socket that has nothing more to give;
 *  - a write before the handshake is refused without a byte reaching the
 *    socket, and leaves the connection write_done with nothing queued;
 *  - shutting the write side before the handshake is done at once (no
 *    close_notify owed, nothing to wait for): the client reads a plain end
 *    of stream (after a refused write there is nothing left to shut).
 *
 * Build and run: see fuzz/README.md. */
#include "config_read.h"
#include "connection.h"
#include "stats.h"
#include "tls.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "fuzz_tls: property violated: %s\n  ", #cond); \
            fprintf(stderr, __VA_ARGS__);                                 \
            fprintf(stderr, "\n");                                        \
            abort();                                                      \
        }                                                                 \
    } while (0)

#define READ_SIZE 16384   /* what the relay passes: a record's plaintext (RELAY_READ_SIZE) */
#define READS_AFTER_FIN 64 /* reads the connection may take to end once the FIN is in */
#define PUMP_READS 256    /* reads per piece before we call it stuck */

static struct tls_context *context;

/* FUZZ_TLS_VERBOSE=1: say how each input went (for triage). */
static bool verbose;
static size_t sent_to_client;   /* bytes rsp wrote to the socket, this input */
static const char *how_ended;   /* what the last read returned */

/* tls.c reports configuration problems through config_error (config.c's,
 * which would drag in the whole config reader and LuaJIT). The same
 * format: "rsp: PATH: MESSAGE". */
void config_error(const char *path, const char *format, ...)
{
    va_list ap;

    fprintf(stderr, "rsp: %s: ", path);
    va_start(ap, format);
    vfprintf(stderr, format, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* -- start-up: two throwaway certificates ------------------------------------ */

static void die_openssl(const char *what)
{
    fprintf(stderr, "fuzz_tls: %s failed\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

/* Writes a self-signed EC P-256 certificate for `names` (a subjectAltName
 * value, "DNS:a,DNS:b") and its key to cert_path and key_path. */
static void make_certificate(const char *common_name, const char *names, const char *cert_path,
                             const char *key_path)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509_NAME *subject;
    X509_EXTENSION *san;
    X509V3_CTX v3;
    FILE *f;

    if (key == NULL || x == NULL)
        die_openssl("EVP_EC_gen / X509_new");
    subject = X509_get_subject_name(x);
    if (X509_set_version(x, 2) != 1 || ASN1_INTEGER_set(X509_get_serialNumber(x), 1) != 1 ||
        X509_gmtime_adj(X509_getm_notBefore(x), -3600) == NULL ||
        X509_gmtime_adj(X509_getm_notAfter(x), 86400L * 365) == NULL || X509_set_pubkey(x, key) != 1 ||
        X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC, (const unsigned char *)common_name, -1,
                                   -1, 0) != 1 ||
        X509_set_issuer_name(x, subject) != 1)
        die_openssl("setting up the certificate");
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
    san = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, names);
    if (san == NULL || X509_add_ext(x, san, -1) != 1)
        die_openssl("subjectAltName");
    X509_EXTENSION_free(san);
    if (X509_sign(x, key, EVP_sha256()) == 0)
        die_openssl("X509_sign");
    if ((f = fopen(cert_path, "w")) == NULL || PEM_write_X509(f, x) != 1 || fclose(f) != 0)
        die_openssl(cert_path);
    if ((f = fopen(key_path, "w")) == NULL || PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) != 1 ||
        fclose(f) != 0)
        die_openssl(key_path);
    X509_free(x);
    EVP_PKEY_free(key);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char dir[] = "/tmp/rsp-fuzz-tls-XXXXXX", paths[4][64];
    struct tls_files files[2];

    (void)argc;
    (void)argv;
    /* rsp ignores SIGPIPE (rsp.c); OpenSSL writes to a socket whose peer
     * may have closed. */
    signal(SIGPIPE, SIG_IGN);
    verbose = getenv("FUZZ_TLS_VERBOSE") != NULL;
    /* The shared counters the transport counts handshakes in (stats.h),
     * as rsp maps them at start-up. */
    if (stats_init() == -1)
        exit(1);
    if (mkdtemp(dir) == NULL) {
        perror("fuzz_tls: mkdtemp");
        exit(1);
    }
    for (int i = 0; i < 4; i++)
        snprintf(paths[i], sizeof paths[i], "%s/%s", dir,
                 (const char *[]){ "localhost.pem", "localhost.key", "example.pem", "example.key" }[i]);
    make_certificate("localhost", "DNS:localhost", paths[0], paths[1]);
    make_certificate("example.com", "DNS:example.com,DNS:*.example.com", paths[2], paths[3]);
    files[0] = (struct tls_files){ paths[0], paths[1] };
    files[1] = (struct tls_files){ paths[2], paths[3] };
    context = tls_context_load("fuzz-tls.lua", files, 2);
    for (int i = 0; i < 4; i++)
        unlink(paths[i]);
    rmdir(dir);
    if (context == NULL) {
        fprintf(stderr, "fuzz_tls: tls_context_load failed\n");
        exit(1);
    }
    return 0;
}

/* -- one input ------------------------------------------------------------------ */

static void never_called(struct epoll_event_handler *h, uint32_t events)
{
    (void)h;
    (void)events;
    CHECK(0, "a connection handler was called: nothing is in epoll");
}

/* Reads and drops whatever rsp sent to the other end. */
static void drain(int peer)
{
    char sink[4096];

    ssize_t n;

    while ((n = read(peer, sink, sizeof sink)) > 0)
        sent_to_client += (size_t)n;
}

/* Reads as rsp does on EPOLLIN: until the transport says EAGAIN. Returns
 * 1 once the connection has ended (0, or -1 with another errno). */
static int pump(struct connection *c, int peer, char *buf)
{
    for (int i = 0; i < PUMP_READS; i++) {
        ssize_t n;
        int error;

        errno = 0;
        n = connection_read(c, buf, READ_SIZE);
        error = errno;
        drain(peer);
        CHECK(n <= 0, "%zd bytes of plaintext from bytes chosen blindly", n);
        CHECK(!tls_established(c), "a handshake completed with bytes chosen blindly");
        if (n == 0) {
            how_ended = "end of stream (0)";
            return 1;
        }
        CHECK(error != 0, "a failed read without errno");
        if (error != EAGAIN) {
            how_ended = strerror(error);
            return 1;
        }
        /* EAGAIN: nothing more now. A read that must write first says so
         * (TRANSPORT_READ_NEEDS_OUT); our end is drained, so the socket is
         * writable and reading again is what rsp would do on EPOLLOUT. */
        if (!(c->transport_wants & TRANSPORT_READ_NEEDS_OUT)) {
            /* rsp's epoll is level-triggered: an EAGAIN while the socket
             * still holds bytes would wake it again and again. */
            int unread = -1;
            CHECK(ioctl(c->handler.fd, FIONREAD, &unread) == 0 && unread == 0,
                  "EAGAIN with %d bytes unread in the socket", unread);
            return 0;
        }
    }
    CHECK(0, "%d reads without an end or an EAGAIN", PUMP_READS);
    return 1;
}

/* rsp answers before any request (a 408 on a header timeout, a 400),
 * then half-closes, as the relay does. Before the handshake is done
 * nothing may reach the socket. */
static void answer(struct connection *c, int peer, bool shutdown_only)
{
    static const char reply[] = "HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    bool established = tls_established(c);
    char byte;

    drain(peer);
    if (shutdown_only)
        goto shut;
    connection_write(c, reply, sizeof reply - 1);
    if (!established) {
        CHECK(c->write_done && connection_queued(c) == 0, "a write before the handshake was %s",
              c->write_done ? "queued" : "not refused");
        CHECK(read(peer, &byte, 1) == -1 && errno == EAGAIN, "a write before the handshake sent bytes");
    }
shut:
    connection_shutdown_write(c);
    if (!established) {
        ssize_t n = read(peer, &byte, 1);

        CHECK(c->write_done && !c->shutdown_waiting, "a shutdown before the handshake waits");
        /* After a refused write the connection is done writing: the
         * shutdown does nothing, and the close will end the stream. */
        if (shutdown_only)
            CHECK(n == 0, "no FIN after a shutdown before the handshake (read: %zd)", n);
        else
            CHECK(n == -1 && errno == EAGAIN, "bytes or a FIN after a refused write (read: %zd)", n);
    }
    /* A shutdown that waits for the socket is called again by
     * connection_flush, on EPOLLOUT: the socket is writable now. */
    for (int i = 0; i < 8 && c->shutdown_waiting; i++) {
        drain(peer);
        connection_flush(c);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    static char *buf;
    struct connection c;
    size_t piece, at;
    bool answer_first, shutdown_only, ended = false;
    int sv[2], full = 0;

    if (buf == NULL && (buf = malloc(READ_SIZE)) == NULL)
        abort();
    sent_to_client = 0;
    how_ended = "not ended";
    piece = len > 0 ? (data[0] & 0x3f) : 0;
    shutdown_only = len > 0 && (data[0] & 0x40);
    answer_first = len > 0 && (data[0] & 0x80);
    if (len > 0) {
        data++;
        len--;
    }
    if (piece == 0)
        piece = len > 0 ? len : 1;

    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0, "socketpair: %s",
          strerror(errno));
    connection_init(&c, sv[0], false, never_called, NULL);
    CHECK(tls_attach(&c, context, true) == 0, "tls_attach failed");
    CHECK(!tls_established(&c), "established before a byte");
    if (answer_first)
        answer(&c, sv[1], shutdown_only);

    /* The pieces, each followed by rsp's reads. Many small pieces may
     * fill the socket's buffer: rsp's reads empty it (pump checks that),
     * so the next try goes in. */
    for (at = 0; at < len && !ended;) {
        size_t n = len - at < piece ? len - at : piece;
        ssize_t w = write(sv[1], data + at, n);

        CHECK(w > 0 || (w == -1 && errno == EAGAIN), "write to the socketpair: %s", strerror(errno));
        if (w > 0)
            at += (size_t)w;
        else
            CHECK(++full < 16, "the socket stays full although rsp reads everything");
        ended = pump(&c, sv[1], buf);
    }

    CHECK(shutdown(sv[1], SHUT_WR) == 0, "shutdown: %s", strerror(errno));
    for (int i = 0; !ended; i++) {
        CHECK(i < READS_AFTER_FIN, "no end of the connection %d reads after the FIN", READS_AFTER_FIN);
        ended = pump(&c, sv[1], buf);
    }
    if (!answer_first)
        answer(&c, sv[1], shutdown_only);
    if (verbose)
        fprintf(stderr, "fuzz_tls: %zu bytes in pieces of %zu%s%s; %zu written; rsp sent %zu bytes; the "
                "last read: %s\n", len, piece, answer_first ? ", rsp answering first" : "",
                shutdown_only ? ", shutting down without an answer" : "", at, sent_to_client, how_ended);
    connection_close(&c);
    CHECK(c.handler.fd == -1, "connection_close left the socket");
    close(sv[1]);
    return 0;
}
