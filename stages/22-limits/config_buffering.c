/* config_buffering.c -- the settings of chapter 17: buffering request
 * bodies and responses between slow clients and the backends, the limits
 * on a body, and where temporary files go. */
#include "config_read.h"

#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Of a request body, what is kept in memory; the rest goes to a file. 64
 * KiB holds every form post and JSON body a personal site sees (a few KiB)
 * with room to spare, and is what one client costs at most while it
 * uploads: a thousand slow uploaders, 64 MiB. Measured (wrk, one
 * connection, nginx behind rsp on loopback; median per request, all in
 * memory against all through a file): 4 KiB 53 us against 87, 64 KiB 116
 * against 171, 256 KiB 446 against 427, 1 MiB 1.94 ms against 1.40. A
 * file costs some 40 us (open, write, read back, close) that only a small
 * body notices; past 256 KiB it is no slower than memory, and memory is
 * what a crowd of uploaders would take. */
#define DEFAULT_REQUEST_BUFFER_SIZE (64 * 1024)
/* The largest body accepted. nginx's 1 MiB refuses a phone's photo; a
 * personal site's uploads (photos, a short video, a backup of notes) fit
 * in 100 MiB, and so many bytes on disk per upload cannot fill a small
 * VPS's disk with a few hostile clients. Raise it for a file-sharing app. */
#define DEFAULT_MAX_BODY_SIZE (100 * 1024 * 1024)
/* Of a response, what may wait in memory for a slow client: four times
 * the high-water mark, so that a page of a few hundred KiB never touches
 * the disk, and a thousand slow readers cost 256 MiB at most. */
#define DEFAULT_RESPONSE_BUFFER_SIZE (256 * 1024)
/* Of a response, what may wait on disk, as nginx's proxy_max_temp_file_size:
 * beyond it the backend waits for the client again (backpressure). */
#define DEFAULT_MAX_TEMP_FILE_SIZE (1024ULL * 1024 * 1024)
#define DEFAULT_TEMP_DIR "/var/lib/rsp/tmp"

/* Reads a size in bytes: a whole number, or a string with a suffix k, m
 * or g (KiB, MiB, GiB): 65536, "64k", "1m". From min to max. */
static int read_size(lua_State *L, const char *path, const char *name, uint64_t fallback,
                     uint64_t min, uint64_t max, uint64_t *out)
{
    double value = -1;
    int rc = 0;

    config_global(L, name);
    *out = fallback;
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
    if (lua_isnil(L, -1)) {
        /* the default */
    } else if (!(value >= (double)min && value <= (double)max) || value != (double)(uint64_t)value) {
        config_error(path, "setting '%s' must be a whole number of bytes from %llu to %llu "
                           "(or a string like \"64k\", \"1m\", \"1g\")",
                     name, (unsigned long long)min, (unsigned long long)max);
        rc = -1;
    } else {
        *out = (uint64_t)value;
    }
    lua_pop(L, 1);
    return rc;
}

/* True if dir is a directory we can make files in. */
static bool usable_dir(const char *dir)
{
    struct stat st;

    return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && access(dir, W_OK | X_OK) == 0;
}

/* temp_dir: given, it must be a writable directory; else the default if
 * it is one, else /tmp. */
static int read_temp_dir(lua_State *L, const char *path, char **out)
{
    const char *dir;
    int rc = 0;

    config_global(L, "temp_dir");
    if (lua_isnil(L, -1)) {
        dir = usable_dir(DEFAULT_TEMP_DIR) ? DEFAULT_TEMP_DIR : "/tmp";
    } else if (lua_type(L, -1) != LUA_TSTRING) {
        config_error(path, "setting 'temp_dir' must be a directory's path, not a %s",
                     luaL_typename(L, -1));
        rc = -1;
        dir = NULL;
    } else {
        dir = lua_tostring(L, -1);
        if (dir[0] != '/' || !usable_dir(dir)) {
            config_error(path, "setting 'temp_dir': \"%.200s\" is not %s", dir,
                         dir[0] != '/' ? "an absolute path" : "a directory rsp can write to");
            rc = -1;
        }
    }
    if (rc == 0) {
        *out = strdup(dir);
        if (*out == NULL) {
            config_error(path, "out of memory reading 'temp_dir'");
            rc = -1;
        }
    }
    lua_pop(L, 1);
    return rc;
}

int config_read_buffering(lua_State *L, const char *path, struct buffering *b)
{
    uint64_t request_size, response_size;
    double rate;

    if (config_read_boolean(L, path, "request_buffering", true, &b->request) == -1 ||
        read_size(L, path, "request_buffer_size", DEFAULT_REQUEST_BUFFER_SIZE, 0, 1ULL << 30,
                  &request_size) == -1 ||
        read_size(L, path, "max_body_size", DEFAULT_MAX_BODY_SIZE, 0, 1ULL << 50, &b->max_body) == -1 ||
        config_read_boolean(L, path, "response_buffering", true, &b->response) == -1 ||
        read_size(L, path, "response_buffer_size", DEFAULT_RESPONSE_BUFFER_SIZE, 16384, 1ULL << 30,
                  &response_size) == -1 ||
        read_size(L, path, "max_temp_file_size", DEFAULT_MAX_TEMP_FILE_SIZE, 0, 1ULL << 50,
                  &b->max_temp_file) == -1 ||
        read_temp_dir(L, path, &b->temp_dir) == -1)
        return -1;
    config_global(L, "body_min_rate");
    rate = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : -1;
    if (lua_isnil(L, -1)) {
        rate = 0;
    } else if (!(rate >= 0 && rate <= 1e12)) {
        config_error(path, "setting 'body_min_rate' must be a number of bytes per second from 0 "
                           "(no minimum) to 1e12");
        lua_pop(L, 1);
        return -1;
    }
    lua_pop(L, 1);
    b->body_min_rate = rate;
    b->request_size = (size_t)request_size;
    b->response_size = (size_t)response_size;
    return 0;
}
