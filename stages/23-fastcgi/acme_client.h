/* acme_client.h -- rsp's own ACME client (RFC 8555, chapter 19): it gets
 * a certificate for every set of names tls.acme lists that has none in
 * storage, and renews each when a third of its lifetime is left (or when
 * the CA's renewal information, RFC 9773, says so).
 *
 * It runs in one process (rsp alone, or the master with workers), on the
 * reactor, one order at a time, in the background: plain HTTP and the
 * challenges are served meanwhile. What it gets it writes to storage,
 * where every serving process picks it up (acme_certs.h). A set that fails
 * is retried with backoff (a minute, doubling up to a day) and never
 * holds up the others. */
#ifndef RSP_ACME_CLIENT_H
#define RSP_ACME_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

struct acme_settings;

/* Brings the client in line with a (NULL: no tls.acme, the client
 * stops): at start, and after each reload that changes it (an unchanged
 * block leaves the client's work alone). Nothing happens before the
 * reactor runs. Returns 0, or -1 after logging. */
int acme_client_apply(const struct acme_settings *a);

/* Makes a's storage directory (and its subdirectories), owned by `user`
 * if rsp runs as root and will become that user: called as root, before
 * privileges are dropped. Returns 0, or -1 after saying why on stderr. */
int acme_client_prepare(const struct acme_settings *a, const char *user);

/* Stops the client: requests under way abandoned, locks released. */
void acme_client_stop(void);

/* In a child just forked: drops the client's state without touching the
 * parent's reactor (its sockets and lock files are closed). */
void acme_client_forget(void);

/* What status.json and /metrics show of each certificate. */
struct acme_certificate_status {
    char *const *names;
    size_t name_count;
    const char *state;          /* "valid", "obtaining", "renewing", "failed" */
    time_t not_after;           /* 0: no certificate yet */
    const char *last_error;     /* NULL: none */
    time_t next_attempt;        /* 0: none planned (valid, or working now) */
};

/* The number of certificates the client keeps (0 when it does not run). */
size_t acme_client_count(void);

/* Certificate i (< acme_client_count()). */
struct acme_certificate_status acme_client_status(size_t i);

#endif
