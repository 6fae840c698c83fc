/* privileges.c -- dropping root, raising the fd limit. */
#include "privileges.h"

#include "log.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

unsigned long long privileges_raise_fd_limit(void)
{
    struct rlimit limit;

    if (getrlimit(RLIMIT_NOFILE, &limit) == -1) {
        log_errno("getrlimit(RLIMIT_NOFILE)");
        return 0;
    }
    if (limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &limit) == -1) {
            log_errno("setrlimit(RLIMIT_NOFILE)");
            if (getrlimit(RLIMIT_NOFILE, &limit) == -1)
                return 0;
        }
    }
    return (unsigned long long)limit.rlim_cur;
}

long privileges_future_uid(const char *user)
{
    struct passwd *pw;

    if (geteuid() != 0 || (pw = getpwnam(user)) == NULL)
        return -1;
    return (long)pw->pw_uid;
}

int privileges_log_owner(const char *user, uid_t *uid, gid_t *gid)
{
    struct passwd *pw;
    struct group *adm;

    if (geteuid() != 0 || (pw = getpwnam(user)) == NULL)
        return -1;
    *uid = pw->pw_uid;
    *gid = pw->pw_gid;
    adm = getgrnam("adm");
    if (adm != NULL)
        *gid = adm->gr_gid;
    return 0;
}

int privileges_drop(const char *user)
{
    struct passwd *pw;

    if (geteuid() != 0) {
        log_msg("setting 'user' has no effect: rsp was not started as root");
        return 0;
    }
    errno = 0;
    pw = getpwnam(user);
    if (pw == NULL) {
        if (errno != 0)
            log_errno("getpwnam(%s)", user);
        else
            log_msg("setting 'user': there is no user \"%s\"", user);
        return -1;
    }
    /* Each step checked: a process that believes it dropped root and did
     * not is worse than one that refuses to start. */
    if (setgroups(1, &pw->pw_gid) == -1) {
        log_errno("setgroups");
        return -1;
    }
    if (setgid(pw->pw_gid) == -1) {
        log_errno("setgid(%u)", (unsigned)pw->pw_gid);
        return -1;
    }
    if (setuid(pw->pw_uid) == -1) {
        log_errno("setuid(%u)", (unsigned)pw->pw_uid);
        return -1;
    }
    if (pw->pw_uid != 0 && setuid(0) == 0) {
        log_msg("could become root again after dropping to %s: refusing to run", user);
        return -1;
    }
    log_msg("running as user %s (uid %u, gid %u)", user, (unsigned)pw->pw_uid, (unsigned)pw->pw_gid);
    return 0;
}
