/* access_log.c -- the access log's buffer, file and format. */
#define _GNU_SOURCE /* memrchr */
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

/* One open log: a file, or standard error, and the lines waiting for it. */
struct access_log {
    struct access_log *next;   /* the process's other open logs */
    unsigned refs;             /* the configs that name it */
    int fd;                    /* -1: closed (access_log_close) */
    char *path;                /* as the first config to name it wrote it */
    bool is_stderr;            /* fd is STDERR_FILENO: never closed nor reopened */
    dev_t dev;                 /* the file fd is open on: another path to it */
    ino_t ino;                 /* shares this log (access_log_open) */
    struct buffer pending;
    struct timer flush_timer;
    bool failing;              /* the last write failed: logged once, until one works */
};

/* Every log this process has open, and who a file it creates belongs to. */
static struct access_log *logs;
static struct {
    bool set;
    uid_t uid;
    gid_t gid;
} new_file_owner;

bool access_log_is_stderr(const char *path)
{
    return strcmp(path, "stderr") == 0 || strcmp(path, "-") == 0;
}

void access_log_set_owner(uid_t uid, gid_t gid)
{
    new_file_owner.set = true;
    new_file_owner.uid = uid;
    new_file_owner.gid = gid;
}

/* Opens the file at path for appending, creating it (0640) if missing;
 * *created says whether this open made it. Returns the fd, or -1. */
static int open_file(const char *path, bool *created)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0640);

    *created = fd != -1;
    if (fd != -1 || errno != EEXIST)
        return fd;
    fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    /* Gone since (or a dangling symlink, which O_EXCL calls existing):
     * created the plain way, its owner left as it comes. */
    if (fd == -1 && errno == ENOENT)
        fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    return fd;
}

/* Opens path (a file, or standard error). A file this open creates, while
 * rsp is root and will become `user`, is given to that user and group,
 * 0640 (access_log_set_owner): what logrotate's `create` makes of the
 * next one. A file that existed keeps its owner, group and mode. Returns
 * the fd, or -1 with errno set. */
static int open_path(const char *path)
{
    bool created;
    int fd;

    if (access_log_is_stderr(path))
        return STDERR_FILENO;
    fd = open_file(path, &created);
    /* (Once rsp is the user, a file it creates is the user's anyway.) */
    if (fd == -1 || !created || !new_file_owner.set || geteuid() != 0)
        return fd;
    if (fchown(fd, new_file_owner.uid, new_file_owner.gid) == -1 || fchmod(fd, 0640) == -1)
        log_errno("access_log: cannot give %s to uid %u, gid %u", path, (unsigned)new_file_owner.uid,
                  (unsigned)new_file_owner.gid);
    return fd;
}

/* How many bytes from data (length > 0) one write(2) may take: all of them
 * for a file (O_APPEND writes whole); on standard error, which workers
 * share and which may be a pipe or a socket, one line, so that no other
 * process's line lands inside it (a pipe writes up to PIPE_BUF = 4096
 * bytes at once; a longer line may be split by another's). */
static size_t write_span(const struct access_log *log, const char *data, size_t length)
{
    const char *eol;

    if (!log->is_stderr)
        return length;
    eol = memchr(data, '\n', length);
    return eol != NULL ? (size_t)(eol - data) + 1 : length;
}

/* Writes log's buffer out. A full disk, a failing file or a non-blocking
 * standard error that is full (EAGAIN) loses the lines (logged once),
 * never stalls the proxy. */
static void flush(struct access_log *log)
{
    size_t done = 0, length = buffer_length(&log->pending);
    const char *data = buffer_bytes(&log->pending);

    timer_disarm(&log->flush_timer);
    while (done < length && log->fd != -1) {
        ssize_t n = write(log->fd, data + done, write_span(log, data + done, length - done));
        if (n == -1 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (!log->failing)
                log_errno("access_log: writing %s (lines are lost until it works again)", log->path);
            log->failing = true;
            break;
        }
        done += (size_t)n;
        log->failing = false;
    }
    buffer_free(&log->pending);
}

static void flush_timer_fired(struct timer *timer)
{
    flush(timer->closure);
}

/* The open log already writing to path: the same path, standard error
 * for standard error, or (st not NULL) the same file. NULL if none. */
static struct access_log *find_open(const char *path, const struct stat *st)
{
    for (struct access_log *log = logs; log != NULL; log = log->next) {
        if (log->fd == -1)
            continue;
        if (st == NULL ? strcmp(log->path, path) == 0 || (log->is_stderr && access_log_is_stderr(path))
                       : !log->is_stderr && log->dev == st->st_dev && log->ino == st->st_ino)
            return log;
    }
    return NULL;
}

struct access_log *access_log_open(const char *path)
{
    struct access_log *log = find_open(path, NULL);
    struct stat st = { 0 };
    int fd;

    if (log != NULL) {
        log->refs++;
        return log;
    }
    fd = open_path(path);
    if (fd == -1)
        return NULL;
    if (fd != STDERR_FILENO && fstat(fd, &st) == 0 && (log = find_open(path, &st)) != NULL) {
        /* Another path to a file open already: one fd, one buffer. */
        if (close(fd) == -1)
            log_errno("access_log: closing %s", path);
        log->refs++;
        return log;
    }
    log = calloc(1, sizeof *log);
    if (log == NULL || (log->path = strdup(path)) == NULL) {
        free(log);
        if (fd != STDERR_FILENO)
            close(fd);
        errno = ENOMEM;
        return NULL;
    }
    log->refs = 1;
    log->fd = fd;
    log->is_stderr = fd == STDERR_FILENO;
    log->dev = st.st_dev;
    log->ino = st.st_ino;
    log->pending = (struct buffer)BUFFER_INIT;
    timer_init(&log->flush_timer, flush_timer_fired, log);
    log->next = logs;
    logs = log;
    return log;
}

/* Writes what log has buffered and closes its file (no more lines). */
static void close_log(struct access_log *log)
{
    if (log->fd == -1)
        return;
    flush(log);
    if (!log->is_stderr && close(log->fd) == -1)
        log_errno("access_log: closing %s", log->path);
    log->fd = -1;
}

void access_log_release(struct access_log *log)
{
    struct access_log **link;

    if (log == NULL || --log->refs > 0)
        return;
    close_log(log);
    for (link = &logs; *link != log; link = &(*link)->next)
        ;
    *link = log->next;
    free(log->path);
    free(log);
}

const char *access_log_path(const struct access_log *log)
{
    return log->path;
}

void access_log_give_to(uid_t uid)
{
    struct stat st;

    for (struct access_log *log = logs; log != NULL; log = log->next) {
        if (log->fd == -1 || log->is_stderr)
            continue;
        if (fstat(log->fd, &st) == 0 && st.st_uid == uid)
            continue; /* already the user's (chown would need CAP_CHOWN even so) */
        if (fchown(log->fd, uid, (gid_t)-1) == -1)
            log_errno("access_log: cannot hand %s to uid %u (rsp logs on, but a SIGUSR1 may fail to "
                      "reopen it: have logrotate create it for that user)", log->path, (unsigned)uid);
    }
}

/* Writes what log has buffered, then opens its path again (after
 * logrotate renamed the file); keeps the old file if that fails. */
static void reopen_log(struct access_log *log)
{
    struct stat st;
    int fd;

    if (log->fd == -1)
        return;
    flush(log);
    if (log->is_stderr)
        return; /* nothing was renamed: nothing to reopen */
    fd = open_path(log->path);
    if (fd == -1) {
        /* Keep writing to the old file: better than losing lines. */
        log_errno("access_log: cannot reopen %s; still writing to the old file", log->path);
        return;
    }
    if (close(log->fd) == -1)
        log_errno("access_log: closing %s", log->path);
    log->fd = fd;
    if (fstat(fd, &st) == 0) {
        log->dev = st.st_dev;
        log->ino = st.st_ino;
    }
    log_msg("access_log: reopened %s", log->path);
}

void access_log_reopen(void)
{
    for (struct access_log *log = logs; log != NULL; log = log->next)
        reopen_log(log);
}

void access_log_close(void)
{
    for (struct access_log *log = logs; log != NULL; log = log->next)
        close_log(log);
}

/* Appends text with '"', '\\', space (if space_too) and bytes below 0x20
 * or above 0x7e written as \\xHH. Returns 0, or -1 if out of memory. */
static int append_escaped(struct buffer *out, struct log_text text, bool space_too)
{
    static const char hex[] = "0123456789ABCDEF";
    char piece[4] = { '\\', 'x', 0, 0 };
    size_t start = 0;
    int rc = 0;

    for (size_t i = 0; i < text.length; i++) {
        unsigned char c = (unsigned char)text.data[i];

        if (c >= 0x20 && c <= 0x7e && c != '"' && c != '\\' && (c != ' ' || !space_too))
            continue;
        if (i > start) /* (out may still be empty: no NULL + 0) */
            rc |= buffer_append(out, text.data + start, i - start);
        piece[2] = hex[c >> 4];
        piece[3] = hex[c & 15];
        rc |= buffer_append(out, piece, 4);
        start = i + 1;
    }
    rc |= buffer_append(out, text.data + start, text.length - start);
    return rc == 0 ? 0 : -1;
}

/* Appends text in quotes, escaped; "-" when there is none. Returns 0, or
 * -1 if out of memory. */
static int append_quoted(struct buffer *out, struct log_text text)
{
    int rc = 0;

    if (text.data == NULL)
        return buffer_append(out, "\"-\"", 3);
    rc |= buffer_append(out, "\"", 1);
    rc |= append_escaped(out, text, false);
    rc |= buffer_append(out, "\"", 1);
    return rc == 0 ? 0 : -1;
}

/* The name part of a Host value: without ":PORT" ("[v6]" kept whole). */
static struct log_text host_name(struct log_text host)
{
    const char *end;

    if (host.data == NULL)
        return host;
    if (host.length > 0 && host.data[0] == '[')
        end = memchr(host.data, ']', host.length);
    else
        end = memchr(host.data, ':', host.length);
    if (end != NULL)
        host.length = (size_t)(end - host.data) + (host.data[0] == '[');
    return host;
}

/* Appends text as a JSON string, or null when there is none: '"' and '\\'
 * escaped, every other byte below 0x20 or above 0x7e as \\u00HH (so the
 * line is ASCII and read as Latin-1 gives the bytes back). Returns 0, or
 * -1 if out of memory. */
static int append_json_string(struct buffer *out, struct log_text text)
{
    static const char hex[] = "0123456789abcdef";
    char piece[6] = { '\\', 'u', '0', '0', 0, 0 };
    size_t start = 0;
    int rc = 0;

    if (text.data == NULL)
        return buffer_append(out, "null", 4);
    rc |= buffer_append(out, "\"", 1);
    for (size_t i = 0; i < text.length; i++) {
        unsigned char c = (unsigned char)text.data[i];

        if (c >= 0x20 && c <= 0x7e && c != '"' && c != '\\')
            continue;
        rc |= buffer_append(out, text.data + start, i - start);
        if (c == '"' || c == '\\') {
            piece[4] = '\\';
            piece[5] = (char)c;
            rc |= buffer_append(out, piece + 4, 2);
        } else {
            piece[4] = hex[c >> 4];
            piece[5] = hex[c & 15];
            rc |= buffer_append(out, piece, 6);
        }
        start = i + 1;
    }
    rc |= buffer_append(out, text.data + start, text.length - start);
    rc |= buffer_append(out, "\"", 1);
    return rc == 0 ? 0 : -1;
}

/* Appends `,"name":` and text as a JSON string. */
static int append_json_field(struct buffer *out, const char *name, struct log_text text)
{
    int rc = 0;

    rc |= buffer_append(out, ",\"", 2);
    rc |= buffer_append(out, name, strlen(name));
    rc |= buffer_append(out, "\":", 2);
    rc |= append_json_string(out, text);
    return rc == 0 ? 0 : -1;
}

/* A NUL-terminated string as a log_text (NULL stays absent). */
static struct log_text text_of(const char *s)
{
    return (struct log_text){ s, s != NULL ? strlen(s) : 0 };
}

/* Cuts a request line into method, target and protocol at its first and
 * last spaces; what is not there is absent ("GET /" has no protocol). */
static void split_request(struct log_text line, struct log_text part[3])
{
    const char *first, *last;

    part[0] = part[1] = part[2] = (struct log_text){ NULL, 0 };
    if (line.data == NULL || (first = memchr(line.data, ' ', line.length)) == NULL)
        return;
    last = memrchr(line.data, ' ', line.length);
    part[0] = (struct log_text){ line.data, (size_t)(first - line.data) };
    if (last == first) {
        part[1] = (struct log_text){ first + 1, line.length - (size_t)(first + 1 - line.data) };
        return;
    }
    part[1] = (struct log_text){ first + 1, (size_t)(last - first - 1) };
    part[2] = (struct log_text){ last + 1, line.length - (size_t)(last + 1 - line.data) };
}

/* Appends e's line as one JSON object (README lists its fields). */
static int format_json(struct buffer *out, const struct access_entry *e, const char *time)
{
    struct log_text part[3];
    char field[128];
    int n, rc = 0;

    split_request(e->request, part);
    rc |= buffer_append(out, "{\"time\":", 8);
    rc |= append_json_string(out, text_of(time));
    rc |= append_json_field(out, "remote_addr", text_of(e->client));
    rc |= append_json_field(out, "host", host_name(e->host));
    n = snprintf(field, sizeof field, ",\"port\":%d", e->port != NULL ? atoi(e->port) : 0);
    rc |= buffer_append(out, field, (size_t)n);
    rc |= append_json_field(out, "method", part[0]);
    rc |= append_json_field(out, "path", part[1]);
    rc |= append_json_field(out, "protocol", part[2]);
    rc |= append_json_field(out, "request", e->request);
    n = snprintf(field, sizeof field, ",\"status\":%d,\"bytes\":%llu", e->status,
                 (unsigned long long)e->body_bytes);
    rc |= buffer_append(out, field, (size_t)n);
    rc |= append_json_field(out, "referer", e->referer);
    rc |= append_json_field(out, "user_agent", e->agent);
    n = snprintf(field, sizeof field, ",\"request_time\":%.3f", e->seconds);
    rc |= buffer_append(out, field, (size_t)n);
    rc |= append_json_field(out, "backend", text_of(e->backend));
    rc |= buffer_append(out, "}\n", 2);
    return rc == 0 ? 0 : -1;
}

int access_log_format(struct buffer *out, const struct access_entry *e, const char *time,
                      enum access_format format)
{
    char field[64];
    int n, rc = 0;

    if (format == ACCESS_JSON)
        return format_json(out, e, time);
    if (format == ACCESS_VHOST_COMBINED) {
        struct log_text host = host_name(e->host);

        if (host.data == NULL || host.length == 0)
            rc |= buffer_append(out, "-", 1);
        else
            rc |= append_escaped(out, host, true);
        rc |= buffer_append(out, ":", 1);
        rc |= buffer_append(out, e->port != NULL ? e->port : "-", e->port != NULL ? strlen(e->port) : 1);
        rc |= buffer_append(out, " ", 1);
    }
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
    if (format == ACCESS_TIMED) {
        n = snprintf(field, sizeof field, " %.3f ", e->seconds);
        rc |= buffer_append(out, field, (size_t)n);
        rc |= append_quoted(out, text_of(e->backend));
    }
    rc |= buffer_append(out, "\n", 1);
    return rc == 0 ? 0 : -1;
}

/* The time as the format writes it: [10/Oct/2000:13:55:36 -0700] in the
 * common formats, ISO 8601 (2000-10-10T13:55:36-07:00) in JSON. */
static void format_time(char *text, size_t size, enum access_format format)
{
    time_t now = time(NULL);
    struct tm tm;
    size_t n;

    if (localtime_r(&now, &tm) == NULL ||
        (n = strftime(text, size, format == ACCESS_JSON ? "%Y-%m-%dT%H:%M:%S%z" : "%d/%b/%Y:%H:%M:%S %z",
                      &tm)) == 0) {
        snprintf(text, size, format == ACCESS_JSON ? "1970-01-01T00:00:00+00:00" : "01/Jan/1970:00:00:00 +0000");
        return;
    }
    if (format == ACCESS_JSON && n >= 5 && n + 1 < size) {
        memmove(text + n - 1, text + n - 2, 3); /* +0100 -> +01:00 (with its NUL) */
        text[n - 2] = ':';
    }
}

void access_log_write(struct access_log *log, enum access_format format, const struct access_entry *e)
{
    struct buffer *out = &log->pending;
    size_t before = buffer_length(out);
    char time_text[64];

    if (log->fd == -1)
        return;
    format_time(time_text, sizeof time_text, format);
    if (access_log_format(out, e, time_text, format) == -1) {
        log_msg("access_log: out of memory; a line is lost");
        if (before == 0)
            buffer_free(out);
        else
            out->end = out->start + before; /* drop the partial line */
        return;
    }
    if (buffer_length(out) >= FLUSH_AT)
        flush(log);
    else if (!timer_armed(&log->flush_timer) &&
             timer_arm(&log->flush_timer, reactor_now() + FLUSH_AFTER) == -1)
        flush(log);
}
