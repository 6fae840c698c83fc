/* acme_certs.h -- the certificates the ACME client keeps, as this process
 * serves them (chapter 19).
 *
 * The client (acme_client.c) runs in one process and writes what it gets
 * to its storage directory: certificates/NAME.key, then
 * certificates/NAME.crt, each by an atomic rename. Every process that
 * serves HTTPS (rsp alone, or each worker) keeps a table of them, loaded
 * from storage at start and again whenever a new NAME.crt lands there
 * (inotify): so a new certificate is served at once, by every process,
 * with no restart and no connection dropped. A certificate of
 * tls.certificates takes precedence over these (tls.c asks here second).
 *
 * The tls-alpn-01 challenge certificate is read from storage too
 * (challenges/tls-alpn-01/NAME.pem) when a validation handshake asks for
 * it. */
#ifndef RSP_ACME_CERTS_H
#define RSP_ACME_CERTS_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <time.h>

struct acme_settings;

/* Brings the table in line with a (NULL: no tls.acme): the sets it lists,
 * loaded from its storage (a set with no certificate there yet is served
 * once it lands), and the watch on storage's certificates directory.
 * Called at start and after each reload, in every process that serves.
 * Returns 0, or -1 after logging (the table keeps what it had). */
int acme_certs_apply(const struct acme_settings *a);

/* Loads set `name` (its first name) from storage again, if a newer
 * certificate is there. Returns 1 if a new one is now served, 0 if nothing
 * changed, -1 after logging a broken pair (the old one keeps serving). */
int acme_certs_reload(const char *name);

/* The context serving `name` (any case; NULL: the client sent no name, so
 * the first certificate held), or NULL if no certificate held covers it.
 * The table keeps the reference. */
SSL_CTX *acme_certs_pick(const char *name);

/* The expiry of set `name`'s certificate, or 0 if none is held. */
time_t acme_certs_not_after(const char *name);

/* For a tls-alpn-01 validation of `name`: a new context with the challenge
 * certificate the client left in storage, answering ALPN acme-tls/1; the
 * caller owns the reference. NULL if there is none (or no tls.acme). */
SSL_CTX *acme_certs_challenge(const char *name);

/* True if ctx is one acme_certs_challenge made. */
bool acme_certs_is_challenge(const SSL_CTX *ctx);

/* Drops the table, the watch and everything loaded (at exit; in a process
 * about to apply a config without acme, acme_certs_apply(NULL) does it). */
void acme_certs_close(void);

#endif
