/* config.c -- loading the Lua configuration with LuaJIT.
 *
 * The config file is a Lua program: whatever globals it sets once it has
 * run are the settings. So an operator can compute values, read the
 * environment or share pieces between files, and we only check the result. */
#include "config.h"

#include "net.h"

#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prints "rsp: PATH: MESSAGE". Lua's own messages usually begin with
 * "PATH:LINE:" already; then we print them as they are, so that the file is
 * named once. */
static void config_error(const char *path, const char *message)
{
    size_t path_len = strlen(path);

    if (strncmp(message, path, path_len) == 0 && message[path_len] == ':')
        fprintf(stderr, "rsp: %s\n", message);
    else
        fprintf(stderr, "rsp: %s: %s\n", path, message);
}

/* Pushes the value of global `name`. Raw access: a script that put a
 * metatable on _G must not get to run code (and raise errors) here, outside
 * a protected call, where an error would abort the whole process. */
static void get_global(lua_State *L, const char *name)
{
    lua_pushstring(L, name);
    lua_rawget(L, LUA_GLOBALSINDEX);
}

/* Reads global `name` as a port number: a whole number, or a string of
 * digits, from 1 to 65535. Writes it as text to out. Returns 0 or -1. */
static int read_port(lua_State *L, const char *path, const char *name, char out[6])
{
    char message[200];
    int ok = 0;

    get_global(L, name);
    if (lua_type(L, -1) == LUA_TNUMBER) {
        lua_Number value = lua_tonumber(L, -1);
        if (value >= 1 && value <= 65535 && value == (lua_Number)(int)value) {
            snprintf(out, 6, "%d", (int)value);
            ok = 1;
        } else {
            snprintf(message, sizeof message,
                     "setting '%s' must be a port number from 1 to 65535, not %g", name, value);
        }
    } else if (lua_type(L, -1) == LUA_TSTRING) {
        const char *text = lua_tostring(L, -1);
        int port = net_parse_port(text);
        if (port != -1) {
            snprintf(out, 6, "%d", port); /* "08000" is written 8000 */
            ok = 1;
        } else {
            snprintf(message, sizeof message,
                     "setting '%s' must be a port number from 1 to 65535, not \"%.40s\"", name, text);
        }
    } else if (lua_isnil(L, -1)) {
        snprintf(message, sizeof message, "setting '%s' is missing", name);
    } else {
        snprintf(message, sizeof message,
                 "setting '%s' must be a port number (a number or a string), not a %s",
                 name, luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    if (!ok)
        config_error(path, message);
    return ok ? 0 : -1;
}

/* Reads global `name` as a non-empty string into a malloc'd copy. */
static int read_string(lua_State *L, const char *path, const char *name, char **out)
{
    char message[200];
    int ok = 0;

    get_global(L, name);
    if (lua_type(L, -1) == LUA_TSTRING && lua_objlen(L, -1) > 0 &&
        strlen(lua_tostring(L, -1)) == lua_objlen(L, -1)) {
        *out = strdup(lua_tostring(L, -1));
        if (*out == NULL)
            snprintf(message, sizeof message, "out of memory reading setting '%s'", name);
        else
            ok = 1;
    } else if (lua_isnil(L, -1)) {
        snprintf(message, sizeof message, "setting '%s' is missing", name);
    } else if (lua_type(L, -1) == LUA_TSTRING && lua_objlen(L, -1) == 0) {
        snprintf(message, sizeof message, "setting '%s' must not be empty", name);
    } else if (lua_type(L, -1) == LUA_TSTRING) {
        snprintf(message, sizeof message, "setting '%s' must not contain a zero byte", name);
    } else {
        snprintf(message, sizeof message, "setting '%s' must be a string, not a %s",
                 name, luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    if (!ok)
        config_error(path, message);
    return ok ? 0 : -1;
}

/* Loads and runs the script. On failure, prints Lua's message. */
static int run_script(lua_State *L, const char *path)
{
    FILE *file = fopen(path, "r");

    /* luaL_loadfile would report a missing file too, but in Lua's words;
     * checking first lets us say exactly what the operator needs to hear. */
    if (file == NULL) {
        fprintf(stderr, "rsp: %s: cannot open config file: %s\n", path, strerror(errno));
        return -1;
    }
    fclose(file);

    if (luaL_loadfile(L, path) != 0 || lua_pcall(L, 0, 0, 0) != 0) {
        const char *message = lua_tostring(L, -1);
        config_error(path, message != NULL ? message : "error object is not a string");
        lua_pop(L, 1);
        return -1;
    }
    return 0;
}

int config_load(const char *path, struct config *config)
{
    lua_State *L = luaL_newstate();
    int rc = -1;

    if (L == NULL) {
        fprintf(stderr, "rsp: %s: cannot create a Lua state (out of memory)\n", path);
        return -1;
    }
    luaL_openlibs(L);
    config->backend_address = NULL;

    if (run_script(L, path) == 0 &&
        read_port(L, path, "listenPort", config->listen_port) == 0 &&
        read_string(L, path, "backendAddress", &config->backend_address) == 0 &&
        read_port(L, path, "backendPort", config->backend_port) == 0)
        rc = 0;

    lua_close(L);
    if (rc == -1)
        config_free(config);
    return rc;
}

void config_free(struct config *config)
{
    free(config->backend_address);
    config->backend_address = NULL;
}
