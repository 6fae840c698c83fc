/* acme.c -- serving ACME http-01 tokens from acme_webroot. */
#include "acme.h"

#include "log.h"
#include "reply.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ACME_TOKEN_MAX 255      /* Let's Encrypt's are 43 characters */
#define ACME_FILE_MAX 4096      /* a key authorization is under 200 bytes */

bool acme_path(const char *path, size_t length)
{
    return length >= sizeof ACME_PREFIX - 1 && memcmp(path, ACME_PREFIX, sizeof ACME_PREFIX - 1) == 0;
}

/* RFC 8555, section 8.3: a token is base64url without padding. So there
 * is no '.', no '/', no '%': nothing that could lead out of the directory. */
static bool token_valid(const char *token, size_t length)
{
    if (length == 0 || length > ACME_TOKEN_MAX)
        return false;
    for (size_t i = 0; i < length; i++) {
        char c = token[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-'))
            return false;
    }
    return true;
}

/* Opens name in directory `at`; O_NOFOLLOW: a symbolic link is refused,
 * wherever it points. Closes `at`. Returns the fd or -1 (errno set). */
static int open_step(int at, const char *name, int flags)
{
    int fd = openat(at, name, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    int error = errno;

    if (close(at) == -1)
        log_errno("close (acme_webroot)");
    errno = error;
    return fd;
}

/* Reads the token's file into file (up to size bytes). Returns its length,
 * or -1 when there is nothing to serve (errno says why). */
static ssize_t read_token(const char *webroot, const char *token, char *file, size_t size)
{
    struct stat st;
    size_t used = 0;
    bool regular;
    int fd = open(webroot, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd != -1)
        fd = open_step(fd, ".well-known", O_RDONLY | O_DIRECTORY);
    if (fd != -1)
        fd = open_step(fd, "acme-challenge", O_RDONLY | O_DIRECTORY);
    if (fd != -1)
        fd = open_step(fd, token, O_RDONLY); /* O_NONBLOCK: a FIFO cannot make us wait */
    if (fd == -1)
        return -1;
    regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    if (!regular || (size_t)st.st_size > size) {
        if (regular)
            log_msg("acme_webroot: %s/.well-known/acme-challenge/%s is %lld bytes, more than a "
                    "token's answer can be", webroot, token, (long long)st.st_size);
        if (close(fd) == -1)
            log_errno("close (acme_webroot)");
        errno = ENOENT;
        return -1;
    }
    while (used < (size_t)st.st_size) {
        ssize_t n = read(fd, file + used, (size_t)st.st_size - used);
        if (n == -1 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* an error, or the file shrank: serve what there is */
        used += (size_t)n;
    }
    if (close(fd) == -1)
        log_errno("close (acme_webroot)");
    return (ssize_t)used;
}

int acme_answer(const char *webroot, const char *path, size_t length, bool get_or_head,
                bool head_only, const char *connection, struct buffer *out)
{
    static const char octets[] = "Content-Type: application/octet-stream\r\n";
    static const char html_allow[] = "Content-Type: text/html; charset=utf-8\r\nAllow: GET, HEAD\r\n";
    const char *token = path + sizeof ACME_PREFIX - 1;
    size_t token_length = length - (sizeof ACME_PREFIX - 1);
    char name[ACME_TOKEN_MAX + 1], file[ACME_FILE_MAX], page[1024];
    ssize_t n;

    if (!get_or_head) {
        struct reply r = { 405, html_allow, sizeof html_allow - 1, page, 0 };
        r.body_length = reply_page(page, sizeof page, 405, "Only GET and HEAD reach ACME challenges.");
        return reply_append(out, &r, head_only, connection);
    }
    if (!token_valid(token, token_length))
        return reply_error(out, 404, head_only, connection);
    memcpy(name, token, token_length);
    name[token_length] = '\0';
    n = read_token(webroot, name, file, sizeof file);
    if (n == -1) {
        /* Not there (a token already used, a scanner guessing): quiet.
         * Anything else is the operator's business. */
        if (errno != ENOENT && errno != ENOTDIR && errno != ELOOP)
            log_errno("acme_webroot: %s/.well-known/acme-challenge/%s", webroot, name);
        return reply_error(out, 404, head_only, connection);
    }
    struct reply r = { 200, octets, sizeof octets - 1, file, (size_t)n };
    return reply_append(out, &r, head_only, connection);
}
