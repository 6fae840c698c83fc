/* config_health.c -- the health_check setting: at the top level, the
 * default for every pool and site; in a pool or site table, its own
 *
 *   health_check = { path = "/", interval = 2, timeout = 1, rise = 2, fall = 3 }
 *   health_check = false          -- no active checks here
 *
 * A table inherits the fields it leaves out from the top-level one, and
 * those from the defaults above. Without any health_check, nothing is
 * checked actively (passive health, down_time, still applies). */
#include "config_read.h"

#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

const struct health_settings config_health_defaults = {
    .enabled = false, .path = "/", .interval = 2, .timeout = 1, .rise = 2, .fall = 3,
};

/* A path to GET: "/" and visible ASCII, at most 255 bytes. */
static bool is_check_path(const char *text, size_t length)
{
    if (length == 0 || length >= sizeof config_health_defaults.path || text[0] != '/' ||
        strlen(text) != length)
        return false;
    for (size_t i = 0; i < length; i++)
        if ((unsigned char)text[i] <= 0x20 || (unsigned char)text[i] >= 0x7f)
            return false;
    return true;
}

/* Reads a number field of the table on top of the stack, if present.
 * `whole`: a whole number from 1 to 1000; else seconds, 0.001 to 86400. */
static int read_field(lua_State *L, const char *path, const char *setting, const char *name,
                      bool whole, double *out)
{
    int rc = 0;

    config_field(L, -1, name);
    if (lua_type(L, -1) == LUA_TNUMBER) {
        double v = lua_tonumber(L, -1);
        if (whole ? !(v >= 1 && v <= 1000 && v == (double)(int)v) : !(v >= 0.001 && v <= 86400)) {
            config_error(path, whole ? "setting '%s.%s' must be a whole number from 1 to 1000"
                                     : "setting '%s.%s' must be a number of seconds from 0.001 to 86400",
                         setting, name);
            rc = -1;
        } else {
            *out = v;
        }
    } else if (!lua_isnil(L, -1)) {
        config_error(path, "setting '%s.%s' must be a number, not a %s", setting, name,
                     luaL_typename(L, -1));
        rc = -1;
    }
    lua_pop(L, 1);
    return rc;
}

/* Reads the health_check table on top of the stack over *out. */
static int read_table(lua_State *L, const char *path, const char *setting,
                      struct health_settings *out)
{
    static const char *const fields[] = { "path", "interval", "timeout", "rise", "fall", NULL };
    double rise = out->rise, fall = out->fall;

    if (config_check_fields(L, path, setting, fields) == -1)
        return -1;
    config_field(L, -1, "path");
    if (lua_type(L, -1) == LUA_TSTRING && is_check_path(lua_tostring(L, -1), lua_objlen(L, -1))) {
        snprintf(out->path, sizeof out->path, "%s", lua_tostring(L, -1));
    } else if (!lua_isnil(L, -1)) {
        config_error(path, "setting '%s.path' must be a path like \"/healthz\" (a '/' and at most "
                           "254 visible characters)", setting);
        lua_pop(L, 1);
        return -1;
    }
    lua_pop(L, 1);
    if (read_field(L, path, setting, "interval", false, &out->interval) == -1 ||
        read_field(L, path, setting, "timeout", false, &out->timeout) == -1 ||
        read_field(L, path, setting, "rise", true, &rise) == -1 ||
        read_field(L, path, setting, "fall", true, &fall) == -1)
        return -1;
    out->rise = (unsigned)rise;
    out->fall = (unsigned)fall;
    out->enabled = true;
    return 0;
}

int config_read_health(lua_State *L, const char *path, int t, const char *setting,
                       const struct health_settings *inherited, struct health_settings *out)
{
    int rc = 0;

    *out = *inherited;
    config_field(L, t, "health_check");
    if (lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1)) {
        out->enabled = false;
    } else if (lua_type(L, -1) == LUA_TTABLE) {
        rc = read_table(L, path, setting, out);
    } else if (!lua_isnil(L, -1)) {
        config_error(path, "setting '%s' must be a table like { path = \"/\", interval = 2 } or "
                           "false, not %s", setting,
                     lua_type(L, -1) == LUA_TBOOLEAN ? "true" : luaL_typename(L, -1));
        rc = -1;
    }
    lua_pop(L, 1);
    return rc;
}
