/* mime.c -- the extension -> Content-Type table (see mime.h): a sorted
 * array of (extension, type) searched with bsearch. */
#include "mime.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Extensions longer than this are not kept (none real comes close). */
#define EXTENSION_MAX 32

struct mime_entry {
    char extension[EXTENSION_MAX + 1]; /* lower case */
    const char *type;                  /* the Content-Type value */
    size_t order;                      /* when it was added: the first wins */
};

struct mime_table {
    struct mime_entry *entries;
    size_t count, capacity;
    char **types; /* the Content-Type strings read from the file, owned */
    size_t type_count, type_capacity;
};

/* rsp's own: the common web types, which win over the system's file. */
static const struct { const char *extension, *type; } builtins[] = {
    { "html", "text/html; charset=utf-8" },    { "htm", "text/html; charset=utf-8" },
    { "css", "text/css; charset=utf-8" },      { "js", "text/javascript; charset=utf-8" },
    { "mjs", "text/javascript; charset=utf-8" }, { "json", "application/json; charset=utf-8" },
    { "map", "application/json; charset=utf-8" }, { "txt", "text/plain; charset=utf-8" },
    { "xml", "application/xml" },              { "svg", "image/svg+xml; charset=utf-8" },
    { "png", "image/png" },                    { "jpg", "image/jpeg" },
    { "jpeg", "image/jpeg" },                  { "gif", "image/gif" },
    { "webp", "image/webp" },                  { "avif", "image/avif" },
    { "ico", "image/x-icon" },                 { "woff", "font/woff" },
    { "woff2", "font/woff2" },                 { "ttf", "font/ttf" },
    { "otf", "font/otf" },                     { "pdf", "application/pdf" },
    { "wasm", "application/wasm" },            { "mp4", "video/mp4" },
    { "webm", "video/webm" },                  { "mp3", "audio/mpeg" },
    { "ogg", "audio/ogg" },                    { "zip", "application/zip" },
    { "gz", "application/gzip" },              { "csv", "text/csv" },
    { "md", "text/markdown" },                 { "webmanifest", "application/manifest+json" },
    { "atom", "application/atom+xml" },        { "rss", "application/rss+xml" },
};

/* The types that get "; charset=utf-8" when they come from the file. */
static const char *const utf8_types[] = {
    "text/html", "text/css", "text/plain", "text/javascript",
    "application/javascript", "application/json", "image/svg+xml",
};

/* Whether c is a tchar (RFC 9110 5.6.2). */
static bool is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Whether the n bytes at s are all tchars (and there is at least one). */
static bool is_token(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!is_tchar((unsigned char)s[i]))
            return false;
    return n > 0;
}

/* Adds extension (n bytes, a token) -> type; false when memory runs out. */
static bool add(struct mime_table *t, const char *extension, size_t n, const char *type)
{
    if (n > EXTENSION_MAX)
        return true; /* not kept, not an error */
    if (t->count == t->capacity) {
        size_t capacity = t->capacity ? t->capacity * 2 : 256;
        struct mime_entry *e = realloc(t->entries, capacity * sizeof *e);
        if (!e)
            return false;
        t->entries = e;
        t->capacity = capacity;
    }
    struct mime_entry *e = &t->entries[t->count];
    for (size_t i = 0; i < n; i++)
        e->extension[i] = (char)(extension[i] >= 'A' && extension[i] <= 'Z' ? extension[i] + 32
                                                                           : extension[i]);
    e->extension[n] = '\0';
    e->type = type;
    e->order = t->count++;
    return true;
}

/* Keeps a copy of the type (n bytes) read from the file, with the charset
 * parameter when it is one of utf8_types; NULL when memory runs out. */
static const char *keep_type(struct mime_table *t, const char *type, size_t n)
{
    if (t->type_count == t->type_capacity) {
        size_t capacity = t->type_capacity ? t->type_capacity * 2 : 256;
        char **types = realloc(t->types, capacity * sizeof *types);
        if (!types)
            return NULL;
        t->types = types;
        t->type_capacity = capacity;
    }
    const char *charset = "";
    for (size_t i = 0; i < sizeof utf8_types / sizeof utf8_types[0]; i++)
        if (strlen(utf8_types[i]) == n && strncasecmp(utf8_types[i], type, n) == 0)
            charset = "; charset=utf-8";
    size_t extra = strlen(charset);
    char *copy = malloc(n + extra + 1);
    if (!copy)
        return NULL;
    memcpy(copy, type, n);
    memcpy(copy + n, charset, extra + 1);
    t->types[t->type_count++] = copy;
    return copy;
}

/* Reads one line of mime.types ("type ext ext ..."; '#' starts a comment)
 * into the table; false when memory runs out. */
static bool read_line(struct mime_table *t, const char *line, size_t n)
{
    const char *hash = memchr(line, '#', n);
    if (hash)
        n = (size_t)(hash - line);
    size_t i = 0, type = 0, type_len = 0;
    const char *kept = NULL;
    for (;;) {
        while (i < n && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
            i++;
        if (i >= n)
            return true;
        size_t start = i;
        while (i < n && line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
            i++;
        if (type_len == 0) { /* the type: token "/" token */
            const char *slash = memchr(line + start, '/', i - start);
            if (!slash || !is_token(line + start, (size_t)(slash - line - start)) ||
                !is_token(slash + 1, (size_t)(line + i - slash - 1)))
                return true;
            type = start;
            type_len = i - start;
            continue;
        }
        if (!is_token(line + start, i - start))
            continue;
        if (!kept && !(kept = keep_type(t, line + type, type_len)))
            return false;
        if (!add(t, line + start, i - start, kept))
            return false;
    }
}

/* Reads at most MIME_FILE_MAX bytes of the file at path into a new buffer
 * (*length bytes); NULL if it cannot be read (or memory runs out). */
static char *read_file(const char *path, size_t *length)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return NULL;
    char *data = malloc(MIME_FILE_MAX);
    size_t n = 0;
    while (data && n < MIME_FILE_MAX) {
        ssize_t r = read(fd, data + n, MIME_FILE_MAX - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            free(data);
            data = NULL;
        } else if (r == 0) {
            break;
        } else {
            n += (size_t)r;
        }
    }
    close(fd);
    *length = n;
    return data;
}

/* Orders entries by extension, then by when they were added. */
static int by_extension(const void *a, const void *b)
{
    const struct mime_entry *x = a, *y = b;
    int c = strcmp(x->extension, y->extension);
    return c ? c : (x->order > y->order) - (x->order < y->order);
}

/* Reads the file's lines into the table (a last line cut by the size limit
 * is dropped with the rest); false when memory runs out. */
static bool read_lines(struct mime_table *t, const char *data, size_t n)
{
    size_t start = 0;
    while (start < n) {
        const char *nl = memchr(data + start, '\n', n - start);
        if (!nl && n == MIME_FILE_MAX)
            break;
        size_t end = nl ? (size_t)(nl - data) : n;
        if (end - start <= MIME_LINE_MAX && !read_line(t, data + start, end - start))
            return false;
        start = end + 1;
    }
    return true;
}

struct mime_table *mime_table_load(const char *path)
{
    struct mime_table *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (!add(t, builtins[i].extension, strlen(builtins[i].extension), builtins[i].type))
            goto fail;
    size_t length = 0;
    char *data = read_file(path ? path : "/etc/mime.types", &length);
    if (data) {
        bool ok = read_lines(t, data, length);
        free(data);
        if (!ok)
            goto fail;
    }
    qsort(t->entries, t->count, sizeof *t->entries, by_extension);
    /* Keep the first of each extension: the built-in, else the file's first. */
    size_t kept = 0;
    for (size_t i = 0; i < t->count; i++)
        if (kept == 0 || strcmp(t->entries[kept - 1].extension, t->entries[i].extension) != 0)
            t->entries[kept++] = t->entries[i];
    t->count = kept;
    return t;
fail:
    mime_table_free(t);
    return NULL;
}

void mime_table_free(struct mime_table *table)
{
    if (!table)
        return;
    for (size_t i = 0; i < table->type_count; i++)
        free(table->types[i]);
    free(table->types);
    free(table->entries);
    free(table);
}

/* Compares a lower-cased extension key with an entry. */
static int compare_key(const void *key, const void *entry)
{
    return strcmp(key, ((const struct mime_entry *)entry)->extension);
}

const char *mime_type_of(const struct mime_table *table, const char *name, size_t length)
{
    size_t dot = length;
    for (size_t i = length; i > 0; i--) {
        if (name[i - 1] == '/')
            break;
        if (name[i - 1] == '.') {
            dot = i - 1;
            break;
        }
    }
    size_t n = length - dot - (dot < length);
    if (dot == length || n == 0 || n > EXTENSION_MAX)
        return MIME_DEFAULT_TYPE;
    char key[EXTENSION_MAX + 1];
    for (size_t i = 0; i < n; i++) {
        char c = name[dot + 1 + i];
        if (c == '\0')
            return MIME_DEFAULT_TYPE;
        key[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    key[n] = '\0';
    const struct mime_entry *e =
        bsearch(key, table->entries, table->count, sizeof *table->entries, compare_key);
    return e ? e->type : MIME_DEFAULT_TYPE;
}
