/* config_address.c -- reading an address setting: a port, or
 * "ADDRESS:PORT" (listen, tls.listen). */
#include "config_read.h"

#include "net.h"

#include <lauxlib.h>
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
