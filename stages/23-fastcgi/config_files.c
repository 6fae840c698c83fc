/* config_files.c -- the settings of chapter 21: `root` (a pool that serves
 * files from a directory), `compress`, `headers` and `error_pages`.
 *
 * The last three come at the top level, on a named pool and on a site.
 * Each level starts from a copy of the one above it (top level -> pool ->
 * site): `compress` and `error_pages` given at a level replace the copy's,
 * `headers` merge into it name by name. So the config holds, for every
 * level, the whole of what applies there, and a request looks up nothing
 * (site_output_for). */
#define _GNU_SOURCE /* O_PATH */
#include "config.h"

#include "config_read.h"
#include "limit.h"
#include "route_answer.h"
#include "site_output.h"

#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_MIN_LENGTH 256
#define MAX_MIN_LENGTH 4294967296.0 /* 2^32 */

/* What compress = true compresses: text, and the structured formats that
 * are text underneath (JSON, XML and their +json, +xml kinds, SVG, WASM). */
static const char *const default_types[] = {
    "text/*", "application/json", "application/javascript", "application/x-javascript",
    "application/xml", "application/wasm", "image/svg+xml", "application/*+json",
    "application/*+xml", "application/manifest+json",
};

/* Headers rsp frames the message with, or that belong to one connection:
 * an operator's value for one of them would break the response. */
static const char *const refused_headers[] = {
    "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Upgrade", "TE",
    "Trailer", "Content-Encoding", "Content-Range", "Proxy-Connection",
};

/* A copy of s, or NULL (out of memory). */
static char *copy(const char *s, size_t length)
{
    char *c = malloc(length + 1);

    if (c != NULL) {
        memcpy(c, s, length);
        c[length] = '\0';
    }
    return c;
}

/* Frees the list of media types. */
static void free_types(struct compress_settings *c)
{
    for (size_t i = 0; i < c->type_count; i++)
        free(c->types[i]);
    free(c->types);
    c->types = NULL;
    c->type_count = 0;
}

/* Frees the header edits. */
static void free_headers(struct site_output *o)
{
    for (size_t i = 0; i < o->header_count; i++) {
        free(o->headers[i].name);
        free(o->headers[i].value);
    }
    free(o->headers);
    o->headers = NULL;
    o->header_count = 0;
}

/* Frees the error pages. */
static void free_pages(struct site_output *o)
{
    for (size_t i = 0; i < o->error_page_count; i++) {
        free(o->error_pages[i].path);
        free(o->error_pages[i].body);
    }
    free(o->error_pages);
    o->error_pages = NULL;
    o->error_page_count = 0;
}

void site_output_free(struct site_output *o)
{
    free_types(&o->compress);
    free_headers(o);
    free_pages(o);
    memset(o, 0, sizeof *o);
}

const struct site_output *site_output_for(const struct config *config, const struct site *site,
                                          const struct pool *pool)
{
    if (site != NULL)
        return &site->output;
    if (pool != NULL)
        return &pool->output;
    return &config->output;
}

const struct error_page *site_output_error_page(const struct site_output *o, int status)
{
    for (size_t i = 0; i < o->error_page_count; i++)
        if (o->error_pages[i].status == status)
            return &o->error_pages[i];
    return NULL;
}

/* Copies the types list of from into to (empty before). 0, or -1. */
static int copy_types(const struct compress_settings *from, struct compress_settings *to)
{
    to->types = calloc(from->type_count ? from->type_count : 1, sizeof *to->types);
    if (to->types == NULL)
        return -1;
    for (; to->type_count < from->type_count; to->type_count++) {
        const char *t = from->types[to->type_count];
        if ((to->types[to->type_count] = copy(t, strlen(t))) == NULL)
            return -1;
    }
    return 0;
}

/* Copies the header edits of from into to (empty before). 0, or -1. */
static int copy_headers(const struct site_output *from, struct site_output *to)
{
    to->headers = calloc(from->header_count ? from->header_count : 1, sizeof *to->headers);
    if (to->headers == NULL)
        return -1;
    for (; to->header_count < from->header_count; to->header_count++) {
        const struct header_edit *e = &from->headers[to->header_count];
        struct header_edit *c = &to->headers[to->header_count];

        if ((c->name = copy(e->name, strlen(e->name))) == NULL ||
            (e->value != NULL && (c->value = copy(e->value, strlen(e->value))) == NULL)) {
            free(c->name);
            return -1;
        }
    }
    return 0;
}

/* Copies the error pages of from into to (empty before). 0, or -1. */
static int copy_pages(const struct site_output *from, struct site_output *to)
{
    to->error_pages = calloc(from->error_page_count ? from->error_page_count : 1, sizeof *to->error_pages);
    if (to->error_pages == NULL)
        return -1;
    for (; to->error_page_count < from->error_page_count; to->error_page_count++) {
        const struct error_page *p = &from->error_pages[to->error_page_count];
        struct error_page *c = &to->error_pages[to->error_page_count];

        *c = *p;
        c->path = copy(p->path, strlen(p->path));
        c->body = malloc(p->length ? p->length : 1);
        if (c->path == NULL || c->body == NULL) {
            free(c->path);
            free(c->body);
            return -1;
        }
        memcpy(c->body, p->body, p->length);
    }
    return 0;
}

/* Makes to (empty) a copy of from. 0, or -1 (out of memory; to is then
 * freed). */
static int copy_output(const struct site_output *from, struct site_output *to)
{
    memset(to, 0, sizeof *to);
    to->compress.on = from->compress.on;
    to->compress.min_length = from->compress.min_length;
    to->error_pages_backends = from->error_pages_backends;
    to->limit_req = from->limit_req;
    if (copy_types(&from->compress, &to->compress) == -1 || copy_headers(from, to) == -1 ||
        copy_pages(from, to) == -1) {
        site_output_free(to);
        return -1;
    }
    return 0;
}

int config_read_root(lua_State *L, const char *path, int t, const char *setting, struct pool *pool)
{
    const char *dir;
    int rc = -1;

    pool->root = NULL;
    pool->root_fd = -1;
    config_field(L, t, "root");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return 0;
    }
    if (lua_type(L, -1) != LUA_TSTRING || lua_objlen(L, -1) == 0 ||
        strlen(lua_tostring(L, -1)) != lua_objlen(L, -1)) {
        config_error(path, "setting '%s' must be the path of a directory, not %s", setting,
                     lua_type(L, -1) == LUA_TSTRING ? "an empty string (or one with a zero byte)"
                                                    : luaL_typename(L, -1));
        goto out;
    }
    dir = lua_tostring(L, -1);
    if (dir[0] != '/') {
        config_error(path, "setting '%s': %.200s: must be an absolute path", setting, dir);
        goto out;
    }
    /* O_PATH: nothing is read through it, it only anchors the lookups
     * beneath it (openat2 with RESOLVE_BENEATH), so a directory the
     * process may search but not list is fine. */
    pool->root_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (pool->root_fd == -1) {
        config_error(path, "setting '%s': %.200s: %s", setting, dir,
                     errno == ENOTDIR ? "not a directory" : strerror(errno));
        goto out;
    }
    if ((pool->root = copy(dir, strlen(dir))) == NULL) {
        config_error(path, "out of memory");
        close(pool->root_fd);
        pool->root_fd = -1;
        goto out;
    }
    rc = 0;
out:
    lua_pop(L, 1);
    return rc;
}

/* A media type the types list may hold: TYPE/SUBTYPE, both tokens, where
 * SUBTYPE may be an asterisk alone, or an asterisk, '+' and a suffix
 * ("+json"), and an asterisk is nowhere else. */
static bool is_media_range(const char *s, size_t length)
{
    const char *slash = memchr(s, '/', length);
    const char *sub;
    size_t type_length, sub_length;

    if (slash == NULL)
        return false;
    type_length = (size_t)(slash - s);
    sub = slash + 1;
    sub_length = length - type_length - 1;
    if (!route_answer_is_token(s, type_length) || memchr(s, '*', type_length) != NULL)
        return false;
    if (sub_length == 1 && sub[0] == '*')
        return true;
    if (sub_length > 2 && sub[0] == '*' && sub[1] == '+') {
        sub += 2;
        sub_length -= 2;
    }
    return route_answer_is_token(sub, sub_length) && memchr(sub, '*', sub_length) == NULL;
}

/* compress.types, the list on top of the stack, into c (whose list it
 * replaces). `setting` names it. */
static int read_types(lua_State *L, const char *path, const char *setting, struct compress_settings *c)
{
    size_t count, pairs = 0;

    if (lua_type(L, -1) == LUA_TTABLE)
        for (lua_pushnil(L); lua_next(L, -2) != 0; lua_pop(L, 1))
            pairs++;
    count = lua_type(L, -1) == LUA_TTABLE ? lua_objlen(L, -1) : 0;
    if (lua_type(L, -1) != LUA_TTABLE || pairs != count || count == 0) {
        config_error(path, "setting '%s' must be a list of media types ({ \"text/*\", "
                           "\"application/json\" }), not %s", setting,
                     lua_type(L, -1) != LUA_TTABLE ? luaL_typename(L, -1)
                     : count == 0 && pairs == 0   ? "an empty table"
                                                  : "a table with other keys");
        return -1;
    }
    free_types(c);
    if ((c->types = calloc(count, sizeof *c->types)) == NULL) {
        config_error(path, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        const char *text;
        size_t length = 0;
        int rc = 0;

        lua_rawgeti(L, -1, (int)i + 1);
        /* Type first: lua_tolstring would turn a number into a string. */
        text = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &length) : NULL;
        if (text == NULL || !is_media_range(text, length)) {
            config_error(path, "setting '%s[%zu]': %s%.100s%s is not a media type like \"text/html\", "
                               "\"text/*\" or \"application/*+json\"", setting, i + 1,
                         lua_type(L, -1) == LUA_TSTRING ? "\"" : "a ",
                         lua_type(L, -1) == LUA_TSTRING ? text : luaL_typename(L, -1),
                         lua_type(L, -1) == LUA_TSTRING ? "\"" : "");
            rc = -1;
        } else if ((c->types[i] = copy(text, length)) == NULL) {
            config_error(path, "out of memory");
            rc = -1;
        } else {
            c->type_count = i + 1;
            for (char *p = c->types[i]; *p != '\0'; p++)
                if (*p >= 'A' && *p <= 'Z')
                    *p = (char)(*p - 'A' + 'a');
        }
        lua_pop(L, 1);
        if (rc == -1)
            return -1;
    }
    return 0;
}

/* Sets c to compress = true: on, with the default types and min_length. */
static int compress_defaults(struct compress_settings *c)
{
    size_t count = sizeof default_types / sizeof default_types[0];

    free_types(c);
    c->on = true;
    c->min_length = DEFAULT_MIN_LENGTH;
    if ((c->types = calloc(count, sizeof *c->types)) == NULL)
        return -1;
    for (; c->type_count < count; c->type_count++)
        if ((c->types[c->type_count] = copy(default_types[c->type_count],
                                            strlen(default_types[c->type_count]))) == NULL)
            return -1;
    return 0;
}

/* compress = true | false | { types = {...}, min_length = N }, on top of
 * the stack (not nil), replacing c. */
static int read_compress(lua_State *L, const char *path, const char *setting, struct compress_settings *c)
{
    static const char *const fields[] = { "types", "min_length", NULL };
    char name[360];
    int rc = 0;

    if (lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1)) {
        free_types(c);
        c->on = false;
        c->min_length = DEFAULT_MIN_LENGTH;
        return 0;
    }
    if (lua_type(L, -1) != LUA_TBOOLEAN && lua_type(L, -1) != LUA_TTABLE) {
        config_error(path, "setting '%s' must be true, false or a table like { types = {...}, "
                           "min_length = 256 }, not a %s", setting, luaL_typename(L, -1));
        return -1;
    }
    if (compress_defaults(c) == -1) {
        config_error(path, "out of memory");
        return -1;
    }
    if (lua_type(L, -1) == LUA_TBOOLEAN)
        return 0;
    if (config_check_fields(L, path, setting, fields) == -1)
        return -1;
    config_field(L, -1, "types");
    if (!lua_isnil(L, -1)) {
        snprintf(name, sizeof name, "%s.types", setting);
        rc = read_types(L, path, name, c);
    }
    lua_pop(L, 1);
    config_field(L, -1, "min_length");
    if (rc == 0 && !lua_isnil(L, -1)) {
        lua_Number n = lua_tonumber(L, -1);
        /* Range first: converting NaN or 1e300 is undefined behaviour. */
        if (lua_type(L, -1) != LUA_TNUMBER || !(n >= 0 && n <= MAX_MIN_LENGTH) ||
            n != (lua_Number)(size_t)n) {
            config_error(path, "setting '%s.min_length' must be a whole number of bytes from 0 to %.0f",
                         setting, MAX_MIN_LENGTH);
            rc = -1;
        } else {
            c->min_length = (size_t)n;
        }
    }
    lua_pop(L, 1);
    return rc;
}

/* True if name is one rsp sets itself (refused_headers). */
static bool is_refused_header(const char *name)
{
    for (size_t i = 0; i < sizeof refused_headers / sizeof refused_headers[0]; i++)
        if (strcasecmp(name, refused_headers[i]) == 0)
            return true;
    return false;
}

/* Sets (value not NULL) or removes name in o's edits, replacing an edit of
 * the same name (case ignored). Takes both strings over. 0, or -1. */
static int put_header(struct site_output *o, char *name, char *value)
{
    struct header_edit *grown;

    for (size_t i = 0; i < o->header_count; i++) {
        if (strcasecmp(o->headers[i].name, name) == 0) {
            free(o->headers[i].name);
            free(o->headers[i].value);
            o->headers[i] = (struct header_edit){ name, value };
            return 0;
        }
    }
    grown = realloc(o->headers, (o->header_count + 1) * sizeof *grown);
    if (grown == NULL)
        return -1;
    o->headers = grown;
    o->headers[o->header_count++] = (struct header_edit){ name, value };
    return 0;
}

/* One entry of headers, key at -2 and value at -1, checked. Sets *name
 * and *value (NULL for false) to new copies. `setting` names the table. */
static int read_header(lua_State *L, const char *path, const char *setting, char **name, char **value)
{
    const char *text;
    size_t length;

    *name = *value = NULL;
    if (lua_type(L, -2) != LUA_TSTRING) {
        config_error(path, "setting '%s': every key must be a header name, not a %s", setting,
                     luaL_typename(L, -2));
        return -1;
    }
    text = lua_tolstring(L, -2, &length);
    if (!route_answer_is_token(text, length)) {
        config_error(path, "setting '%s': \"%.100s\" is not a valid header name", setting, text);
        return -1;
    }
    if (is_refused_header(text)) {
        config_error(path, "setting '%s[\"%s\"]': rsp sets the '%s' header itself: it cannot be "
                           "set or removed", setting, text, text);
        return -1;
    }
    if (lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1)) {
        /* removed: value stays NULL */
    } else if (lua_type(L, -1) != LUA_TSTRING) {
        config_error(path, "setting '%s[\"%s\"]' must be a string (the value) or false (remove the "
                           "header), not %s%s", setting, text, lua_type(L, -1) == LUA_TBOOLEAN ? "" : "a ",
                     lua_type(L, -1) == LUA_TBOOLEAN ? "true" : luaL_typename(L, -1));
        return -1;
    } else {
        const char *v = lua_tolstring(L, -1, &length);
        if (!route_answer_is_field_value(v, length)) {
            config_error(path, "setting '%s[\"%s\"]' has a control character (CR, LF, NUL...) in its "
                               "value", setting, text);
            return -1;
        }
        if ((*value = copy(v, length)) == NULL)
            goto oom;
    }
    if ((*name = copy(text, strlen(text))) == NULL)
        goto oom;
    return 0;
oom:
    free(*value);
    *value = NULL;
    config_error(path, "out of memory");
    return -1;
}

static int compare_headers(const void *a, const void *b)
{
    return strcasecmp(((const struct header_edit *)a)->name, ((const struct header_edit *)b)->name);
}

/* headers = { NAME = "value" | false }, the table on top of the stack (not
 * nil), merged into o: an entry replaces the edit of its name above. */
static int read_headers(lua_State *L, const char *path, const char *setting, struct site_output *o)
{
    size_t first = o->header_count; /* the edits inherited are before this */

    if (lua_type(L, -1) != LUA_TTABLE) {
        config_error(path, "setting '%s' must be a table of NAME = \"value\" (or false), not a %s",
                     setting, luaL_typename(L, -1));
        return -1;
    }
    for (lua_pushnil(L); lua_next(L, -2) != 0; lua_pop(L, 1)) {
        char *name, *value;

        if (read_header(L, path, setting, &name, &value) == -1) {
            lua_pop(L, 2);
            return -1;
        }
        /* Lua's tables have no order: two spellings of one name would
         * leave which one wins to chance. */
        for (size_t i = first; i < o->header_count; i++) {
            if (strcasecmp(o->headers[i].name, name) == 0) {
                bool first_is_less = strcmp(o->headers[i].name, name) < 0;
                /* in a stable order: the table's is not from run to run */
                config_error(path, "setting '%s': '%s' and '%s' are the same header: keep one", setting,
                             first_is_less ? o->headers[i].name : name, first_is_less ? name : o->headers[i].name);
                free(name);
                free(value);
                lua_pop(L, 2);
                return -1;
            }
        }
        /* Replacing an inherited edit moves it among this level's: it is
         * found by the loop above, which is only right for this table. */
        for (size_t i = 0; i < first; i++) {
            if (strcasecmp(o->headers[i].name, name) == 0) {
                struct header_edit inherited = o->headers[i];
                memmove(&o->headers[i], &o->headers[i + 1], (o->header_count - i - 1) * sizeof inherited);
                o->headers[o->header_count - 1] = inherited;
                first--;
                break;
            }
        }
        if (put_header(o, name, value) == -1) {
            free(name);
            free(value);
            config_error(path, "out of memory");
            lua_pop(L, 2);
            return -1;
        }
    }
    qsort(o->headers, o->header_count, sizeof *o->headers, compare_headers);
    return 0;
}

/* Reads the whole file at file_path into page (at most ERROR_PAGE_MAX
 * bytes). `setting` names the entry. */
static int read_page(const char *path, const char *setting, const char *file_path, struct error_page *page)
{
    struct stat st;
    size_t size;
    int fd;

    if (file_path[0] != '/') {
        config_error(path, "setting '%s': %.200s: must be an absolute path", setting, file_path);
        return -1;
    }
    /* O_NONBLOCK: a FIFO named by mistake must not hang the load. */
    fd = open(file_path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd == -1 || fstat(fd, &st) == -1) {
        config_error(path, "setting '%s': %.200s: %s", setting, file_path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        config_error(path, "setting '%s': %.200s: not a regular file", setting, file_path);
        goto fail;
    }
    if (st.st_size > ERROR_PAGE_MAX) {
        config_error(path, "setting '%s': %.200s: larger than 1 MiB (%lld bytes)", setting, file_path,
                     (long long)st.st_size);
        goto fail;
    }
    /* One byte more than fstat said: a file that grew since is seen. */
    if ((page->body = malloc((size_t)st.st_size + 1)) == NULL) {
        config_error(path, "out of memory");
        goto fail;
    }
    for (size = 0; size <= (size_t)st.st_size;) {
        ssize_t n = read(fd, page->body + size, (size_t)st.st_size + 1 - size);
        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1) {
            config_error(path, "setting '%s': %.200s: %s", setting, file_path, strerror(errno));
            goto fail;
        }
        if (n == 0)
            break;
        size += (size_t)n;
    }
    if (size > (size_t)st.st_size) {
        config_error(path, "setting '%s': %.200s: changed while it was read", setting, file_path);
        goto fail;
    }
    page->length = size;
    page->content_type = NULL;
    close(fd);
    return 0;
fail:
    free(page->body);
    page->body = NULL;
    if (fd != -1)
        close(fd);
    return -1;
}

/* One entry of error_pages, key at -2 and value at -1, into o (its
 * backends flag, or a new page). `setting` names the table. */
static int read_page_entry(lua_State *L, const char *path, const char *setting, struct site_output *o)
{
    char name[360];
    lua_Number key;
    struct error_page *page;

    if (lua_type(L, -2) == LUA_TSTRING && strcmp(lua_tostring(L, -2), "backends") == 0) {
        if (lua_type(L, -1) != LUA_TBOOLEAN) {
            config_error(path, "setting '%s.backends' must be true or false, not a %s", setting,
                         luaL_typename(L, -1));
            return -1;
        }
        o->error_pages_backends = lua_toboolean(L, -1);
        return 0;
    }
    key = lua_tonumber(L, -2);
    if (lua_type(L, -2) != LUA_TNUMBER || !(key >= 400 && key <= 599) || key != (lua_Number)(int)key) {
        if (lua_type(L, -2) == LUA_TSTRING)
            config_error(path, "setting '%s' has no field '%.100s' (it may have: 400 to 599, backends)",
                         setting, lua_tostring(L, -2));
        else if (lua_type(L, -2) == LUA_TNUMBER)
            config_error(path, "setting '%s': every key must be a status from 400 to 599 ([404] = "
                               "\"/srv/www/404.html\") or backends, not %.10g", setting, key);
        else
            config_error(path, "setting '%s': every key must be a status from 400 to 599 ([404] = "
                               "\"/srv/www/404.html\") or backends, not a %s", setting,
                         luaL_typename(L, -2));
        return -1;
    }
    snprintf(name, sizeof name, "%s[%d]", setting, (int)key);
    if (lua_type(L, -1) != LUA_TSTRING || lua_objlen(L, -1) == 0 ||
        strlen(lua_tostring(L, -1)) != lua_objlen(L, -1)) {
        config_error(path, "setting '%s' must be the path of a file, not %s", name,
                     lua_type(L, -1) == LUA_TSTRING ? "an empty string (or one with a zero byte)"
                                                    : luaL_typename(L, -1));
        return -1;
    }
    page = &o->error_pages[o->error_page_count];
    memset(page, 0, sizeof *page);
    page->status = (int)key;
    if (read_page(path, name, lua_tostring(L, -1), page) == -1)
        return -1;
    if ((page->path = copy(lua_tostring(L, -1), lua_objlen(L, -1))) == NULL) {
        free(page->body);
        config_error(path, "out of memory");
        return -1;
    }
    o->error_page_count++;
    return 0;
}

static int compare_pages(const void *a, const void *b)
{
    return ((const struct error_page *)a)->status - ((const struct error_page *)b)->status;
}

/* error_pages = { [STATUS] = "/path", backends = true }, the table on top
 * of the stack (not nil), replacing o's pages. */
static int read_error_pages(lua_State *L, const char *path, const char *setting, struct site_output *o)
{
    size_t count = 0;

    if (lua_type(L, -1) != LUA_TTABLE) {
        config_error(path, "setting '%s' must be a table like { [404] = \"/srv/www/404.html\" }, not a %s",
                     setting, luaL_typename(L, -1));
        return -1;
    }
    free_pages(o);
    o->error_pages_backends = false;
    for (lua_pushnil(L); lua_next(L, -2) != 0; lua_pop(L, 1))
        count++;
    if ((o->error_pages = calloc(count ? count : 1, sizeof *o->error_pages)) == NULL) {
        config_error(path, "out of memory");
        return -1;
    }
    for (lua_pushnil(L); lua_next(L, -2) != 0; lua_pop(L, 1)) {
        if (read_page_entry(L, path, setting, o) == -1) {
            lua_pop(L, 2);
            return -1;
        }
    }
    qsort(o->error_pages, o->error_page_count, sizeof *o->error_pages, compare_pages);
    return 0;
}

/* limit_req = { rate = R, burst = B } on top of the stack, the budget of
 * the level named setting. */
static int read_limit_req(lua_State *L, const char *path, const char *setting, struct limit_req_settings *l)
{
    static const char *const fields[] = { "rate", "burst", NULL };
    double rate, burst;

    if (lua_type(L, -1) != LUA_TTABLE) {
        config_error(path, "setting '%s' must be a table like { rate = 10, burst = 20 }, not a %s",
                     setting, luaL_typename(L, -1));
        return -1;
    }
    if (config_check_fields(L, path, setting, fields) == -1)
        return -1;
    config_field(L, -1, "rate");
    rate = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : -1;
    lua_pop(L, 1);
    if (!(rate > 0 && rate <= 1e6)) {
        config_error(path, "setting '%s.rate' must be a number of requests a second above 0, at most "
                           "1000000", setting);
        return -1;
    }
    config_field(L, -1, "burst");
    burst = lua_isnil(L, -1) ? (ceil(rate) < 1 ? 1 : ceil(rate))
            : lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : -1;
    lua_pop(L, 1);
    if (!(burst >= 1 && burst <= 1e6 && burst == floor(burst))) {
        config_error(path, "setting '%s.burst' must be a whole number from 1 to 1000000", setting);
        return -1;
    }
    l->rate = rate;
    l->burst = (unsigned)burst;
    l->level = limit_level(setting);
    return 0;
}

int config_read_output(lua_State *L, const char *path, int t, const char *prefix,
                       const struct site_output *above, struct site_output *out)
{
    char setting[340];
    int rc = 0;

    if (copy_output(above, out) == -1) {
        config_error(path, "out of memory");
        return -1;
    }
    config_field(L, t, "compress");
    if (!lua_isnil(L, -1)) {
        snprintf(setting, sizeof setting, "%scompress", prefix);
        rc = read_compress(L, path, setting, &out->compress);
    }
    lua_pop(L, 1);
    config_field(L, t, "headers");
    if (rc == 0 && !lua_isnil(L, -1)) {
        snprintf(setting, sizeof setting, "%sheaders", prefix);
        rc = read_headers(L, path, setting, out);
    }
    lua_pop(L, 1);
    config_field(L, t, "error_pages");
    if (rc == 0 && !lua_isnil(L, -1)) {
        snprintf(setting, sizeof setting, "%serror_pages", prefix);
        rc = read_error_pages(L, path, setting, out);
    }
    lua_pop(L, 1);
    config_field(L, t, "limit_req");
    if (rc == 0 && !lua_isnil(L, -1)) {
        snprintf(setting, sizeof setting, "%slimit_req", prefix);
        rc = read_limit_req(L, path, setting, &out->limit_req);
    }
    lua_pop(L, 1);
    return rc;
}

int config_copy_output(const char *path, const struct site_output *from, struct site_output *to)
{
    if (copy_output(from, to) == -1) {
        config_error(path, "out of memory");
        return -1;
    }
    return 0;
}
