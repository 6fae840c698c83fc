/* config_settings.c -- the table of rsp's top-level settings, and the
 * readers of its scalar types. Each type's reader says what is wrong in
 * the words rsp has always used for it (tests and chapters quote them);
 * checks that look beyond one value (a user that must exist,
 * max_request_head against max_request_line) stay with config.c, and
 * settings of their own shape (tables, addresses, workers) with the files
 * that read them. */
#include "config_settings.h"

#include "access_log.h"
#include "config_read.h"

#include <errno.h>
#include <lauxlib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SECONDS(name, field, def, lo, hi) \
    { name, SETTING_SECONDS, offsetof(struct config, field), def, lo, hi, NULL, NULL }
#define COUNT(name, field, def, lo, hi) \
    { name, SETTING_COUNT, offsetof(struct config, field), def, lo, hi, NULL, NULL }
#define BOOLEAN(name, field, def) \
    { name, SETTING_BOOLEAN, offsetof(struct config, field), def, 0, 1, NULL, NULL }
#define TEXT(name, field) { name, SETTING_TEXT, offsetof(struct config, field), 0, 0, 0, NULL, NULL }
#define OWN(name) { name, SETTING_OWN, 0, 0, 0, 0, NULL, NULL }

/* The access_log_format names, in enum access_format's order. */
static const char *const access_formats[] = { "combined", "timed", "vhost_combined", "json", NULL };

/* In the order of the list the typo warnings have always tried (the first
 * setting close enough is the one named), which is also the order the
 * scalar ones are read in. */
const struct setting config_settings[] = {
    OWN("listen"), OWN("backends"), OWN("balance"), OWN("hash_key"), OWN("pools"), OWN("sites"), OWN("route"),
    SECONDS("route_time_limit", route_time_limit, 0.1, 0.001, 10),
    SECONDS("down_time", default_pool.down_time, 5, 0.001, 86400),
    { "max_request_line", SETTING_BYTES, offsetof(struct config, limits.max_line), 8192, 256, 1048576,
      NULL, NULL },
    { "max_request_head", SETTING_BYTES, offsetof(struct config, limits.max_head), 32768, 256, 1048576,
      NULL, NULL },
    BOOLEAN("allow_underscores_in_headers", policy.allow_underscores_in_headers, 0),
    BOOLEAN("allow_encoded_slashes", policy.allow_encoded_slashes, 0),
    /* The timeouts: fractions allowed, at most a day. */
    SECONDS("connect_timeout", timeouts.connect, 5, 0.001, 86400),
    SECONDS("header_timeout", timeouts.header, 10, 0.001, 86400),
    SECONDS("body_timeout", timeouts.body, 30, 0.001, 86400),
    SECONDS("response_timeout", timeouts.response, 60, 0.001, 86400),
    SECONDS("idle_timeout", timeouts.idle, 300, 0.001, 86400),
    OWN("health_check"),
    SECONDS("keepalive_timeout", keepalive.timeout, 75, 0, 86400),
    COUNT("keepalive_requests", keepalive.requests, 1000, 1, 1e9),
    COUNT("backend_keepalive", keepalive.backend_idle, 32, 0, 100000),
    SECONDS("backend_idle_timeout", keepalive.backend_idle_timeout, 30, 0.001, 86400),
    SECONDS("shutdown_timeout", operations.shutdown_timeout, 10, 0, 86400),
    TEXT("access_log", operations.access_log),
    { "access_log_format", SETTING_CHOICE, offsetof(struct config, operations.access_log_format), 0, 0,
      0, NULL, access_formats },
    TEXT("user", operations.user),
    TEXT("pid_file", operations.pid_file),
    /* From a second (for tests) to a week; 12 hours by default. */
    SECONDS("ticket_key_lifetime", operations.ticket_key_lifetime, 43200, 1, 604800),
    OWN("status_listen"),
    BOOLEAN("status_public", scaling.status_public, 0),
    OWN("workers"),
    BOOLEAN("reuseport", scaling.reuseport, 0),
    OWN("tls"), OWN("acme_webroot"),
    BOOLEAN("splice", scaling.splice, 1),
    BOOLEAN("request_buffering", buffering.request, 1),
    /* Of a request body, what is kept in memory; the rest goes to a file.
     * 64 KiB holds every form post and JSON body a personal site sees (a
     * few KiB) with room to spare, and is what one client costs at most
     * while it uploads: a thousand slow uploaders, 64 MiB. Measured (wrk,
     * one connection, nginx behind rsp on loopback; median per request,
     * all in memory against all through a file): 4 KiB 53 us against 87,
     * 64 KiB 116 against 171, 256 KiB 446 against 427, 1 MiB 1.94 ms
     * against 1.40. A file costs some 40 us (open, write, read back,
     * close) that only a small body notices; past 256 KiB it is no slower
     * than memory, and memory is what a crowd of uploaders would take. */
    { "request_buffer_size", SETTING_BUFFER, offsetof(struct config, buffering.request_size), 64 * 1024,
      0, 1ULL << 30, NULL, NULL },
    /* The largest body accepted: 1 MiB, as nginx (stage 22), since a site
     * or a pool that takes uploads can now raise it for itself alone. */
    { "max_body_size", SETTING_SIZE, offsetof(struct config, buffering.max_body), 1024 * 1024, 0,
      1ULL << 50, NULL, NULL },
    /* Its message names these bounds in words of its own (rate_problem). */
    { "body_min_rate", SETTING_RATE, offsetof(struct config, buffering.body_min_rate), 0, 0, 1e12, NULL,
      NULL },
    { "temp_dir", SETTING_DIRECTORY, offsetof(struct config, buffering.temp_dir), 0, 0, 0,
      "/var/lib/rsp/tmp", NULL },
    BOOLEAN("response_buffering", buffering.response, 1),
    /* Of a response, what may wait in memory for a slow client: four
     * times the high-water mark, so that a page of a few hundred KiB never
     * touches the disk, and a thousand slow readers cost 256 MiB at most. */
    { "response_buffer_size", SETTING_BUFFER, offsetof(struct config, buffering.response_size),
      256 * 1024, 16384, 1ULL << 30, NULL, NULL },
    /* Of a response, what may wait on disk, as nginx's
     * proxy_max_temp_file_size: beyond it the backend waits for the client
     * again (backpressure). */
    { "max_temp_file_size", SETTING_SIZE, offsetof(struct config, buffering.max_temp_file),
      1024.0 * 1024 * 1024, 0, 1ULL << 50, NULL, NULL },
    /* As nginx's http2_max_concurrent_streams; at most 1024, since each
     * open stream is an exchange with its buffers. */
    COUNT("http2_max_streams", http2.max_streams, 128, 1, 1024),
    OWN("root"), OWN("compress"), OWN("headers"), OWN("error_pages"),
    /* Chapter 22: limit_req is read with the output settings (a site and
     * a pool may have one); limit_conn counts a client's open connections
     * (0: no limit). */
    OWN("limit_req"),
    COUNT("limit_conn", limit_conn, 0, 0, 1e6),
    OWN("allow"), OWN("deny"), OWN("basic_auth"),
    OWN("trusted_proxies"),
};

const size_t config_setting_count = sizeof config_settings / sizeof config_settings[0];

/* Where setting s's value lives in config. */
static void *place(struct config *config, const struct setting *s)
{
    return (char *)config + s->offset;
}

int config_access_format(const char *name)
{
    if (name == NULL)
        return ACCESS_COMBINED;
    for (size_t i = 0; access_formats[i] != NULL; i++)
        if (strcmp(name, access_formats[i]) == 0)
            return (int)i;
    return -1;
}

void config_settings_defaults(struct config *config)
{
    for (size_t i = 0; i < config_setting_count; i++) {
        const struct setting *s = &config_settings[i];
        void *at = place(config, s);

        switch (s->type) {
        case SETTING_SECONDS:
        case SETTING_RATE:
            *(double *)at = s->fallback;
            break;
        case SETTING_COUNT:
            *(unsigned *)at = (unsigned)s->fallback;
            break;
        case SETTING_BYTES:
        case SETTING_BUFFER:
            *(size_t *)at = (size_t)s->fallback;
            break;
        case SETTING_SIZE:
            *(uint64_t *)at = (uint64_t)s->fallback;
            break;
        case SETTING_BOOLEAN:
            *(bool *)at = s->fallback != 0;
            break;
        case SETTING_CHOICE:
            *(int *)at = (int)s->fallback;
            break;
        case SETTING_OWN:
        case SETTING_TEXT:
        case SETTING_DIRECTORY: /* NULL until read: its default needs a look at the disk */
            break;
        }
    }
}

/* A number from min to max on top of the stack (not nil) into *out.
 * Returns 0, or -1 after saying so. */
static int read_number(const char *path, lua_State *L, const struct setting *s, double *out)
{
    if (lua_type(L, -1) == LUA_TNUMBER && lua_tonumber(L, -1) >= s->min && lua_tonumber(L, -1) <= s->max) {
        *out = lua_tonumber(L, -1);
        return 0;
    }
    config_error(path, "setting '%s' must be a number from %.10g to %.10g", s->name, s->min, s->max);
    return -1;
}

/* SETTING_COUNT: a number, then a whole one. */
static int read_count(const char *path, lua_State *L, const struct setting *s, unsigned *out)
{
    double value;

    if (read_number(path, L, s, &value) == -1)
        return -1;
    if (value != (double)(unsigned)value) {
        config_error(path, "setting '%s' must be a whole number from %.10g to %.10g", s->name, s->min,
                     s->max);
        return -1;
    }
    *out = (unsigned)value;
    return 0;
}

/* SETTING_BYTES: a number, then a whole one. */
static int read_bytes(const char *path, lua_State *L, const struct setting *s, size_t *out)
{
    double value;

    if (read_number(path, L, s, &value) == -1)
        return -1;
    if (value != (double)(size_t)value) {
        config_error(path, "setting '%s' must be a whole number of bytes", s->name);
        return -1;
    }
    *out = (size_t)value;
    return 0;
}

/* SETTING_SIZE and SETTING_BUFFER: a whole number, or a string with a
 * suffix k, m or g (KiB, MiB, GiB): 65536, "64k", "1m". From min to max. */
static int read_size(const char *path, lua_State *L, const struct setting *s, uint64_t *out)
{
    double value = -1;

    if (lua_type(L, -1) == LUA_TNUMBER) {
        value = lua_tonumber(L, -1);
    } else if (lua_type(L, -1) == LUA_TSTRING) {
        const char *text = lua_tostring(L, -1);
        char *end;
        errno = 0;
        value = strtod(text, &end);
        if (end == text || errno != 0 || value < 0)
            value = -1;
        else if (strcmp(end, "k") == 0 || strcmp(end, "K") == 0)
            value *= 1024;
        else if (strcmp(end, "m") == 0 || strcmp(end, "M") == 0)
            value *= 1024 * 1024;
        else if (strcmp(end, "g") == 0 || strcmp(end, "G") == 0)
            value *= 1024.0 * 1024 * 1024;
        else if (*end != '\0')
            value = -1;
    }
    if (!(value >= s->min && value <= s->max) || value != (double)(uint64_t)value) {
        config_error(path, "setting '%s' must be a whole number of bytes from %llu to %llu "
                           "(or a string like \"64k\", \"1m\", \"1g\")",
                     s->name, (unsigned long long)s->min, (unsigned long long)s->max);
        return -1;
    }
    *out = (uint64_t)value;
    return 0;
}

int config_read_size_value(lua_State *L, const char *path, const char *name, uint64_t *out)
{
    const struct setting s = { name, SETTING_SIZE, 0, 0, 0, 1ULL << 50, NULL, NULL };

    return read_size(path, L, &s, out);
}

/* SETTING_RATE: a number from min to max. */
static int read_rate(const char *path, lua_State *L, const struct setting *s, double *out)
{
    double rate = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : -1;

    if (!(rate >= s->min && rate <= s->max)) {
        /* The words chapter 17 gave it (0 and 1e12 are the table's bounds). */
        config_error(path, "setting '%s' must be a number of bytes per second from 0 (no minimum) "
                           "to 1e12", s->name);
        return -1;
    }
    *out = rate;
    return 0;
}

/* SETTING_BOOLEAN: true or false. */
static int read_boolean(const char *path, lua_State *L, const struct setting *s, bool *out)
{
    if (lua_type(L, -1) != LUA_TBOOLEAN) {
        config_error(path, "setting '%s' must be true or false, not a %s", s->name, luaL_typename(L, -1));
        return -1;
    }
    *out = lua_toboolean(L, -1);
    return 0;
}

/* True if the value on top of the stack is a non-empty string without
 * zero bytes. */
static bool is_text(lua_State *L)
{
    return lua_type(L, -1) == LUA_TSTRING && lua_objlen(L, -1) > 0 &&
           strlen(lua_tostring(L, -1)) == lua_objlen(L, -1);
}

/* SETTING_TEXT: a non-empty string without zero bytes, copied. */
static int read_text(const char *path, lua_State *L, const struct setting *s, char **out)
{
    if (!is_text(L)) {
        config_error(path, "setting '%s' must be a non-empty string", s->name);
        return -1;
    }
    *out = strdup(lua_tostring(L, -1));
    if (*out == NULL) {
        config_error(path, "out of memory");
        return -1;
    }
    return 0;
}

/* SETTING_CHOICE: one of the names in s->choices; *out its index. */
static int read_choice(const char *path, lua_State *L, const struct setting *s, int *out)
{
    char list[200] = "";

    if (!is_text(L)) {
        config_error(path, "setting '%s' must be a non-empty string", s->name);
        return -1;
    }
    for (size_t i = 0; s->choices[i] != NULL; i++) {
        if (strcmp(lua_tostring(L, -1), s->choices[i]) == 0) {
            *out = (int)i;
            return 0;
        }
    }
    for (size_t i = 0; s->choices[i] != NULL; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%s\"",
                 i == 0 ? "" : s->choices[i + 1] == NULL ? " or " : ", ", s->choices[i]);
    config_error(path, "setting '%s' must be %s, not \"%.100s\"", s->name, list, lua_tostring(L, -1));
    return -1;
}

/* True if dir is a directory we can make files in. */
static bool usable_dir(const char *dir)
{
    struct stat st;

    return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && access(dir, W_OK | X_OK) == 0;
}

/* SETTING_DIRECTORY: given, it must be a writable directory; else the
 * default if it is one, else /tmp. */
static int read_directory(const char *path, lua_State *L, const struct setting *s, char **out)
{
    const char *dir;

    if (lua_isnil(L, -1)) {
        dir = usable_dir(s->fallback_text) ? s->fallback_text : "/tmp";
    } else if (lua_type(L, -1) != LUA_TSTRING) {
        config_error(path, "setting '%s' must be a directory's path, not a %s", s->name,
                     luaL_typename(L, -1));
        return -1;
    } else {
        dir = lua_tostring(L, -1);
        if (dir[0] != '/' || !usable_dir(dir)) {
            config_error(path, "setting '%s': \"%.200s\" is not %s", s->name, dir,
                         dir[0] != '/' ? "an absolute path" : "a directory rsp can write to");
            return -1;
        }
    }
    *out = strdup(dir);
    if (*out == NULL) {
        config_error(path, "out of memory reading '%s'", s->name);
        return -1;
    }
    return 0;
}

/* Reads setting s, whose value is on top of the stack, into config; nil
 * keeps the default. Returns 0, or -1 after saying what is wrong. */
static int read_setting(lua_State *L, const char *path, const struct setting *s, struct config *config)
{
    void *at = place(config, s);
    uint64_t size;

    if (s->type == SETTING_DIRECTORY)
        return read_directory(path, L, s, at);
    if (lua_isnil(L, -1))
        return 0;
    switch (s->type) {
    case SETTING_SECONDS:
        return read_number(path, L, s, at);
    case SETTING_COUNT:
        return read_count(path, L, s, at);
    case SETTING_BYTES:
        return read_bytes(path, L, s, at);
    case SETTING_SIZE:
        return read_size(path, L, s, at);
    case SETTING_BUFFER:
        if (read_size(path, L, s, &size) == -1)
            return -1;
        *(size_t *)at = (size_t)size; /* max is at most 1 GiB: fits */
        return 0;
    case SETTING_RATE:
        return read_rate(path, L, s, at);
    case SETTING_BOOLEAN:
        return read_boolean(path, L, s, at);
    case SETTING_TEXT:
        return read_text(path, L, s, at);
    case SETTING_CHOICE:
        return read_choice(path, L, s, at);
    case SETTING_OWN:
    case SETTING_DIRECTORY:
        break;
    }
    return 0;
}

int config_read_settings(lua_State *L, const char *path, struct config *config)
{
    for (size_t i = 0; i < config_setting_count; i++) {
        const struct setting *s = &config_settings[i];
        int rc;

        if (s->type == SETTING_OWN)
            continue;
        config_global(L, s->name);
        rc = read_setting(L, path, s, config);
        lua_pop(L, 1);
        if (rc == -1)
            return -1;
    }
    return 0;
}
