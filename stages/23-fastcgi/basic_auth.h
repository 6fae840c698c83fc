/* basic_auth.h -- HTTP Basic authentication (stage 22): the users of an
 * htpasswd file, read at load and at every reload, and the check of a
 * request's Authorization header against them, with a small cache of
 * verified headers so that bcrypt's ~50 ms is paid once a minute per
 * user, not on every request of a browser. */
#ifndef RSP_BASIC_AUTH_H
#define RSP_BASIC_AUTH_H

#include "access_rules.h"

#include <stdbool.h>
#include <stddef.h>

/* Reads the htpasswd file auth->users_path into auth->users: "user:hash"
 * lines, # comments and blank lines skipped; only crypt(3) hashes of
 * bcrypt, sha512crypt and yescrypt. Returns 0, or -1 after a config error
 * naming config_path, the file, the line and the user. */
int basic_auth_load(const char *config_path, const char *setting, struct basic_auth *auth);

/* Fills auth->challenge from its realm. */
void basic_auth_challenge(struct basic_auth *auth);

/* True if value (the Authorization header's, length bytes; NULL: none)
 * carries the name and password of one of auth's users. */
bool basic_auth_verify(const struct basic_auth *auth, const char *value, size_t length);

#endif
