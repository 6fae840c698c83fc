/* config.c -- loading the Lua configuration with LuaJIT.
 *
 * The config file is a Lua program: whatever globals it sets once it has
 * run are the settings. So an operator can compute values, read the
 * environment or share pieces between files, and we only check the result. */
#include "config.h"

#include "net.h"
#include "router.h"

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

/* Pushes field `name` of the table at stack index t, without metamethods. */
static void get_field(lua_State *L, int t, const char *name)
{
    if (t == LUA_GLOBALSINDEX) {
        get_global(L, name);
        return;
    }
    lua_pushstring(L, name);
    lua_rawget(L, t < 0 ? t - 1 : t);
}

/* Resolves entry `index` (1-based) of a backends list, "HOST:PORT".
 * `setting` names the list in messages. */
static int read_backend(const char *path, const char *setting, int index, const char *text,
                        struct backend *b)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    char host[256], port_text[6];
    const char *port;
    int rc;

    if (split_host_port(text, host, sizeof host, &port) == -1) {
        config_error(path, "setting '%s', entry %d: \"%.100s\" must look like HOST:PORT "
                           "(IPv6 as [ADDRESS]:PORT)", setting, index, text);
        return -1;
    }
    if (net_parse_port(port) == -1) {
        config_error(path, "setting '%s', entry %d: the port in \"%.100s\" must be from 1 to 65535",
                     setting, index, text);
        return -1;
    }
    snprintf(port_text, sizeof port_text, "%d", net_parse_port(port));
    rc = getaddrinfo(host, port_text, &hints, &b->addresses);
    if (rc != 0) {
        b->addresses = NULL;
        config_error(path, "setting '%s', entry %d: cannot resolve \"%s\": %s", setting, index, host,
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

/* Reads the list of "HOST:PORT" strings on top of the stack into pool. */
static int read_backend_list(lua_State *L, const char *path, const char *setting, struct pool *pool)
{
    size_t count;

    if (lua_type(L, -1) != LUA_TTABLE) {
        config_error(path, "setting '%s' must be a list of \"HOST:PORT\" strings, not a %s",
                     setting, luaL_typename(L, -1));
        return -1;
    }
    count = lua_objlen(L, -1);
    if (count == 0) {
        config_error(path, "setting '%s' is empty: name at least one \"HOST:PORT\"", setting);
        return -1;
    }
    if (count > POOL_MAX_BACKENDS) {
        config_error(path, "setting '%s' has %zu entries; at most %d are allowed", setting, count,
                     POOL_MAX_BACKENDS);
        return -1;
    }
    pool->backends = calloc(count, sizeof *pool->backends);
    if (pool->backends == NULL) {
        config_error(path, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        int index = (int)i + 1, rc = 0;
        const char *text;

        lua_rawgeti(L, -1, index);
        if (lua_type(L, -1) != LUA_TSTRING) {
            config_error(path, "setting '%s', entry %d must be a \"HOST:PORT\" string, not a %s",
                         setting, index, luaL_typename(L, -1));
            rc = -1;
        } else if (strlen(text = lua_tostring(L, -1)) != lua_objlen(L, -1)) {
            config_error(path, "setting '%s', entry %d must not contain a zero byte", setting, index);
            rc = -1;
        } else {
            for (size_t j = 0; j < i && rc == 0; j++) {
                if (strcmp(pool->backends[j].name, text) == 0) {
                    config_error(path, "setting '%s', entry %d: \"%.100s\" is listed twice",
                                 setting, index, text);
                    rc = -1;
                }
            }
            if (rc == 0) {
                pool->count = i + 1; /* so that pool_free releases this entry too */
                rc = read_backend(path, setting, index, text, &pool->backends[i]);
            }
        }
        lua_pop(L, 1);
        if (rc == -1)
            return -1;
    }
    return 0;
}

/* Reads `balance` of the table at t into pool (optional: round_robin). */
static int read_balance(lua_State *L, const char *path, int t, const char *setting, struct pool *pool)
{
    int rc = 0;

    get_field(L, t, "balance");
    pool->balance = BALANCE_ROUND_ROBIN;
    if (lua_type(L, -1) == LUA_TSTRING) {
        const char *text = lua_tostring(L, -1);
        if (strcmp(text, "least_conn") == 0) {
            pool->balance = BALANCE_LEAST_CONN;
        } else if (strcmp(text, "round_robin") != 0) {
            config_error(path, "setting '%s' must be \"round_robin\" or \"least_conn\", not \"%.100s\"",
                         setting, text);
            rc = -1;
        }
    } else if (!lua_isnil(L, -1)) {
        config_error(path, "setting '%s' must be \"round_robin\" or \"least_conn\", not a %s",
                     setting, luaL_typename(L, -1));
        rc = -1;
    }
    lua_pop(L, 1);
    return rc;
}

/* Reads a positive number setting of the globals, with a default and a
 * range (both inclusive). */
static int read_number(lua_State *L, const char *path, const char *name, double fallback,
                       double min, double max, double *out)
{
    int rc = 0;

    get_global(L, name);
    *out = fallback;
    if (lua_type(L, -1) == LUA_TNUMBER && lua_tonumber(L, -1) >= min && lua_tonumber(L, -1) <= max) {
        *out = lua_tonumber(L, -1);
    } else if (!lua_isnil(L, -1)) {
        config_error(path, "setting '%s' must be a number from %.10g to %.10g", name, min, max);
        rc = -1;
    }
    lua_pop(L, 1);
    return rc;
}

/* The default site: `backends` and `balance` globals. Optional when there
 * are sites. */
static int read_default_site(lua_State *L, const char *path, struct config *config)
{
    int rc = 0;

    get_global(L, "backends");
    if (!lua_isnil(L, -1)) {
        rc = read_backend_list(L, path, "backends", &config->default_pool);
        if (rc == 0)
            rc = read_balance(L, path, LUA_GLOBALSINDEX, "balance", &config->default_pool);
        config->router.fallback = rc == 0 ? &config->default_pool : NULL;
    }
    lua_pop(L, 1);
    return rc;
}

/* Checks a site name: a host name, or "*." and a host name; a trailing
 * dot is allowed ("example.com." is "example.com"), empty labels are not.
 * Writes it in lower case to out, a wildcard as its suffix (".example.com"). */
static int site_name(const char *text, size_t length, char *out, size_t size, bool *wildcard)
{
    size_t n = 0;

    if (strlen(text) != length)
        return -1;
    *wildcard = length > 2 && text[0] == '*' && text[1] == '.';
    if (*wildcard) {
        text += 2;
        length -= 2;
        out[n++] = '.';
    }
    if (length > 0 && text[length - 1] == '.')
        length--;
    if (length == 0 || n + length >= size || text[length - 1] == '.')
        return -1;
    for (size_t i = 0; i < length; i++) {
        char c = text[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c == '.' && (i == 0 || text[i - 1] == '.'))
            return -1; /* an empty label */
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_'))
            return -1;
        out[n++] = c;
    }
    out[n] = '\0';
    return 0;
}

/* sites = { ["NAME"] = { backends = {...}, balance = "..." }, ... } */
static int read_sites(lua_State *L, const char *path, struct config *config)
{
    struct router *router = &config->router;
    int rc = 0;
    size_t count = 0;

    get_global(L, "sites");
    if (lua_isnil(L, -1))
        goto out;
    if (lua_type(L, -1) != LUA_TTABLE) {
        config_error(path, "setting 'sites' must be a table of site name = { backends = {...} }, not a %s",
                     luaL_typename(L, -1));
        rc = -1;
        goto out;
    }
    for (lua_pushnil(L); lua_next(L, -2) != 0; lua_pop(L, 1))
        count++;
    router->sites = calloc(count ? count : 1, sizeof *router->sites);
    if (router->sites == NULL) {
        config_error(path, "out of memory");
        rc = -1;
        goto out;
    }
    for (lua_pushnil(L); rc == 0 && lua_next(L, -2) != 0; lua_pop(L, 1)) {
        struct site *site = &router->sites[router->count];
        char setting[300], name[256];
        const char *key;

        if (lua_type(L, -2) != LUA_TSTRING) {
            config_error(path, "setting 'sites': every key must be a host name string, not a %s",
                         luaL_typename(L, -2));
            rc = -1;
            continue;
        }
        key = lua_tostring(L, -2);
        if (site_name(key, lua_objlen(L, -2), name, sizeof name, &site->wildcard) == -1) {
            config_error(path, "setting 'sites': \"%.100s\" is not a host name (or \"*.\" and one)", key);
            rc = -1;
            continue;
        }
        for (size_t j = 0; j < router->count; j++) {
            if (router->sites[j].wildcard == site->wildcard && strcmp(router->sites[j].name, name) == 0) {
                config_error(path, "setting 'sites': \"%.100s\" is listed twice", key);
                rc = -1;
            }
        }
        if (rc == -1)
            continue;
        if ((site->name = strdup(name)) == NULL) {
            config_error(path, "out of memory");
            rc = -1;
            continue;
        }
        router->count++; /* so that config_free releases it */
        site->pool.down_time = config->default_pool.down_time;
        if (lua_type(L, -1) != LUA_TTABLE) {
            config_error(path, "setting 'sites[\"%.100s\"]' must be a table like { backends = {...} }, not a %s",
                         key, luaL_typename(L, -1));
            rc = -1;
            continue;
        }
        snprintf(setting, sizeof setting, "sites[\"%.100s\"].backends", key);
        get_field(L, -1, "backends");
        if (lua_isnil(L, -1)) {
            config_error(path, "setting '%s' is missing", setting);
            rc = -1;
        } else {
            rc = read_backend_list(L, path, setting, &site->pool);
        }
        lua_pop(L, 1);
        snprintf(setting, sizeof setting, "sites[\"%.100s\"].balance", key);
        if (rc == 0)
            rc = read_balance(L, path, -1, setting, &site->pool);
    }
    if (rc == -1)
        lua_pop(L, 1); /* the key lua_next would have taken */
out:
    lua_pop(L, 1);
    return rc;
}

/* allow_underscores_in_headers = true | false (absent: false) */
static int read_policy(lua_State *L, const char *path, struct request_policy *policy)
{
    int rc = 0;

    get_global(L, "allow_underscores_in_headers");
    policy->allow_underscores_in_headers = false;
    if (lua_type(L, -1) == LUA_TBOOLEAN) {
        policy->allow_underscores_in_headers = lua_toboolean(L, -1);
    } else if (!lua_isnil(L, -1)) {
        config_error(path, "setting 'allow_underscores_in_headers' must be true or false, not a %s",
                     luaL_typename(L, -1));
        rc = -1;
    }
    lua_pop(L, 1);
    return rc;
}

/* max_request_line and max_request_head: the parser's limits. */
static int read_limits(lua_State *L, const char *path, struct http_limits *limits)
{
    double line, head;

    if (read_number(L, path, "max_request_line", 8192, 256, 1048576, &line) == -1 ||
        read_number(L, path, "max_request_head", 32768, 256, 1048576, &head) == -1)
        return -1;
    if (line != (double)(size_t)line || head != (double)(size_t)head) {
        config_error(path, "setting '%s' must be a whole number of bytes",
                     line != (double)(size_t)line ? "max_request_line" : "max_request_head");
        return -1;
    }
    if (head < line) {
        config_error(path, "setting 'max_request_head' (%g) must be at least 'max_request_line' (%g)",
                     head, line);
        return -1;
    }
    limits->max_line = (size_t)line;
    limits->max_head = (size_t)head;
    return 0;
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
        read_number(L, path, "down_time", DEFAULT_DOWN_TIME, 0.001, 86400,
                    &config->default_pool.down_time) == 0 &&
        read_default_site(L, path, config) == 0 &&
        read_sites(L, path, config) == 0 &&
        read_limits(L, path, &config->limits) == 0 &&
        read_policy(L, path, &config->policy) == 0) {
        if (config->router.fallback == NULL && config->router.count == 0)
            config_error(path, "setting 'backends' is missing (and there are no 'sites')");
        else
            rc = 0;
    }

    lua_close(L);
    if (rc == -1)
        config_free(config);
    return rc;
}

void config_free(struct config *config)
{
    free(config->listen_host);
    config->listen_host = NULL;
    pool_free(&config->default_pool);
    for (size_t i = 0; i < config->router.count; i++) {
        free(config->router.sites[i].name);
        pool_free(&config->router.sites[i].pool);
    }
    free(config->router.sites);
    config->router.sites = NULL;
    config->router.count = 0;
    config->router.fallback = NULL;
}
