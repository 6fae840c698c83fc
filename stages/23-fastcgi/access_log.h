/* access_log.h -- one line per response, in the combined log format.
 *
 *   ADDR - - [25/Nov/2026:13:40:55 +0000] "GET /p HTTP/1.1" 200 123 "REFERER" "AGENT"
 *
 * and, in the "timed" format, two more fields: the request's time in
 * seconds and the backend that answered ("-" when rsp answered itself):
 *
 *   ... "AGENT" 0.003 "127.0.0.1:8001"
 *
 * "vhost_combined" (Apache's) puts the Host the client sent (without its
 * port) and the port it connected to first: `HOST:PORT ADDR - - [...`.
 * "json" writes one object a line (fields: README's access log section).
 *
 * Inside quotes, '"', '\' and bytes below 0x20 or above 0x7e are written
 * as \xHH, so that a client cannot forge a line or a field (the unquoted
 * host: space too). In JSON, '"' and '\' are \" and \\, and every other
 * byte below 0x20 or above 0x7e is \u00HH: the line is ASCII, and a string
 * read as Latin-1 gives back the client's exact bytes (valid UTF-8 or not).
 *
 * Lines go to the log of the site the request's Host names, if it has
 * its own, else to the top-level one. They are buffered and written when
 * the buffer fills, at most a second after they were made, and when the
 * log is reopened or closed: a proxy writing one line per request with a
 * system call each would spend a good part of its time there. The path "stderr" (or "-") is rsp's standard
 * error (the journal, under systemd): written a whole line per write(2),
 * so that lines of several workers sharing it never interleave. */
#ifndef RSP_ACCESS_LOG_H
#define RSP_ACCESS_LOG_H

#include "buffer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A span of bytes to log; data NULL: the field is "-". */
struct log_text {
    const char *data;
    size_t length;
};

/* The line's layout (setting access_log_format). */
enum access_format { ACCESS_COMBINED, ACCESS_TIMED, ACCESS_VHOST_COMBINED, ACCESS_JSON };

struct access_entry {
    const char *client;         /* the client's address */
    struct log_text host;       /* the Host header as sent (its port is left out) */
    const char *port;           /* the port the client connected to */
    struct log_text request;    /* the request line as received */
    int status;
    uint64_t body_bytes;        /* of the response, as sent to the client */
    struct log_text referer, agent;
    double seconds;             /* from the request's first byte to its response's last */
    const char *backend;        /* NULL: rsp answered itself */
};

/* One open log: a file or standard error, its buffer and flush timer.
 * Every config that names it holds a reference (its top-level
 * access_log, or a site's): sites naming one file share one descriptor
 * and one buffer, whether they write its path the same way or another
 * (the same device and inode). */
struct access_log;

/* True if path names rsp's standard error ("stderr" or "-"), not a file. */
bool access_log_is_stderr(const char *path);

/* From now on, a log file this process creates is given to uid and gid,
 * mode 0640 (rsp runs as root and will become uid: logrotate's `create`
 * makes the next file the same way). A file that exists keeps its owner,
 * group and mode. */
void access_log_set_owner(uid_t uid, gid_t gid);

/* The log writing to path (created 0640 if missing, appended to), or to
 * standard error: the one open already on that path or file, or a new
 * one. Returns it with one more reference, or NULL with errno set. */
struct access_log *access_log_open(const char *path);

/* Drops a reference; the last writes what is buffered and closes the
 * file. NULL: nothing. */
void access_log_release(struct access_log *log);

/* The path log was opened with. */
const char *access_log_path(const struct access_log *log);

/* Makes uid the owner of every open log file, if it is not already (rsp,
 * started as root, opened them and is about to become that user: a
 * reopen on SIGUSR1 happens with the user's rights). A failure (no
 * CAP_CHOWN) is logged, not fatal: the open file goes on taking lines. */
void access_log_give_to(uid_t uid);

/* Appends e's line to out, with `time` as its time (between brackets, or
 * the JSON "time"): the pure part of access_log_write (and what
 * fuzz/fuzz_access_log checks). Returns 0, or -1 if out of memory. */
int access_log_format(struct buffer *out, const struct access_entry *e, const char *time,
                      enum access_format format);

/* Adds e's line to log, in that format. */
void access_log_write(struct access_log *log, enum access_format format, const struct access_entry *e);

/* Writes what each open log has buffered, then closes its file and opens
 * its path again (after logrotate renamed it: SIGUSR1). Keeps the old
 * file if the path cannot be opened, and logs why. Standard error: only
 * the writing. */
void access_log_reopen(void);

/* Writes what each open log has buffered and closes it (no more lines;
 * the references are still to be released). */
void access_log_close(void);

#endif
