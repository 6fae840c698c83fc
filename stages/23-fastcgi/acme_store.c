/* acme_store.c -- the ACME storage directory: modes, atomic writes, the lock. */
#define _GNU_SOURCE /* asprintf, mkostemp */
#include "acme_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The subdirectories acme_store_prepare makes, each after its parent. */
static const char *const subdirectories[] = {
    "certificates", "challenges", "challenges/.well-known", "challenges/.well-known/acme-challenge",
    "challenges/tls-alpn-01",
};

/* *why = "PATH: strerror(errno)" (NULL if even that cannot be allocated); returns -1, errno kept. */
static int fail(char **why, const char *dir, const char *sub, int error)
{
    if (asprintf(why, "%s%s%s: %s", dir, sub != NULL ? "/" : "", sub != NULL ? sub : "", strerror(error)) < 0)
        *why = NULL;
    errno = error;
    return -1;
}

/* mkdir -p for the parents of dir (made 0755, as mkdir -p does). 0, or -1 with errno; *failed the path. */
static int make_parents(char *dir, const char **failed)
{
    for (char *slash = strchr(dir + 1, '/'); slash != NULL; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            *failed = dir;
            return -1;      /* dir stays cut here: it names the failure */
        }
        *slash = '/';
    }
    return 0;
}

/* Gives the regular files directly in the directory fd to uid:gid (left by a run as another user).
 * 0, or -1 with errno. */
static int chown_files(int fd, uid_t uid, gid_t gid)
{
    int copy = dup(fd);
    DIR *listing = copy >= 0 ? fdopendir(copy) : NULL;
    struct dirent *entry;
    int result = 0;

    if (listing == NULL) {
        int error = errno;
        if (copy >= 0)
            close(copy);
        errno = error;
        return -1;
    }
    errno = 0;
    while (result == 0 && (entry = readdir(listing)) != NULL) {
        struct stat st;
        if (fstatat(fd, entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno != ENOENT)    /* removed meanwhile: nothing to give */
                result = -1;
        } else if (S_ISREG(st.st_mode) && (st.st_uid != uid || st.st_gid != gid) &&
                   fchownat(fd, entry->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) != 0)
            result = -1;
        errno = 0;
    }
    if (result == 0 && errno != 0)
        result = -1;
    int error = errno;
    closedir(listing);
    errno = error;
    return result;
}

/* Makes the directory fd 0700 and, if uid is not -1, uid:gid's with the files in it. 0 or -1 (errno). */
static int own_directory(int fd, uid_t uid, gid_t gid)
{
    if (fchmod(fd, 0700) != 0)
        return -1;
    if (uid == (uid_t)-1)
        return 0;
    if (fchown(fd, uid, gid) != 0)
        return -1;
    return chown_files(fd, uid, gid);
}

/* Creates (if needed) and owns the subdirectory sub of top. 0 or -1 (errno). */
static int prepare_subdirectory(int top, const char *sub, uid_t uid, gid_t gid)
{
    int fd, result;

    if (mkdirat(top, sub, 0700) != 0 && errno != EEXIST)
        return -1;
    /* O_NOFOLLOW: a symbolic link planted here is refused, not followed. */
    fd = openat(top, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    result = own_directory(fd, uid, gid);
    int error = errno;
    close(fd);
    errno = error;
    return result;
}

int acme_store_prepare(const char *dir, uid_t uid, gid_t gid, char **why)
{
    char *copy = strdup(dir);
    const char *failed = dir;
    int top = -1, result = -1;

    *why = NULL;
    if (dir[0] == '\0') {
        free(copy);
        return fail(why, "(storage)", NULL, EINVAL);
    }
    if (copy == NULL)
        return fail(why, dir, NULL, ENOMEM);
    if (make_parents(copy, &failed) != 0) {
        fail(why, failed, NULL, errno);
        goto done;
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        fail(why, dir, NULL, errno);
        goto done;
    }
    top = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (top < 0 || own_directory(top, uid, gid) != 0) {
        fail(why, dir, NULL, errno);
        goto done;
    }
    for (size_t i = 0; i < sizeof subdirectories / sizeof subdirectories[0]; i++)
        if (prepare_subdirectory(top, subdirectories[i], uid, gid) != 0) {
            fail(why, dir, subdirectories[i], errno);
            goto done;
        }
    result = 0;
done:
    if (top >= 0)
        close(top);
    free(copy);
    if (result != 0)
        errno = EIO;    /* *why says what failed */
    return result;
}

/* dir "/" name, or NULL with errno (EINVAL for an empty or absolute name or one with a ".." part). */
static char *store_path(const char *dir, const char *name)
{
    char *path;

    if (name == NULL || name[0] == '\0' || name[0] == '/') {
        errno = EINVAL;
        return NULL;
    }
    for (const char *part = name;;) {
        const char *slash = strchr(part, '/');
        if (strncmp(part, "..", 2) == 0 && (part[2] == '/' || part[2] == '\0')) {
            errno = EINVAL;
            return NULL;
        }
        if (slash == NULL)
            break;
        part = slash + 1;
    }
    if (asprintf(&path, "%s/%s", dir, name) < 0) {
        errno = ENOMEM;
        return NULL;
    }
    return path;
}

/* Writes all of data to fd, through EINTR and short writes. 0 or -1 (errno). */
static int write_all(int fd, const char *data, size_t length)
{
    while (length > 0) {
        ssize_t n = write(fd, data, length);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        data += n;
        length -= (size_t)n;
    }
    return 0;
}

/* fsync(fd), again on EINTR. 0 or -1 (errno). */
static int sync_fd(int fd)
{
    while (fsync(fd) != 0)
        if (errno != EINTR)
            return -1;
    return 0;
}

/* fsync of the directory holding path, so that a rename in it is on disk. 0 or -1 (errno). */
static int sync_parent(const char *path)
{
    char *parent = strdup(path), *slash;
    int fd, result = -1;

    if (parent == NULL)
        return -1;
    slash = strrchr(parent, '/');
    if (slash == parent)
        slash[1] = '\0';        /* "/x": the root */
    else if (slash != NULL)
        *slash = '\0';
    else
        strcpy(parent, ".");    /* fits: path was not empty */
    fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        result = sync_fd(fd);
        int error = errno;
        close(fd);
        errno = error;
    }
    free(parent);
    return result;
}

int acme_store_write(const char *dir, const char *name, const void *data, size_t length)
{
    char *path = store_path(dir, name), *temporary = NULL;
    int fd = -1, error = 0;

    if (path == NULL)
        return -1;
    if (asprintf(&temporary, "%s.tmp-XXXXXX", path) < 0) {
        temporary = NULL;
        error = ENOMEM;
        goto done;
    }
    /* mkostemp makes the file 0600; fchmod says so whatever the umask did. */
    fd = mkostemp(temporary, O_CLOEXEC);
    if (fd < 0) {
        error = errno;
        free(temporary);
        temporary = NULL;       /* nothing to remove */
        goto done;
    }
    if (fchmod(fd, 0600) != 0 || write_all(fd, data, length) != 0 || sync_fd(fd) != 0) {
        error = errno;
        goto done;
    }
    /* close's error matters (NFS reports write errors there); it is not retried on EINTR (Linux
     * closes the fd whatever close returns). */
    if (close(fd) != 0) {
        fd = -1;
        error = errno;
        goto done;
    }
    fd = -1;
    if (rename(temporary, path) != 0) {
        error = errno;
        goto done;
    }
    free(temporary);
    temporary = NULL;           /* renamed: nothing to remove */
    if (sync_parent(path) != 0)
        error = errno;
done:
    if (fd >= 0)
        close(fd);
    if (temporary != NULL)
        unlink(temporary);
    free(temporary);
    free(path);
    errno = error;
    return error != 0 ? -1 : 0;
}

/* Reads fd to its end into a malloc'd NUL-terminated buffer, at most ACME_STORE_FILE_MAX bytes
 * (EFBIG beyond); size_hint is where to start. NULL with errno. */
static char *read_whole(int fd, size_t size_hint, size_t *length)
{
    size_t capacity = size_hint < ACME_STORE_FILE_MAX ? size_hint + 1 : ACME_STORE_FILE_MAX + 1;
    size_t used = 0;
    char *buffer = malloc(capacity + 1), *grown;

    if (buffer == NULL)
        return NULL;
    for (;;) {
        ssize_t n;
        if (used == capacity) {
            if (capacity > ACME_STORE_FILE_MAX) {
                free(buffer);
                errno = EFBIG;
                return NULL;
            }
            capacity = capacity * 2 > ACME_STORE_FILE_MAX + 1 ? ACME_STORE_FILE_MAX + 1 : capacity * 2;
            grown = realloc(buffer, capacity + 1);
            if (grown == NULL) {
                free(buffer);
                return NULL;
            }
            buffer = grown;
        }
        n = read(fd, buffer + used, capacity - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int error = errno;
            free(buffer);
            errno = error;
            return NULL;
        }
        if (n == 0)
            break;
        used += (size_t)n;
    }
    if (used > ACME_STORE_FILE_MAX) {
        free(buffer);
        errno = EFBIG;
        return NULL;
    }
    buffer[used] = '\0';
    if (length != NULL)
        *length = used;
    return buffer;
}

char *acme_store_read(const char *dir, const char *name, size_t *length)
{
    char *path = store_path(dir, name), *data = NULL;
    struct stat st;
    int fd, error;

    if (path == NULL)
        return NULL;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    error = errno;
    free(path);
    if (fd < 0) {
        errno = error;
        return NULL;
    }
    if (fstat(fd, &st) != 0)
        error = errno;
    else if (!S_ISREG(st.st_mode))
        error = EINVAL;
    else if (st.st_size > ACME_STORE_FILE_MAX)
        error = EFBIG;
    else {
        data = read_whole(fd, (size_t)st.st_size, length);
        error = errno;
    }
    close(fd);
    if (data == NULL)
        errno = error;
    return data;
}

int acme_store_remove(const char *dir, const char *name)
{
    char *path = store_path(dir, name);
    int result, error;

    if (path == NULL)
        return -1;
    result = unlink(path);
    error = errno;
    free(path);
    if (result != 0 && error == ENOENT)
        return 0;
    errno = error;
    return result;
}

int acme_store_lock(const char *dir, const char *name)
{
    char *path = store_path(dir, name);
    int fd, error;

    if (path == NULL)
        return -1;
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
    error = errno;
    free(path);
    if (fd < 0) {
        errno = error;
        return -1;
    }
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR)
            continue;
        error = errno;
        close(fd);
        errno = error;
        return -1;
    }
    return fd;
}
