/* acme_store.h -- the ACME client's storage directory.
 *
 * The account key, each domain set's key and chain, and the challenge
 * answers the workers serve live in one directory (tls.acme.storage). It
 * belongs to the user rsp runs as and nobody else reads it: directories are
 * 0700, files 0600. A file is replaced atomically (a crash leaves the old
 * one or the new one, never half of either), and a lock file lets two rsp
 * processes sharing the directory order each certificate once. name
 * arguments are relative to dir, may hold '/' (into a subdirectory that
 * exists), and never "..". */
#ifndef RSP_ACME_STORE_H
#define RSP_ACME_STORE_H

#include <stddef.h>
#include <sys/types.h>

#define ACME_STORE_FILE_MAX (1024 * 1024)

/* Creates dir (and parents as needed, the last one 0700) and its subdirectories "certificates" and
 * "challenges/.well-known/acme-challenge" and "challenges/tls-alpn-01", owned by uid:gid (chown only when
 * uid != (uid_t)-1; the files already in them too, left by a run as another user). Returns 0, or -1 with
 * *why (malloc'd message naming the path and strerror; NULL if out of memory). */
int acme_store_prepare(const char *dir, uid_t uid, gid_t gid, char **why);

/* Writes data to dir/name atomically: a temporary file in the same directory, fsync, rename over, fsync of
 * the directory. Returns 0 or -1 (errno). name may contain '/' (a subdirectory that exists). */
int acme_store_write(const char *dir, const char *name, const void *data, size_t length);

/* Reads dir/name whole (at most 1 MiB), NUL-terminated, *length set. NULL with errno (ENOENT when
 * absent, EFBIG when larger). */
char *acme_store_read(const char *dir, const char *name, size_t *length);

/* Removes dir/name: 0, or -1 (ENOENT is not an error: 0). */
int acme_store_remove(const char *dir, const char *name);

/* Takes an exclusive lock on dir/name (created 0600 if absent; flock LOCK_EX|LOCK_NB). Returns the fd
 * holding it, or -1: errno EWOULDBLOCK when another process holds it. Closing the fd releases it. */
int acme_store_lock(const char *dir, const char *name);

#endif
