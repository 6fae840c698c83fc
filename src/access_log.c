/* access_log.c -- the access log's buffer, file and format. */
#include "access_log.h"

#include "buffer.h"
#include "log.h"
#include "reactor.h"
#include "timer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FLUSH_AT (64 * 1024)   /* bytes buffered that are written at once */
#define FLUSH_AFTER 1.0        /* seconds a line may wait in the buffer */

static struct {
    int fd;                    /* -1: no log */
    char *path;
    bool timed;
    struct buffer pending;
    struct timer flush_timer;
    bool timer_ready;
    bool failing;              /* the last write failed: logged once, until one works */
} log_file = { .fd = -1, .pending = BUFFER_INIT };

static int open_path(const char *path)
{
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
}

/* Writes the buffer out. A full disk or a failing file loses the lines
 * (logged once), never the proxy. */
static void flush(void)
{
    size_t done = 0, length = buffer_length(&log_file.pending);
    const char *data = buffer_bytes(&log_file.pending);

    timer_disarm(&log_file.flush_timer);
    while (done < length && log_file.fd != -1) {
        ssize_t n = write(log_file.fd, data + done, length - done);
        if (n == -1 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (!log_file.failing)
                log_errno("access_log: writing %s (lines are lost until it works again)", log_file.path);
            log_file.failing = true;
            break;
        }
        done += (size_t)n;
        log_file.failing = false;
    }
    buffer_free(&log_file.pending);
}

static void flush_timer_fired(struct timer *timer)
{
    (void)timer;
    flush();
}

int access_log_open(const char *path, bool timed)
{
    char *copy;
    int fd;

    if (log_file.fd != -1 && strcmp(log_file.path, path) == 0) {
        log_file.timed = timed;
        return 0;
    }
    copy = strdup(path);
    if (copy == NULL) {
        errno = ENOMEM;
        return -1;
    }
    fd = open_path(path);
    if (fd == -1) {
        int error = errno;
        free(copy);
        errno = error;
        return -1;
    }
    access_log_close();
    log_file.fd = fd;
    log_file.path = copy;
    log_file.timed = timed;
    if (!log_file.timer_ready) {
        timer_init(&log_file.flush_timer, flush_timer_fired, NULL);
        log_file.timer_ready = true;
    }
    return 0;
}

void access_log_give_to(uid_t uid)
{
    struct stat st;

    if (log_file.fd == -1)
        return;
    if (fstat(log_file.fd, &st) == 0 && st.st_uid == uid)
        return; /* already the user's (chown would need CAP_CHOWN even so) */
    if (fchown(log_file.fd, uid, (gid_t)-1) == -1)
        log_errno("access_log: cannot hand %s to uid %u (rsp logs on, but a SIGUSR1 may fail to "
                  "reopen it: have logrotate create it for that user)", log_file.path, (unsigned)uid);
}

bool access_log_enabled(void)
{
    return log_file.fd != -1;
}

void access_log_reopen(void)
{
    int fd;

    if (log_file.fd == -1)
        return;
    flush();
    fd = open_path(log_file.path);
    if (fd == -1) {
        /* Keep writing to the old file: better than losing lines. */
        log_errno("access_log: cannot reopen %s; still writing to the old file", log_file.path);
        return;
    }
    if (close(log_file.fd) == -1)
        log_errno("access_log: closing %s", log_file.path);
    log_file.fd = fd;
    log_msg("access_log: reopened %s", log_file.path);
}

void access_log_close(void)
{
    if (log_file.fd == -1)
        return;
    flush();
    if (close(log_file.fd) == -1)
        log_errno("access_log: closing %s", log_file.path);
    log_file.fd = -1;
    free(log_file.path);
    log_file.path = NULL;
}

/* Appends text in quotes, escaped; "-" when there is none. Returns 0, or
 * -1 if out of memory. */
static int append_quoted(struct buffer *out, struct log_text text)
{
    static const char hex[] = "0123456789ABCDEF";
    char piece[4] = { '\\', 'x', 0, 0 };
    size_t start = 0;
    int rc = 0;

    if (text.data == NULL)
        return buffer_append(out, "\"-\"", 3);
    rc |= buffer_append(out, "\"", 1);
    for (size_t i = 0; i < text.length; i++) {
        unsigned char c = (unsigned char)text.data[i];

        if (c >= 0x20 && c <= 0x7e && c != '"' && c != '\\')
            continue;
        rc |= buffer_append(out, text.data + start, i - start);
        piece[2] = hex[c >> 4];
        piece[3] = hex[c & 15];
        rc |= buffer_append(out, piece, 4);
        start = i + 1;
    }
    rc |= buffer_append(out, text.data + start, text.length - start);
    rc |= buffer_append(out, "\"", 1);
    return rc == 0 ? 0 : -1;
}

int access_log_format(struct buffer *out, const struct access_entry *e, const char *time, bool timed)
{
    char field[64];
    int n, rc = 0;

    rc |= buffer_append(out, e->client, strlen(e->client));
    rc |= buffer_append(out, " - - [", 6);
    rc |= buffer_append(out, time, strlen(time));
    rc |= buffer_append(out, "] ", 2);
    rc |= append_quoted(out, e->request);
    n = snprintf(field, sizeof field, " %d %llu ", e->status, (unsigned long long)e->body_bytes);
    rc |= buffer_append(out, field, (size_t)n);
    rc |= append_quoted(out, e->referer);
    rc |= buffer_append(out, " ", 1);
    rc |= append_quoted(out, e->agent);
    if (timed) {
        n = snprintf(field, sizeof field, " %.3f ", e->seconds);
        rc |= buffer_append(out, field, (size_t)n);
        rc |= append_quoted(out, (struct log_text){ e->backend, e->backend ? strlen(e->backend) : 0 });
    }
    rc |= buffer_append(out, "\n", 1);
    return rc == 0 ? 0 : -1;
}

void access_log_write(const struct access_entry *e)
{
    struct buffer *out = &log_file.pending;
    size_t before = buffer_length(out);
    char time_text[64];
    time_t now = time(NULL);
    struct tm tm;

    if (log_file.fd == -1)
        return;
    if (localtime_r(&now, &tm) == NULL ||
        strftime(time_text, sizeof time_text, "%d/%b/%Y:%H:%M:%S %z", &tm) == 0)
        snprintf(time_text, sizeof time_text, "01/Jan/1970:00:00:00 +0000");
    if (access_log_format(out, e, time_text, log_file.timed) == -1) {
        log_msg("access_log: out of memory; a line is lost");
        if (before == 0)
            buffer_free(out);
        else
            out->end = out->start + before; /* drop the partial line */
        return;
    }
    if (buffer_length(out) >= FLUSH_AT)
        flush();
    else if (!timer_armed(&log_file.flush_timer) &&
             timer_arm(&log_file.flush_timer, reactor_now() + FLUSH_AFTER) == -1)
        flush();
}
