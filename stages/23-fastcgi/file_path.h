/* file_path.h -- from a request target to an open file beneath a root
 * directory, for the pools that serve files.
 *
 * The target's path is percent-decoded once and refused (404) when it
 * could name something it should not: a decoded NUL, an encoded slash, a
 * "." or ".." segment, any segment starting with '.' (.git, .env,
 * .htpasswd), a NUL byte. What is left is a path relative to the root, opened with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS): the kernel resolves
 * it one component at a time and fails any step, symlinks included, that
 * would leave the root. Where openat2 is missing (ENOSYS, before Linux
 * 5.6) or refused (EPERM, a seccomp filter), each component is opened in
 * turn with O_NOFOLLOW instead, so every symlink is refused. Setting the
 * environment variable RSP_NO_OPENAT2=1 (read once, at the first call)
 * forces that walk, for the tests. */
#ifndef RSP_FILE_PATH_H
#define RSP_FILE_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

/* The longest relative path rsp opens (with its NUL); longer is 404. */
#define FILE_PATH_MAX 4096

/* What file_open found. The caller owns fd, path and location, and gives
 * them back with file_found_release. */
struct file_found {
    int fd;            /* 200: the open file (O_RDONLY|O_NONBLOCK); else -1 */
    struct stat st;    /* 200: its fstat */
    char *path;        /* 200: its path relative to the root ("dir/index.html"): for
                        * mime_type_of and the precompressed siblings; else NULL */
    char *location;    /* 301: the Location value ("/dir/" and the query, if any); else NULL */
    int error;         /* 500: the errno of what failed, for the log; else 0 */
};

/* Decodes the path of target (length bytes, origin form: '/' then the
 * path, then '?' and the query, if any) into out (cap bytes) as a path
 * relative to the root, its segments joined by single '/' ("" for the
 * root itself), and sets *trailing_slash when the path ends with '/'.
 * Returns 0, or 404 for a refused path (see above; also a malformed
 * percent-escape, a target not starting with '/', or one too long). */
int file_path_decode(const char *target, size_t length, char *out, size_t cap,
                     bool *trailing_slash);

/* Opens what target names beneath root_fd (a directory, O_PATH is fine)
 * and returns the status to answer with: 200 (a regular file, or a
 * directory's index.html when the path ends with '/'), 301 (a directory
 * named without its trailing slash), 404 (refused, missing, a symlink out
 * of the root, neither a regular file nor a directory, a directory without
 * index.html), 403 (EACCES or EPERM), 500 (anything else: out->error).
 * *out is filled as the status says. */
int file_open(int root_fd, const char *target, size_t length, struct file_found *out);

/* Opens the sibling path + suffix (".br", ".gz") of a file file_open
 * found, beneath root_fd, the same way; 200 only when it is a regular
 * file (then *out holds it), else 404, 403 or 500 as for file_open. */
int file_open_variant(int root_fd, const char *path, const char *suffix, struct file_found *out);

/* Closes and frees what *found holds, leaving it empty (fd -1). */
void file_found_release(struct file_found *found);

#endif
