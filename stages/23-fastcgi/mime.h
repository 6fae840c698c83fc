/* mime.h -- the Content-Type of a file, from its name's extension.
 *
 * A table is built once per config generation (at start and on reload):
 * rsp's built-in types for the web's common files, then whatever else
 * /etc/mime.types names. The built-ins win where both name an extension,
 * so .js is text/javascript (RFC 9239) and .ico image/x-icon whatever the
 * system's file says; /etc/mime.types only adds extensions rsp does not
 * know. Extensions are compared case-insensitively; the text types that
 * browsers would otherwise guess the charset of (text/html, text/css,
 * text/plain, text/javascript, application/javascript, application/json,
 * image/svg+xml) get "; charset=utf-8". */
#ifndef RSP_MIME_H
#define RSP_MIME_H

#include <stddef.h>

/* The type of a file whose extension no table knows. */
#define MIME_DEFAULT_TYPE "application/octet-stream"

/* At most this much of a mime.types file is read; a longer line than
 * MIME_LINE_MAX is skipped. */
#define MIME_FILE_MAX (1024 * 1024)
#define MIME_LINE_MAX 1024

struct mime_table;

/* Builds a table from the built-ins and the mime.types file at path (NULL:
 * /etc/mime.types). A missing or unreadable file gives the built-ins
 * alone; past MIME_FILE_MAX bytes the file is not read, and lines that are
 * too long, or whose type or extensions are not tokens, are skipped.
 * Returns NULL only when memory runs out. */
struct mime_table *mime_table_load(const char *path);

/* Frees a table (NULL: nothing). */
void mime_table_free(struct mime_table *table);

/* The Content-Type value for the file name (length bytes; a path is fine:
 * the extension is what follows the last '.' of its last segment):
 * MIME_DEFAULT_TYPE when there is no extension or no table knows it. The
 * string lives as long as the table. */
const char *mime_type_of(const struct mime_table *table, const char *name, size_t length);

#endif
