/* privileges.h -- what the process may do: its user and its fd limit. */
#ifndef RSP_PRIVILEGES_H
#define RSP_PRIVILEGES_H

#include <sys/types.h>

/* Raises the soft RLIMIT_NOFILE to the hard limit, so that rsp can hold as
 * many connections as the system lets it. Returns the limit now (0 if it
 * cannot be read; problems are logged). */
unsigned long long privileges_raise_fd_limit(void);

/* The uid of `user` if rsp runs as root and will become that user, else
 * -1 (not root, or no such user: privileges_drop says so). */
long privileges_future_uid(const char *user);

/* The owner and group a log file rsp creates as root gets when it will
 * become `user`: that user, and group adm if the system has one (as
 * Debian's logs and logrotate's `create`), else the user's own group.
 * Returns 0, or -1 if rsp is not root or there is no such user. */
int privileges_log_owner(const char *user, uid_t *uid, gid_t *gid);

/* Started as root, becomes `user` for good: its group alone as the group
 * list, then its group, then its user (in that order: once the user
 * changes, the groups no longer can). Started as anyone else, logs that
 * `user` has no effect. Returns 0, or -1 after logging why. */
int privileges_drop(const char *user);

#endif
