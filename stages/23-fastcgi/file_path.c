/* file_path.c -- decoding a request path and opening it beneath a root
 * (see file_path.h). */
#define _GNU_SOURCE /* O_PATH */
#include "file_path.h"

#include "hex.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* How a file to serve is opened (also the walk's last component). */
#define FILE_FLAGS (O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)

/* openat2 fails with EAGAIN when a rename elsewhere raced its ".." check;
 * it is tried this many times before the request gets a 500. */
#define OPENAT2_TRIES 4

/* Whether the walk is used for every open: RSP_NO_OPENAT2=1 (the tests),
 * or openat2 said ENOSYS once. -1: not decided yet. */
static int walk_always = -1;

int file_path_decode(const char *target, size_t length, char *out, size_t cap,
                     bool *trailing_slash)
{
    const char *query = memchr(target, '?', length);
    size_t end = query ? (size_t)(query - target) : length;
    if (end == 0 || target[0] != '/' || cap == 0)
        return 404;
    *trailing_slash = target[end - 1] == '/';
    size_t n = 0, i = 0;
    while (i < end) {
        if (target[i] == '/') {
            i++;
            continue;
        }
        if (n > 0) {
            if (n + 1 >= cap)
                return 404;
            out[n++] = '/';
        }
        size_t segment = n;
        for (; i < end && target[i] != '/'; i++) {
            unsigned char c = (unsigned char)target[i];
            if (c == '%') {
                int hi = i + 2 < end ? hex_value((unsigned char)target[i + 1]) : -1;
                int lo = hi >= 0 ? hex_value((unsigned char)target[i + 2]) : -1;
                if (lo < 0)
                    return 404;
                c = (unsigned char)(hi * 16 + lo);
                if (c == '/')
                    return 404;
                i += 2;
            }
            if (c == '\0') /* decoded or raw: it would cut the path openat2 sees */
                return 404;
            if (n + 1 >= cap)
                return 404;
            out[n++] = (char)c;
        }
        /* ".", ".." and hidden files alike; but a first segment
         * ".well-known" is the place RFC 8615 gives to security.txt and
         * the like, and it is served. */
        if (out[segment] == '.' &&
            !(segment == 0 && n == 11 && memcmp(out, ".well-known", 11) == 0))
            return 404;
    }
    out[n] = '\0';
    return 0;
}

/* Whether the walk is to be used for every open (decided at the first call). */
static bool walk_only(void)
{
    if (walk_always < 0) {
        const char *v = getenv("RSP_NO_OPENAT2");
        walk_always = v && strcmp(v, "1") == 0;
    }
    return walk_always;
}

/* openat with EINTR retried; the fd or -1 with errno. */
static int openat_retry(int dir, const char *name, int flags)
{
    int fd;
    do
        fd = openat(dir, name, flags);
    while (fd < 0 && errno == EINTR);
    return fd;
}

/* Opens path beneath root one component at a time, never following a
 * symlink (O_NOFOLLOW: ELOOP for the last, ENOTDIR for the others); the fd
 * or -1 with errno. The intermediate directories are O_PATH: traversing
 * needs search permission on them, not read. */
static int walk(int root, const char *path)
{
    char copy[FILE_PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof copy) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(copy, path, n + 1);
    int dir = root;
    char *name = copy;
    for (char *slash; (slash = strchr(name, '/')); name = slash + 1) {
        *slash = '\0';
        int next = openat_retry(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int saved = errno;
        if (dir != root)
            close(dir);
        if (next < 0) {
            errno = saved;
            return -1;
        }
        dir = next;
    }
    int fd = openat_retry(dir, name, FILE_FLAGS | O_NOFOLLOW);
    int saved = errno;
    if (dir != root)
        close(dir);
    errno = saved;
    return fd;
}

/* Opens path ("." for the root itself) beneath root with openat2, or the
 * walk where openat2 is missing or refused; the fd or -1 with errno. */
static int open_beneath(int root, const char *path)
{
    if (walk_only())
        return walk(root, path);
    struct open_how how = {
        .flags = FILE_FLAGS,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    long fd = -1;
    for (int tries = 0; tries < OPENAT2_TRIES; tries++) {
        fd = syscall(SYS_openat2, root, path, &how, sizeof how);
        if (fd >= 0 || (errno != EINTR && errno != EAGAIN))
            break;
    }
    if (fd >= 0)
        return (int)fd;
    if (errno == ENOSYS)
        walk_always = 1; /* an old kernel: it will not grow openat2 */
    if (errno == ENOSYS || errno == EPERM)
        return walk(root, path);
    return -1;
}

/* The status for an open that failed with err. */
static int status_of(int err)
{
    switch (err) {
    case ENOENT: case ENOTDIR: case ELOOP: case EXDEV: case ENAMETOOLONG:
    case ENXIO: case ENODEV: /* a socket, a device without a driver */
        return 404;
    case EACCES: case EPERM:
        return 403;
    default:
        return 500;
    }
}

/* Opens path beneath root and fstats it into out; 0, or the status. */
static int open_and_stat(int root, const char *path, struct file_found *out)
{
    int fd = open_beneath(root, path[0] ? path : ".");
    if (fd < 0) {
        int status = status_of(errno);
        if (status == 500)
            out->error = errno;
        return status;
    }
    if (fstat(fd, &out->st) < 0) {
        out->error = errno;
        close(fd);
        return 500;
    }
    out->fd = fd;
    return 0;
}

/* Keeps a copy of path in out->path and returns 200, or 500 (the file
 * closed) when memory runs out. */
static int found(struct file_found *out, const char *path)
{
    out->path = strdup(path);
    if (!out->path) {
        out->error = ENOMEM;
        file_found_release(out);
        return 500;
    }
    return 200;
}

/* The 301 for a directory: Location is the target's path, a '/', then
 * its query; 500 when memory runs out. The path's leading slashes become
 * one: "//example.com" (a directory of that name) must not redirect to
 * "//example.com/", which a browser reads as another host. */
static int redirect(struct file_found *out, const char *target, size_t length)
{
    while (length > 1 && target[0] == '/' && target[1] == '/') {
        target++;
        length--;
    }
    const char *query = memchr(target, '?', length);
    size_t path = query ? (size_t)(query - target) : length;
    char *location = malloc(length + 2);
    if (!location) {
        out->error = ENOMEM;
        return 500;
    }
    memcpy(location, target, path);
    location[path] = '/';
    memcpy(location + path + 1, target + path, length - path);
    location[length + 1] = '\0';
    out->location = location;
    return 301;
}

int file_open(int root_fd, const char *target, size_t length, struct file_found *out)
{
    *out = (struct file_found){ .fd = -1 };
    char path[FILE_PATH_MAX];
    bool slash;
    /* Room for "/index.html" after any path that decodes. */
    if (file_path_decode(target, length, path, sizeof path - 11, &slash) != 0)
        return 404;
    int status = open_and_stat(root_fd, path, out);
    if (status)
        return status;
    if (S_ISREG(out->st.st_mode) && !slash)
        return found(out, path);
    bool directory = S_ISDIR(out->st.st_mode);
    file_found_release(out);
    if (!directory)
        return 404; /* a FIFO, a device, a socket; or a file named with a '/' after it */
    if (!slash)
        return redirect(out, target, length);
    strcat(path, path[0] ? "/index.html" : "index.html");
    status = open_and_stat(root_fd, path, out);
    if (status)
        return status;
    if (S_ISREG(out->st.st_mode))
        return found(out, path);
    file_found_release(out);
    return 404;
}

int file_open_variant(int root_fd, const char *path, const char *suffix, struct file_found *out)
{
    *out = (struct file_found){ .fd = -1 };
    char variant[FILE_PATH_MAX];
    size_t n = strlen(path), s = strlen(suffix);
    if (n == 0 || n + s >= sizeof variant)
        return 404;
    memcpy(variant, path, n);
    memcpy(variant + n, suffix, s + 1);
    int status = open_and_stat(root_fd, variant, out);
    if (status)
        return status;
    if (S_ISREG(out->st.st_mode))
        return found(out, variant);
    file_found_release(out);
    return 404;
}

void file_found_release(struct file_found *found)
{
    if (found->fd >= 0)
        close(found->fd);
    found->fd = -1;
    free(found->path);
    found->path = NULL;
    free(found->location);
    found->location = NULL;
}
