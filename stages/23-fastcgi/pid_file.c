/* pid_file.c -- the pid file (pid_file.h). */
#define _GNU_SOURCE /* asprintf, mkostemp */
#include "pid_file.h"

#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The file pid_file_write wrote (a copy of its path); NULL: none. */
static char *written;

/* The pid path holds, or 0 if it holds none (missing, unreadable, or not
 * a number alone on its line). */
static long read_pid(const char *path)
{
    char text[32], *end;
    long pid;
    FILE *f = fopen(path, "re");

    if (f == NULL)
        return 0;
    if (fgets(text, sizeof text, f) == NULL)
        text[0] = '\0';
    if (fclose(f) == EOF)
        log_errno("close %s", path);
    errno = 0;
    pid = strtol(text, &end, 10);
    if (errno != 0 || end == text || (*end != '\n' && *end != '\0') || pid <= 0)
        return 0;
    return pid;
}

/* The name of process `pid` (/proc/PID/comm) into name, or "" if there
 * is no such process. */
static void process_name(long pid, char *name, size_t size)
{
    char path[64];
    FILE *f;

    name[0] = '\0';
    snprintf(path, sizeof path, "/proc/%ld/comm", pid);
    f = fopen(path, "re");
    if (f == NULL)
        return;
    if (fgets(name, (int)size, f) == NULL)
        name[0] = '\0';
    name[strcspn(name, "\n")] = '\0';
    if (fclose(f) == EOF)
        log_errno("close %s", path);
}

int pid_file_check(const char *path)
{
    char theirs[32], ours[32];
    long pid = read_pid(path);

    if (pid == 0 || pid == (long)getpid())
        return 0;
    process_name(pid, theirs, sizeof theirs);
    process_name((long)getpid(), ours, sizeof ours);
    if (theirs[0] == '\0' || strcmp(theirs, ours) != 0)
        return 0; /* stale: replaced once the ports are bound */
    fprintf(stderr, "rsp: %s: already running as PID %ld (setting 'pid_file'); signal that one "
                    "(kill -HUP %ld reloads it) or stop it first\n", path, pid, pid);
    return -1;
}

/* Writes all of text to fd. Returns 0, or -1 with errno set. */
static int write_all(int fd, const char *text, size_t length)
{
    while (length > 0) {
        ssize_t n = write(fd, text, length);

        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1)
            return -1;
        text += n;
        length -= (size_t)n;
    }
    return 0;
}

int pid_file_write(const char *path)
{
    char text[32];
    char *temporary;
    int fd, length = snprintf(text, sizeof text, "%ld\n", (long)getpid());

    if (asprintf(&temporary, "%s.XXXXXX", path) == -1) {
        log_msg("out of memory writing the pid file %s", path);
        return -1;
    }
    fd = mkostemp(temporary, O_CLOEXEC);
    if (fd == -1) {
        log_errno("setting 'pid_file': cannot create a file beside %s", path);
        free(temporary);
        return -1;
    }
    /* As nginx's: readable by all (mkostemp makes it 0600). */
    if (fchmod(fd, 0644) == -1 || write_all(fd, text, (size_t)length) == -1) {
        log_errno("setting 'pid_file': cannot write %s", temporary);
        goto fail;
    }
    if (close(fd) == -1) {
        fd = -1;
        log_errno("setting 'pid_file': cannot write %s", temporary);
        goto fail;
    }
    fd = -1;
    if (rename(temporary, path) == -1) {
        log_errno("setting 'pid_file': cannot rename %s to %s", temporary, path);
        goto fail;
    }
    free(temporary);
    free(written);
    written = strdup(path);
    if (written == NULL)
        log_msg("out of memory: the pid file %s stays after rsp stops", path);
    return 0;
fail:
    if (fd != -1 && close(fd) == -1)
        log_errno("close %s", temporary);
    if (unlink(temporary) == -1)
        log_errno("unlink %s", temporary);
    free(temporary);
    return -1;
}

void pid_file_remove(void)
{
    if (written == NULL)
        return;
    /* Having given up root, rsp may not remove a file from root's
     * directory: the next start finds it stale and replaces it. */
    if (read_pid(written) == (long)getpid() && unlink(written) == -1 && errno != ENOENT)
        log_errno("setting 'pid_file': cannot remove %s (the next start replaces it)", written);
    free(written);
    written = NULL;
}
