/* config_address.c -- reading an address setting: a port, or
 * "ADDRESS:PORT" (listen, tls.listen), or for a listener the table
 * { address = ..., proxy_protocol = true }. */
#include "config_read.h"

#include "net.h"

#include <lauxlib.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int config_read_address(lua_State *L, const char *path, const char *setting, char **host,
                        char port[6])
{
    char name[256];
    const char *port_text = NULL;

    *host = NULL;
    if (lua_type(L, -1) == LUA_TNUMBER) {
        lua_Number value = lua_tonumber(L, -1);
        if (value >= 1 && value <= 65535 && value == (lua_Number)(int)value) {
            snprintf(port, 6, "%d", (int)value);
            return 0;
        }
        config_error(path, "setting '%s' must be a port from 1 to 65535, not %g", setting, value);
        return -1;
    }
    if (lua_type(L, -1) != LUA_TSTRING) {
        config_error(path, "setting '%s' must be a port or \"ADDRESS:PORT\", not a %s", setting,
                     luaL_typename(L, -1));
        return -1;
    }
    const char *text = lua_tostring(L, -1);
    if (strlen(text) != lua_objlen(L, -1)) {
        config_error(path, "setting '%s' must not contain a zero byte", setting);
    } else if (net_parse_port(text) != -1) {
        snprintf(port, 6, "%d", net_parse_port(text));
        return 0;
    } else if (config_split_host_port(text, name, sizeof name, &port_text) == -1) {
        config_error(path, "setting '%s' must be a port or \"ADDRESS:PORT\", not \"%.100s\"", setting,
                     text);
    } else if (net_parse_port(port_text) == -1) {
        config_error(path, "setting '%s': the port in \"%.100s\" must be from 1 to 65535", setting, text);
    } else if ((*host = strdup(name)) == NULL) {
        config_error(path, "out of memory");
    } else {
        snprintf(port, 6, "%d", net_parse_port(port_text));
        return 0;
    }
    return -1;
}

int config_read_listen(lua_State *L, const char *path, const char *setting, char **host, char port[6],
                       bool *proxy_protocol)
{
    static const char *const fields[] = { "address", "proxy_protocol", NULL };
    char name[64];
    int t = lua_gettop(L), rc = -1;

    *proxy_protocol = false;
    *host = NULL;
    if (lua_type(L, t) != LUA_TTABLE)
        return config_read_address(L, path, setting, host, port);
    if (config_check_fields(L, path, setting, fields) == -1)
        return -1;
    snprintf(name, sizeof name, "%s.proxy_protocol", setting);
    config_field(L, t, "proxy_protocol");
    if (!lua_isnil(L, -1) && !lua_isboolean(L, -1)) {
        config_error(path, "setting '%s' must be true or false, not a %s", name, luaL_typename(L, -1));
        lua_pop(L, 1);
        return -1;
    }
    *proxy_protocol = lua_toboolean(L, -1);
    lua_pop(L, 1);
    snprintf(name, sizeof name, "%s.address", setting);
    config_field(L, t, "address");
    if (lua_isnil(L, -1))
        config_error(path, "setting '%s' has no 'address' (a port or \"ADDRESS:PORT\")", setting);
    else
        rc = config_read_address(L, path, name, host, port);
    lua_pop(L, 1);
    return rc;
}
