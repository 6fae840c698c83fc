/* proctitle.c -- the process titles ps shows (proctitle.h). */
#include "proctitle.h"

#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

/* The memory argv's strings (and the environment's right after them)
 * fill: from start, room bytes; NULL until proctitle_init. */
static struct {
    char *start;
    size_t room;
} title;

/* Copies argv's strings to the heap (kept here, for the life of the
 * process) and points argv at the copies. Returns 0, or -1 (out of
 * memory; argv untouched). */
static int move_arguments(int argc, char *argv[])
{
    static char **copy;

    copy = calloc((size_t)argc + 1, sizeof *copy);
    if (copy == NULL)
        return -1;
    for (int i = 0; i < argc; i++) {
        copy[i] = strdup(argv[i]);
        if (copy[i] == NULL) {
            while (i > 0)
                free(copy[--i]);
            free(copy);
            copy = NULL;
            return -1;
        }
    }
    for (int i = 0; i < argc; i++)
        argv[i] = copy[i];
    return 0;
}

/* Copies the environment's strings and the array pointing at them to
 * the heap, and points environ at the copy. Returns 0, or -1 (out of
 * memory; environ untouched). */
static int move_environment(void)
{
    size_t count = 0;
    char **copy;

    while (environ[count] != NULL)
        count++;
    copy = calloc(count + 1, sizeof *copy);
    if (copy == NULL)
        return -1;
    for (size_t i = 0; i < count; i++) {
        copy[i] = strdup(environ[i]);
        if (copy[i] == NULL) {
            while (i > 0)
                free(copy[--i]);
            free(copy);
            return -1;
        }
    }
    environ = copy; /* kept for the life of the process, as environ is */
    return 0;
}

int proctitle_init(int argc, char *argv[])
{
    char *end;

    if (argc < 1 || argv[0] == NULL)
        return 0;
    /* The strings the kernel laid out one after another: argv's, then
     * the environment's. Only the contiguous run is ours to write. */
    end = argv[0] + strlen(argv[0]) + 1;
    for (int i = 1; i < argc; i++)
        if (argv[i] == end)
            end = argv[i] + strlen(argv[i]) + 1;
    for (size_t i = 0; environ[i] != NULL; i++)
        if (environ[i] == end)
            end = environ[i] + strlen(environ[i]) + 1;
    title.start = argv[0];
    title.room = (size_t)(end - argv[0]);
    if (move_environment() == -1 || move_arguments(argc, argv) == -1) {
        log_msg("out of memory copying the environment: the process titles stay as they are");
        title.start = NULL;
        return -1;
    }
    return 0;
}

void proctitle_set(const char *format, ...)
{
    va_list args;
    int n;

    if (title.start == NULL)
        return;
    /* The rest is zeroed: the kernel shows up to the first NUL once the
     * last byte of argv's memory is written over, else the whole of it. */
    memset(title.start, 0, title.room);
    va_start(args, format);
    n = vsnprintf(title.start, title.room, format, args);
    va_end(args);
    if (n < 0)
        title.start[0] = '\0';
}
