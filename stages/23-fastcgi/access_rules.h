/* access_rules.h -- who may enter a site (stage 22): allow/deny lists of
 * addresses and CIDR prefixes, basic_auth's users from an htpasswd file,
 * and max_body_size, at three levels (the top level, a named pool, a
 * site). Each setting is taken from the most specific level that has it:
 * the request's site, else its pool, else the top level (access_for). */
#ifndef RSP_ACCESS_RULES_H
#define RSP_ACCESS_RULES_H

#include "cidr.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One allow or deny entry: its prefix (cidr.h: "all", an address or
 * ADDRESS/BITS). */
struct access_rule {
    struct cidr prefix;
    bool allow;
};

/* One line of an htpasswd file. */
struct htpasswd_user {
    char *name;
    char *hash;                 /* crypt(3)'s form: $2b$, $2y$, $6$ or $y$ */
};

/* basic_auth = { realm = "private", users = "/etc/rsp/htpasswd", forward = false } */
struct basic_auth {
    char *realm;
    char *users_path;
    struct htpasswd_user *users;
    size_t user_count;
    bool forward;               /* the backend gets the Authorization header */
    unsigned long load;         /* which reading of the file: a new one empties the cache */
    char challenge[300];        /* "WWW-Authenticate: Basic realm=...\r\n" */
};

/* Everything above for one level; the *_set flags say which it has. */
struct access_settings {
    struct access_rule *rules;
    size_t rule_count;
    bool has_allow;             /* some rule allows: a client no rule matches is refused */
    bool rules_set;             /* allow or deny given at this level */
    struct basic_auth *auth;    /* NULL: none at this level */
    uint64_t max_body;          /* 0: no limit */
    bool max_body_set;
};

/* True if rules let the address (cidr_address's family and bytes) in:
 * the longest matching prefix decides, a tie goes to deny; nothing
 * matches: in, unless some rule allows. */
bool access_rules_allow(const struct access_rule *rules, size_t count, bool has_allow, int family,
                        const unsigned char address[16]);

/* Frees what a holds and empties it. */
void access_settings_free(struct access_settings *a);

#endif
