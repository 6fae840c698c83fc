/* config_check_user.c -- checking a config as the service will run it:
 * started as root with `user` set, rsp reads its files as root, then
 * drops to the user, who reads them again at every reload (and reopens
 * the access log, writes temporary files, serves acme_webroot). A file
 * only root may read passes `rsp -t` and the start, then fails the first
 * reload after a renewal. So `rsp -t` and the start try each file as the
 * user: a child process becomes the user (as privileges.c does, for
 * good, but only in the child) and reports what it could not do through
 * a pipe; the parent stays root and says which setting, file and user. */
#define _GNU_SOURCE /* pipe2 */
#include "access_log.h"
#include "config_read.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* What the user must be able to do with a path. */
enum access_kind {
    READ_FILE,      /* open it for reading */
    SEARCH_DIR,     /* reach what is in the directory */
    SEARCH_DIR_OF,  /* reach what is in the directory of the file */
    WRITE_DIR,      /* make files in the directory */
    READ_DIR,       /* list the directory and reach what is in it */
};

/* One path to try as the user. */
struct access_check {
    char setting[300];          /* "tls.certificates[1].key"; "" for the config file */
    const char *path;
    enum access_kind kind;
};

/* Every certificate's two files, and the config, access_log, temp_dir,
 * acme_webroot, tls.acme.ca_root and tls.acme.storage; the directories
 * of the sites' own access logs (one check for sites sharing one); the
 * pools' roots and the error pages (one check per path). */
#define MAX_SITE_LOG_DIRS 64
#define MAX_FILE_PATHS 512
#define MAX_CHECKS (2 * 64 + 6 + MAX_SITE_LOG_DIRS + MAX_FILE_PATHS)

/* The paths to try, and the directories derived from settings. */
struct access_list {
    struct access_check checks[MAX_CHECKS];
    size_t count;
    bool full;                  /* a path did not fit: the check is refused */
    char log_dir[PATH_MAX];
    char storage_dir[PATH_MAX];
};

/* Adds path, named by setting, to the list (full past MAX_CHECKS: more
 * than MAX_SITE_LOG_DIRS directories of sites' logs). */
static void add(struct access_list *list, const char *setting, const char *path, enum access_kind kind)
{
    struct access_check *c;

    if (list->count == MAX_CHECKS) {
        list->full = true;
        return;
    }
    c = &list->checks[list->count++];
    snprintf(c->setting, sizeof c->setting, "%s", setting);
    c->path = path;
    c->kind = kind;
}

/* Copies into dir (size bytes) the directory of path: "." without a
 * slash, "/" for a file at the root. */
static void directory_of(const char *path, char *dir, size_t size)
{
    const char *slash = strrchr(path, '/');

    if (slash == NULL)
        snprintf(dir, size, ".");
    else if (slash == path)
        snprintf(dir, size, "/");
    else
        snprintf(dir, size, "%.*s", (int)(slash - path), path);
}

/* Copies into dir the nearest existing directory above storage. */
static void existing_parent(const char *storage, char *dir, size_t size)
{
    struct stat st;

    directory_of(storage, dir, size);
    while (strcmp(dir, "/") != 0 && stat(dir, &st) == -1 && errno == ENOENT) {
        char up[PATH_MAX];

        directory_of(dir, up, sizeof up);
        snprintf(dir, size, "%s", up);
    }
}

/* Adds the directory of each site's own access log file, as
 * list_paths does the top-level one's: once for the sites that share a
 * directory. */
static void add_site_logs(const struct config *c, struct access_list *list)
{
    char dir[PATH_MAX], other[PATH_MAX], setting[300];
    const size_t first = list->count;

    for (size_t i = 0; i < c->router.count; i++) {
        const struct site *site = &c->router.sites[i];
        bool known = false;

        if (site->access_log == NULL || access_log_is_stderr(site->access_log))
            continue;
        directory_of(site->access_log, dir, sizeof dir);
        for (size_t j = first; j < list->count && !known; j++) {
            directory_of(list->checks[j].path, other, sizeof other);
            known = strcmp(dir, other) == 0;
        }
        if (known)
            continue;
        snprintf(setting, sizeof setting, "sites[\"%s%s\"].access_log", site->wildcard ? "*" : "", site->name);
        add(list, setting, site->access_log, SEARCH_DIR_OF);
    }
}

/* Adds path as add does, unless it is listed already for the same kind:
 * the pages a site inherits are its pool's, checked once. */
static void add_once(struct access_list *list, const char *setting, const char *path, enum access_kind kind)
{
    for (size_t i = 0; i < list->count; i++)
        if (list->checks[i].kind == kind && strcmp(list->checks[i].path, path) == 0)
            return;
    add(list, setting, path, kind);
}

/* Adds the error pages of o; `prefix` names its level ("", "pools.app."). */
static void add_pages(struct access_list *list, const char *prefix, const struct site_output *o)
{
    char setting[330];

    for (size_t i = 0; i < o->error_page_count; i++) {
        snprintf(setting, sizeof setting, "%serror_pages[%d]", prefix, o->error_pages[i].status);
        add_once(list, setting, o->error_pages[i].path, READ_FILE);
    }
}

/* Adds pool's root, a directory the user must search (no listing: rsp
 * never lists one), and its error pages. */
static void add_pool_files(struct access_list *list, const char *prefix, const struct pool *pool)
{
    char setting[310];

    if (pool->root != NULL) {
        snprintf(setting, sizeof setting, "%sroot", prefix);
        add_once(list, setting, pool->root, SEARCH_DIR);
    }
    add_pages(list, prefix, &pool->output);
}

/* Adds what rsp reads for the pools and sites at every reload: the roots
 * and error pages, each path once, named by the first level that has it. */
static void add_files(const struct config *c, struct access_list *list)
{
    char prefix[300];

    add_pages(list, "", &c->output);
    add_pool_files(list, "", &c->default_pool);
    for (size_t i = 0; i < c->pool_count; i++) {
        snprintf(prefix, sizeof prefix, "pools.%s.", c->pools[i].name);
        add_pool_files(list, prefix, &c->pools[i].pool);
    }
    for (size_t i = 0; i < c->router.count; i++) {
        const struct site *site = &c->router.sites[i];

        snprintf(prefix, sizeof prefix, "sites[\"%s%s\"].", site->wildcard ? "*" : "", site->name);
        if (site->pool == &site->own)
            add_pool_files(list, prefix, &site->own);
        add_pages(list, prefix, &site->output);
    }
}

/* Lists every path of c that the user touches after rsp drops root. */
static void list_paths(const char *path, const struct config *c, struct access_list *list)
{
    const struct tls_settings *tls = &c->tls;

    add(list, "", path, READ_FILE);
    for (size_t i = 0; i < 2 * tls->certificate_count; i++) {
        char setting[48];

        snprintf(setting, sizeof setting, "tls.certificates[%zu].%s", i / 2 + 1, i % 2 == 0 ? "cert" : "key");
        add(list, setting, tls->certificate_paths[i], READ_FILE);
    }
    if (c->operations.access_log != NULL && !access_log_is_stderr(c->operations.access_log)) {
        /* rsp creates the log file as root and gives it to the user
         * (access_log_give_to): the user must still reach it to reopen
         * it after SIGUSR1, and logrotate's `create` makes the new one. */
        directory_of(c->operations.access_log, list->log_dir, sizeof list->log_dir);
        add(list, "access_log", list->log_dir, SEARCH_DIR);
    }
    add_site_logs(c, list);
    add_files(c, list);
    add(list, "temp_dir", c->buffering.temp_dir, WRITE_DIR);
    if (tls->acme_webroot != NULL && tls->acme == NULL)
        add(list, "acme_webroot", tls->acme_webroot, READ_DIR);
    if (tls->acme != NULL && tls->acme->ca_root != NULL)
        add(list, "tls.acme.ca_root", tls->acme->ca_root, READ_FILE);
    if (tls->acme != NULL) {
        /* The storage itself needs no check: rsp makes it (and its
         * parents, 0755) as root and gives it and its subdirectories to
         * the user at every start (acme_store_prepare), challenges/ (the
         * http-01 webroot) included. The user must only reach it. */
        existing_parent(tls->acme->storage, list->storage_dir, sizeof list->storage_dir);
        add(list, "tls.acme.storage", list->storage_dir, SEARCH_DIR);
    }
}

/* In the child: 0 if the user can do what c asks, else errno. */
static int try_access(const struct access_check *c)
{
    int fd, mode = c->kind == WRITE_DIR ? W_OK | X_OK : X_OK;
    char dir[PATH_MAX];

    if (c->kind == SEARCH_DIR_OF) {
        directory_of(c->path, dir, sizeof dir);
        return faccessat(AT_FDCWD, dir, X_OK, AT_EACCESS) == -1 ? errno : 0;
    }
    if (c->kind == READ_FILE || c->kind == READ_DIR) {
        /* O_NONBLOCK: a FIFO named by mistake must not hang the check. */
        fd = open(c->path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK |
                           (c->kind == READ_DIR ? O_DIRECTORY : 0));
        if (fd == -1)
            return errno;
        close(fd);
        if (c->kind == READ_FILE)
            return 0;
    }
    return faccessat(AT_FDCWD, c->path, mode, AT_EACCESS) == -1 ? errno : 0;
}

/* Writes all of length bytes to fd, through EINTR and short writes.
 * Returns 0 or -1. */
static int write_all(int fd, const void *data, size_t length)
{
    const char *p = data;

    while (length > 0) {
        ssize_t n = write(fd, p, length);
        if (n == -1 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        length -= (size_t)n;
    }
    return 0;
}

/* The child: becomes pw's user as privileges_drop does (its group alone,
 * then its gid, then its uid), tries each path, and writes to out one
 * int for the change of user, then one per path: 0, or the errno. */
static __attribute__((noreturn)) void check_as_user(const struct passwd *pw, const struct access_list *list, int out)
{
    int results[1 + MAX_CHECKS];

    results[0] = 0;
    if (setgroups(1, &pw->pw_gid) == -1 || setgid(pw->pw_gid) == -1 || setuid(pw->pw_uid) == -1)
        results[0] = errno;
    for (size_t i = 0; i < list->count; i++)
        results[1 + i] = results[0] == 0 ? try_access(&list->checks[i]) : 0;
    /* _exit, not exit: the parent's stdio buffers are not ours to flush. */
    _exit(write_all(out, results, (1 + list->count) * sizeof results[0]) == 0 ? 0 : 1);
}

/* Reads up to length bytes from fd until EOF. Returns the count, or -1. */
static ssize_t read_all(int fd, void *data, size_t length)
{
    char *p = data;
    size_t got = 0;

    while (got < length) {
        ssize_t n = read(fd, p + got, length - got);
        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1)
            return -1;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* Forks the child that tries list as pw's user and fills results (1 +
 * list->count ints). Returns 0, or -1 after saying why. */
static int run_check(const char *path, const struct passwd *pw, const struct access_list *list, int *results)
{
    size_t length = (1 + list->count) * sizeof *results;
    int fds[2], status, rc = 0;
    ssize_t got;
    pid_t pid;

    if (pipe2(fds, O_CLOEXEC) == -1) {
        config_error(path, "cannot check the files as user %s: pipe: %s", pw->pw_name, strerror(errno));
        return -1;
    }
    pid = fork();
    if (pid == -1) {
        config_error(path, "cannot check the files as user %s: fork: %s", pw->pw_name, strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        check_as_user(pw, list, fds[1]);
    }
    close(fds[1]);
    got = read_all(fds[0], results, length);
    if (got != (ssize_t)length) {
        config_error(path, "cannot check the files as user %s: %s", pw->pw_name,
                     got == -1 ? strerror(errno) : "the checking process gave no answer");
        rc = -1;
    }
    close(fds[0]);
    while (waitpid(pid, &status, 0) == -1)
        if (errno != EINTR) {
            config_error(path, "cannot check the files as user %s: waitpid: %s", pw->pw_name,
                         strerror(errno));
            return -1;
        }
    return rc;
}

/* What the user could not do with c, as a verb phrase. */
static const char *failed_verb(enum access_kind kind)
{
    switch (kind) {
    case READ_FILE:
        return "cannot read";
    case SEARCH_DIR:
    case SEARCH_DIR_OF:
        return "cannot reach the files in";
    case WRITE_DIR:
        return "cannot write in";
    case READ_DIR:
        return "cannot read the directory";
    }
    return "cannot use";
}

int config_check_user(const char *path, const struct config *config)
{
    static struct access_list list; /* some 230 KB: not on the stack */
    int results[1 + MAX_CHECKS];
    char dir[PATH_MAX];
    const struct passwd *pw;
    int rc = 0;

    if (config->operations.user == NULL || geteuid() != 0)
        return 0;
    pw = getpwnam(config->operations.user);
    if (pw == NULL)
        return 0; /* config_load already refused it, naming 'user' */
    if (pw->pw_uid == 0)
        return 0; /* root stays root: it reads what it read */
    list.count = 0;
    list.full = false;
    list_paths(path, config, &list);
    if (list.full) {
        config_error(path, "setting 'user': cannot check the files as user %s: the sites' access logs are "
                           "in more than %d directories, or there are more than %d roots and error pages",
                     pw->pw_name, MAX_SITE_LOG_DIRS, MAX_FILE_PATHS);
        return -1;
    }
    if (run_check(path, pw, &list, results) == -1)
        return -1;
    if (results[0] != 0) {
        config_error(path, "setting 'user': cannot become user %s to check the files: %s",
                     pw->pw_name, strerror(results[0]));
        return -1;
    }
    for (size_t i = 0; i < list.count; i++) {
        const struct access_check *c = &list.checks[i];

        if (results[1 + i] == 0)
            continue;
        if (c->setting[0] == '\0') {
            /* The config itself: rsp runs on with what it loaded, so a
             * warning; every reload, though, would be refused. */
            config_error(path, "warning: user %s cannot read %s (%s): every reload, made as that "
                               "user, will fail", pw->pw_name, c->path, strerror(results[1 + i]));
            continue;
        }
        if (c->kind == SEARCH_DIR_OF)
            directory_of(c->path, dir, sizeof dir);
        config_error(path, "setting '%s': user %s %s %s (%s)", c->setting, pw->pw_name,
                     failed_verb(c->kind), c->kind == SEARCH_DIR_OF ? dir : c->path, strerror(results[1 + i]));
        rc = -1;
    }
    return rc;
}
