/* config_read.c -- the helpers every file that reads the config shares
 * (config_read.h): messages, raw access to globals and fields, the check
 * for misspelt fields, and splitting HOST:PORT. */
#include "config_read.h"


#include <lauxlib.h>
#include <lua.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Lua's own messages usually begin with "PATH:LINE:" already; then we print
 * them as they are. */
void config_error(const char *path, const char *format, ...)
{
    char message[512];
    size_t path_len = strlen(path);
    va_list args;

    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    if (strncmp(message, path, path_len) == 0 && message[path_len] == ':')
        fprintf(stderr, "rsp: %s\n", message);
    else
        fprintf(stderr, "rsp: %s: %s\n", path, message);
}

void config_global(lua_State *L, const char *name)
{
    lua_pushstring(L, name);
    lua_rawget(L, LUA_GLOBALSINDEX);
}

int config_split_host_port(const char *text, char *host, size_t host_size, const char **port)
{
    const char *colon;
    size_t host_len;

    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (close == NULL || close[1] != ':')
            return -1;
        host_len = (size_t)(close - text - 1);
        text++;
        colon = close + 1;
    } else {
        colon = strrchr(text, ':');
        if (colon == NULL || memchr(text, ':', (size_t)(colon - text)) != NULL)
            return -1; /* no port, or an IPv6 address without brackets */
        host_len = (size_t)(colon - text);
    }
    if (host_len == 0 || host_len >= host_size)
        return -1;
    memcpy(host, text, host_len);
    host[host_len] = '\0';
    *port = colon + 1;
    return 0;
}

void config_field(lua_State *L, int t, const char *name)
{
    if (t == LUA_GLOBALSINDEX) {
        config_global(L, name);
        return;
    }
    lua_pushstring(L, name);
    lua_rawget(L, t < 0 ? t - 1 : t);
}

int config_check_fields(lua_State *L, const char *path, const char *setting,
                        const char *const known[])
{
    char list[200] = "";

    for (lua_pushnil(L); lua_next(L, -2) != 0; lua_pop(L, 1)) {
        bool found = false;

        for (size_t i = 0; known[i] != NULL && !found; i++)
            found = lua_type(L, -2) == LUA_TSTRING && strcmp(lua_tostring(L, -2), known[i]) == 0;
        if (found)
            continue;
        for (size_t i = 0; known[i] != NULL; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", known[i]);
        if (lua_type(L, -2) == LUA_TSTRING)
            config_error(path, "setting '%s' has no field '%.100s' (it may have: %s)", setting,
                         lua_tostring(L, -2), list);
        else
            config_error(path, "setting '%s' has a %s key; its fields are: %s", setting,
                         luaL_typename(L, -2), list);
        lua_pop(L, 2);
        return -1;
    }
    return 0;
}


int config_check_list(lua_State *L, const char *path, const char *setting)
{
    size_t length = lua_objlen(L, -1);

    for (lua_pushnil(L); lua_next(L, -2) != 0; lua_pop(L, 1)) {
        lua_Number n = lua_type(L, -2) == LUA_TNUMBER ? lua_tonumber(L, -2) : 0;

        if (n >= 1 && n <= (lua_Number)length && n == (lua_Number)(size_t)n)
            continue;
        if (lua_type(L, -2) == LUA_TSTRING)
            config_error(path, "setting '%s' must be a list, not have the field '%.100s'", setting,
                         lua_tostring(L, -2));
        else if (lua_type(L, -2) == LUA_TNUMBER)
            config_error(path, "setting '%s' must be a list without gaps, not have the key %g", setting,
                         n);
        else
            config_error(path, "setting '%s' must be a list, not have a %s key", setting,
                         luaL_typename(L, -2));
        lua_pop(L, 2);
        return -1;
    }
    return 0;
}
