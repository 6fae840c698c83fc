/* ticket_keys.h -- the keys that encrypt TLS session tickets, rotated,
 * and shared by every process of rsp.
 *
 * A session ticket is the server's own state, encrypted under a key only
 * the server knows and handed to the client, which offers it back to
 * resume without a full handshake. Whoever gets that key later can decrypt
 * every ticket it made, and from it the session keys of the connections it
 * resumed: so the key must not live for ever. rsp makes a new one every
 * `ticket_key_lifetime` seconds and keeps the one before it for decrypting
 * only; a ticket under that older key is still resumed, and renewed under
 * the new one, so a ticket lives at most two lifetimes, and a key is gone
 * (overwritten) two lifetimes after it was made.
 *
 * The two keys live in a shared anonymous mapping made before the first
 * fork (as the counters of stats.h), so a ticket one worker issued resumes
 * on every other. Only the master (or rsp alone) writes it, on a timer;
 * workers read it in OpenSSL's ticket callback, under a sequence counter:
 * a reader copies the keys and tries again if a write went on meanwhile,
 * and the writer never waits for anyone. */
#ifndef RSP_TICKET_KEYS_H
#define RSP_TICKET_KEYS_H

#include <openssl/ssl.h>

/* Maps the shared keys and makes the first one. Call before any fork;
 * once done, later calls do nothing. Returns 0, or -1 after logging. */
int ticket_keys_init(void);

/* Makes this process (the master, or rsp alone) the one that rotates the
 * keys: first `lifetime` seconds from now, then every ticket_key_lifetime
 * of the generation current then. Returns 0, or -1 after logging (no
 * timer armed). */
int ticket_keys_start(double lifetime);

/* Stops rotating (before the reactor closes) and unmaps the keys. */
/* A reload's ticket_key_lifetime: it counts from the next rotation on
 * (generation.c, in the process that rotates). */
void ticket_keys_set_lifetime(double lifetime);

void ticket_keys_close(void);

/* Makes ctx (a server context) encrypt and decrypt its tickets with the
 * shared keys. Returns 1, or 0 if OpenSSL failed. */
int ticket_keys_use(SSL_CTX *ctx);

#endif
