/* log.h -- the error log: one timestamped line per event, on stderr. */
#ifndef RSP_LOG_H
#define RSP_LOG_H

/* Prints "YYYY-MM-DD HH:MM:SS rsp: MESSAGE" (local time) and a newline. */
void log_msg(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* Like log_msg, with ": strerror(errno)" appended, as perror(3) does. */
void log_errno(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* Every later line names its process: "worker 1" gives "rsp: worker 1: ...";
 * "" none. */
void log_set_tag(const char *text);

#endif
