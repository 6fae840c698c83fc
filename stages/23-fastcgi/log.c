/* log.c -- timestamped lines on stderr. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static char tag[32]; /* "worker 1: " in a worker process, else empty */

void log_set_tag(const char *text)
{
    snprintf(tag, sizeof tag, "%s%s", text, text[0] != '\0' ? ": " : "");
}

/* Builds the whole line first and prints it with one call, so lines from
 * several places never interleave mid-line (stderr is unbuffered). */
static void log_line(const char *format, va_list args, const char *suffix)
{
    char stamp[32] = "", line[1024];
    time_t now = time(NULL);
    struct tm tm;
    int n;

    if (localtime_r(&now, &tm) != NULL)
        strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
    n = vsnprintf(line, sizeof line, format, args);
    if (n < 0)
        return;
    fprintf(stderr, "%s rsp: %s%s%s\n", stamp, tag, line, suffix);
}

void log_msg(const char *format, ...)
{
    va_list args;

    va_start(args, format);
    log_line(format, args, "");
    va_end(args);
}

void log_errno(const char *format, ...)
{
    char suffix[128];
    va_list args;

    snprintf(suffix, sizeof suffix, ": %s", strerror(errno));
    va_start(args, format);
    log_line(format, args, suffix);
    va_end(args);
}
