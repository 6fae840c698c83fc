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
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define DEFAULT_DOWN_TIME 5.0

/* Prints "rsp: PATH: MESSAGE". Lua's own messages usually begin with
 * "PATH:LINE:" already; then we print them as they are, so that the file is
 * named once. */
static void config_error(const char *path, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static void config_error(const char *path, const char *format, ...)
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

/* Pushes the value of global `name`. Raw access: a script that put a
 * metatable on _G must not get to run code (and raise errors) here, outside
 * a protected call, where an error would abort the whole process. */
static void get_global(lua_State *L, const char *name)
{
    lua_pushstring(L, name);
    lua_rawget(L, LUA_GLOBALSINDEX);
}

/* Splits "HOST:PORT" or "[IPV6]:PORT" into host and port. Returns 0, or -1
 * if text does not have that shape (the port is checked separately). */
static int split_host_port(const char *text, char *host, size_t host_size, const char **port)
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

/* listen = 8000 | "8000" | "ADDRESS:PORT" */
static int read_listen(lua_State *L, const char *path, struct config *config)
{
    char host[256];
    const char *port = NULL;
    int rc = -1;

    get_global(L, "listen");
    if (lua_type(L, -1) == LUA_TNUMBER) {
        lua_Number value = lua_tonumber(L, -1);
        if (value >= 1 && value <= 65535 && value == (lua_Number)(int)value) {
            snprintf(config->listen_port, sizeof config->listen_port, "%d", (int)value);
            rc = 0;
        } else {
            config_error(path, "setting 'listen' must be a port from 1 to 65535, not %g", value);
        }
    } else if (lua_type(L, -1) == LUA_TSTRING) {
        const char *text = lua_tostring(L, -1);
        if (strlen(text) != lua_objlen(L, -1)) {
            config_error(path, "setting 'listen' must not contain a zero byte");
        } else if (net_parse_port(text) != -1) {
            snprintf(config->listen_port, sizeof config->listen_port, "%d", net_parse_port(text));
            rc = 0;
        } else if (split_host_port(text, host, sizeof host, &port) == -1) {
            config_error(path, "setting 'listen' must be a port or \"ADDRESS:PORT\", not \"%.100s\"", text);
        } else if (net_parse_port(port) == -1) {
            config_error(path, "setting 'listen': the port in \"%.100s\" must be from 1 to 65535", text);
        } else if ((config->listen_host = strdup(host)) == NULL) {
            config_error(path, "out of memory");
        } else {
            snprintf(config->listen_port, sizeof config->listen_port, "%d", net_parse_port(port));
            rc = 0;
        }
    } else if (lua_isnil(L, -1)) {
        get_global(L, "listenPort");
        if (!lua_isnil(L, -1))
            config_error(path, "setting 'listen' is missing (listenPort, backendAddress and "
                               "backendPort became 'listen' and 'backends' in stage 05)");
        else
            config_error(path, "setting 'listen' is missing");
        lua_pop(L, 1);
    } else {
        config_error(path, "setting 'listen' must be a port or \"ADDRESS:PORT\", not a %s",
                     luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    return rc;
}

/* Resolves entry `index` (1-based) of the backends list, "HOST:PORT". */
static int read_backend(const char *path, int index, const char *text, struct backend *b)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    char host[256], port_text[6];
    const char *port;
    int rc;

    if (split_host_port(text, host, sizeof host, &port) == -1) {
        config_error(path, "setting 'backends', entry %d: \"%.100s\" must look like HOST:PORT "
                           "(IPv6 as [ADDRESS]:PORT)", index, text);
        return -1;
    }
    if (net_parse_port(port) == -1) {
        config_error(path, "setting 'backends', entry %d: the port in \"%.100s\" must be from 1 to 65535",
                     index, text);
        return -1;
    }
    snprintf(port_text, sizeof port_text, "%d", net_parse_port(port));
    rc = getaddrinfo(host, port_text, &hints, &b->addresses);
    if (rc != 0) {
        b->addresses = NULL;
        config_error(path, "setting 'backends', entry %d: cannot resolve \"%s\": %s", index, host,
                     rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        return -1;
    }
    b->name = strdup(text);
    if (b->name == NULL) {
        config_error(path, "out of memory");
        return -1;
    }
    return 0;
}

/* backends = { "HOST:PORT", ... } */
static int read_backends(lua_State *L, const char *path, struct pool *pool)
{
    int rc = -1;
    size_t count;

    get_global(L, "backends");
    if (lua_type(L, -1) != LUA_TTABLE) {
        if (lua_isnil(L, -1))
            config_error(path, "setting 'backends' is missing");
        else
            config_error(path, "setting 'backends' must be a list of \"HOST:PORT\" strings, not a %s",
                         luaL_typename(L, -1));
        goto out;
    }
    count = lua_objlen(L, -1);
    if (count == 0) {
        config_error(path, "setting 'backends' is empty: name at least one \"HOST:PORT\"");
        goto out;
    }
    if (count > POOL_MAX_BACKENDS) {
        config_error(path, "setting 'backends' has %zu entries; at most %d are allowed", count,
                     POOL_MAX_BACKENDS);
        goto out;
    }
    pool->backends = calloc(count, sizeof *pool->backends);
    if (pool->backends == NULL) {
        config_error(path, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < count; i++) {
        int index = (int)i + 1;
        const char *text;

        lua_rawgeti(L, -1, index);
        if (lua_type(L, -1) != LUA_TSTRING) {
            config_error(path, "setting 'backends', entry %d must be a \"HOST:PORT\" string, not a %s",
                         index, luaL_typename(L, -1));
            lua_pop(L, 1);
            goto out;
        }
        text = lua_tostring(L, -1);
        if (strlen(text) != lua_objlen(L, -1)) {
            config_error(path, "setting 'backends', entry %d must not contain a zero byte", index);
            lua_pop(L, 1);
            goto out;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(pool->backends[j].name, text) == 0) {
                config_error(path, "setting 'backends', entry %d: \"%.100s\" is listed twice", index, text);
                lua_pop(L, 1);
                goto out;
            }
        }
        pool->count = i + 1; /* so that pool_free releases this entry too */
        if (read_backend(path, index, text, &pool->backends[i]) == -1) {
            lua_pop(L, 1);
            goto out;
        }
        lua_pop(L, 1);
    }
    rc = 0;
out:
    lua_pop(L, 1);
    return rc;
}

/* balance = "round_robin" | "least_conn"; optional. */
static int read_balance(lua_State *L, const char *path, struct pool *pool)
{
    int rc = 0;

    get_global(L, "balance");
    pool->balance = BALANCE_ROUND_ROBIN;
    if (lua_type(L, -1) == LUA_TSTRING) {
        const char *text = lua_tostring(L, -1);
        if (strcmp(text, "least_conn") == 0) {
            pool->balance = BALANCE_LEAST_CONN;
        } else if (strcmp(text, "round_robin") != 0) {
            config_error(path, "setting 'balance' must be \"round_robin\" or \"least_conn\", not \"%.100s\"", text);
            rc = -1;
        }
    } else if (!lua_isnil(L, -1)) {
        config_error(path, "setting 'balance' must be \"round_robin\" or \"least_conn\", not a %s",
                     luaL_typename(L, -1));
        rc = -1;
    }
    lua_pop(L, 1);
    return rc;
}

/* down_time = seconds; optional. */
static int read_down_time(lua_State *L, const char *path, struct pool *pool)
{
    int rc = 0;

    get_global(L, "down_time");
    pool->down_time = DEFAULT_DOWN_TIME;
    if (lua_type(L, -1) == LUA_TNUMBER && lua_tonumber(L, -1) > 0 && lua_tonumber(L, -1) <= 86400) {
        pool->down_time = lua_tonumber(L, -1);
    } else if (!lua_isnil(L, -1)) {
        config_error(path, "setting 'down_time' must be a number of seconds above 0 and at most 86400");
        rc = -1;
    }
    lua_pop(L, 1);
    return rc;
}

/* Loads and runs the script. On failure, prints Lua's message. */
static int run_script(lua_State *L, const char *path)
{
    FILE *file = fopen(path, "r");

    /* luaL_loadfile would report a missing file too, but in Lua's words;
     * checking first lets us say exactly what the operator needs to hear. */
    if (file == NULL) {
        config_error(path, "cannot open config file: %s", strerror(errno));
        return -1;
    }
    fclose(file);

    if (luaL_loadfile(L, path) != 0 || lua_pcall(L, 0, 0, 0) != 0) {
        const char *message = lua_tostring(L, -1);
        config_error(path, "%s", message != NULL ? message : "error object is not a string");
        lua_pop(L, 1);
        return -1;
    }
    return 0;
}

int config_load(const char *path, struct config *config)
{
    lua_State *L = luaL_newstate();
    int rc = -1;

    memset(config, 0, sizeof *config);
    if (L == NULL) {
        config_error(path, "cannot create a Lua state (out of memory)");
        return -1;
    }
    luaL_openlibs(L);

    if (run_script(L, path) == 0 &&
        read_listen(L, path, config) == 0 &&
        read_backends(L, path, &config->pool) == 0 &&
        read_balance(L, path, &config->pool) == 0 &&
        read_down_time(L, path, &config->pool) == 0)
        rc = 0;

    lua_close(L);
    if (rc == -1)
        config_free(config);
    return rc;
}

void config_free(struct config *config)
{
    free(config->listen_host);
    config->listen_host = NULL;
    pool_free(&config->pool);
}
