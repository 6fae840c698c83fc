/* config.c -- loading the Lua configuration with LuaJIT.
 *
 * The config file is a Lua program: whatever globals it sets once it has
 * run are the settings. So an operator can compute values, read the
 * environment or share pieces between files, and we only check the result. */
#include "config.h"

#include "access_log.h"
#include "cidr.h"
#include "config_read.h"
#include "config_settings.h"
#include "fastcgi_script.h"
#include "mime.h"
#include "net.h"
#include "route.h"
#include "router.h"

#include <errno.h>
#include <lauxlib.h>
#include <pwd.h>
#include <lua.h>
#include <luajit.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* listen = 8000 | "8000" | "ADDRESS:PORT" | { address = ..., proxy_protocol = true } */
static int read_listen(lua_State *L, const char *path, struct config *config)
{
    int rc = -1;

    config_global(L, "listen");
    if (lua_isnil(L, -1)) {
        config_global(L, "listenPort");
        if (!lua_isnil(L, -1))
            config_error(path, "setting 'listen' is missing (listenPort, backendAddress and "
                               "backendPort became 'listen' and 'backends' in stage 05)");
        else
            config_error(path, "setting 'listen' is missing");
        lua_pop(L, 1);
    } else {
        rc = config_read_listen(L, path, "listen", &config->listen_host, config->listen_port,
                                &config->proxy_protocol);
    }
    lua_pop(L, 1);
    return rc;
}

/* trusted_proxies = { "10.0.0.0/8", "::1", ... }: the load balancers
 * whose PROXY header and X-Forwarded-For are believed (cidr.h). */
static int read_trusted_proxies(lua_State *L, const char *path, struct config *config)
{
    size_t count;
    int rc = 0;

    config_global(L, "trusted_proxies");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return 0;
    }
    if (lua_type(L, -1) != LUA_TTABLE) {
        config_error(path, "setting 'trusted_proxies' must be a list of addresses or prefixes "
                           "like { \"10.0.0.0/8\", \"::1\" }, not a %s", luaL_typename(L, -1));
        lua_pop(L, 1);
        return -1;
    }
    if (config_check_list(L, path, "trusted_proxies") == -1) {
        lua_pop(L, 1);
        return -1;
    }
    if ((count = lua_objlen(L, -1)) == 0) {
        config_error(path, "setting 'trusted_proxies' is an empty list");
        lua_pop(L, 1);
        return -1;
    }
    config->trusted_proxies = calloc(count, sizeof *config->trusted_proxies);
    if (config->trusted_proxies == NULL) {
        config_error(path, "out of memory");
        lua_pop(L, 1);
        return -1;
    }
    for (size_t i = 0; i < count && rc == 0; i++) {
        lua_rawgeti(L, -1, (int)i + 1);
        if (lua_type(L, -1) != LUA_TSTRING || strlen(lua_tostring(L, -1)) != lua_objlen(L, -1) ||
            cidr_parse(lua_tostring(L, -1), &config->trusted_proxies[i]) == -1) {
            config_error(path, "setting 'trusted_proxies': entry %zu must be an address or a prefix "
                               "(\"10.0.0.0/8\", \"::1\"), not %s%.100s%s", i + 1,
                         lua_type(L, -1) == LUA_TSTRING ? "\"" : "a ",
                         lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, -1),
                         lua_type(L, -1) == LUA_TSTRING ? "\"" : "");
            rc = -1;
        }
        lua_pop(L, 1);
    }
    config->trusted_proxy_count = rc == 0 ? count : 0;
    lua_pop(L, 1);
    return rc;
}

/* The libraries a config may use: Lua's standard ones and bit. Not jit,
 * with which a script could switch the compiler back on (and compiled code
 * never calls the hook that enforces route's time limit, route.c), nor ffi,
 * nor debug.sethook, which could remove that hook, nor package.loadlib,
 * which could load either from a shared library. Runs in lua_cpcall. */
static int open_libraries(lua_State *L)
{
    static const luaL_Reg libraries[] = {
        { "", luaopen_base },
        { LUA_LOADLIBNAME, luaopen_package },
        { LUA_TABLIBNAME, luaopen_table },
        { LUA_IOLIBNAME, luaopen_io },
        { LUA_OSLIBNAME, luaopen_os },
        { LUA_STRLIBNAME, luaopen_string },
        { LUA_MATHLIBNAME, luaopen_math },
        { LUA_DBLIBNAME, luaopen_debug },
        { LUA_BITLIBNAME, luaopen_bit },
    };

    for (size_t i = 0; i < sizeof libraries / sizeof libraries[0]; i++) {
        lua_pushcfunction(L, libraries[i].func);
        lua_pushstring(L, libraries[i].name);
        lua_call(L, 1, 0);
    }
    lua_getfield(L, LUA_GLOBALSINDEX, LUA_DBLIBNAME);
    lua_pushnil(L);
    lua_setfield(L, -2, "sethook");
    lua_getfield(L, LUA_GLOBALSINDEX, LUA_LOADLIBNAME);
    lua_pushnil(L);
    lua_setfield(L, -2, "loadlib");
    return 0;
}

/* Loads and runs the script, text (the contents of path). On failure,
 * prints Lua's message, which names path as luaL_loadfile would. */
static int run_script(lua_State *L, const char *path, const char *text, size_t length)
{
    char chunkname[512];

    snprintf(chunkname, sizeof chunkname, "@%s", path);
    /* As luaL_loadfile does, a first line starting with '#' (#!/usr/bin/env ...)
     * is not Lua; its newline stays, so that line numbers do not move. */
    if (length > 0 && text[0] == '#') {
        const char *newline = memchr(text, '\n', length);
        size_t skip = newline != NULL ? (size_t)(newline - text) : length;

        text += skip;
        length -= skip;
    }
    if (luaL_loadbuffer(L, text, length, chunkname) != 0 || lua_pcall(L, 0, 0, 0) != 0) {
        const char *message = lua_tostring(L, -1);
        config_error(path, "%s", message != NULL ? message : "error object is not a string");
        lua_pop(L, 1);
        return -1;
    }
    return 0;
}

/* The edit distance between a and b (insertions, deletions and
 * substitutions), or 3 if it is more than 2: close is all we ask. */
static int edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    int row[32], prev_diagonal;

    if (la >= 32 || lb >= 32 || (la > lb ? la - lb : lb - la) > 2)
        return 3;
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        prev_diagonal = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int above = row[j];
            int best = prev_diagonal + (a[i - 1] != b[j - 1]);
            if (above + 1 < best)
                best = above + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            prev_diagonal = above;
        }
    }
    return row[lb] > 2 ? 3 : row[lb];
}

/* A script may set globals of its own (helpers, tables it shares between
 * sites), so a global rsp does not read is no error. But one that is a
 * letter or two away from a setting ("balence", "Listen") is most likely a
 * typo whose setting silently keeps its default: say so. */
static void config_warn_strays(lua_State *L, const char *path)
{
    for (lua_pushnil(L); lua_next(L, LUA_GLOBALSINDEX) != 0; lua_pop(L, 1)) {
        const char *name;
        bool known = false;

        if (lua_type(L, -2) != LUA_TSTRING)
            continue;
        name = lua_tostring(L, -2);
        for (size_t i = 0; i < config_setting_count && !known; i++)
            known = strcmp(name, config_settings[i].name) == 0;
        for (size_t i = 0; i < config_setting_count && !known; i++) {
            if (edit_distance(name, config_settings[i].name) <= 2 && strlen(name) > 3) {
                config_error(path, "warning: '%s' is not a setting; did you mean '%s'?", name,
                             config_settings[i].name);
                break;
            }
        }
    }
}

/* route = function (req) ... end (route_time_limit is the table's). Sets
 * *has_route. */
static int read_route(lua_State *L, const char *path, bool *has_route)
{
    int type;

    config_global(L, "route");
    type = lua_type(L, -1);
    lua_pop(L, 1);
    *has_route = type == LUA_TFUNCTION;
    if (type != LUA_TNIL && type != LUA_TFUNCTION) {
        config_error(path, "setting 'route' must be a function, like function route(req) ... end, "
                           "not a %s", lua_typename(L, type));
        return -1;
    }
    return 0;
}

/* What the table's readers cannot see, one value at a time: the parser's
 * limits against each other, and a user that must exist. */
static int check_settings(const char *path, const struct config *config)
{
    const struct http_limits *limits = &config->limits;

    if (limits->max_head < limits->max_line) {
        config_error(path, "setting 'max_request_head' (%g) must be at least 'max_request_line' (%g)",
                     (double)limits->max_head, (double)limits->max_line);
        return -1;
    }
    if (config->operations.user != NULL && getpwnam(config->operations.user) == NULL) {
        config_error(path, "setting 'user': there is no user \"%.100s\" on this system",
                     config->operations.user);
        return -1;
    }
    return 0;
}

int config_load(const char *path, struct config *config)
{
    char *text;
    size_t length;
    int rc;

    memset(config, 0, sizeof *config);
    if (config_read_file(path, &text, &length) == -1)
        return -1;
    rc = config_load_text(path, text, length, config);
    free(text);
    return rc;
}

int config_load_text(const char *path, const char *text, size_t length, struct config *config)
{
    lua_State *L = luaL_newstate();
    bool has_route = false;
    int rc = -1;

    memset(config, 0, sizeof *config);
    config->default_pool.root_fd = -1; /* a pool of backends, until `root` says otherwise */
    config_settings_defaults(config);
    if (L == NULL) {
        config_error(path, "cannot create a Lua state (out of memory)");
        return -1;
    }
    /* Interpreted from the start: a route function must never be compiled
     * (route.c says why), nor anything it calls. */
    luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
    if (lua_cpcall(L, open_libraries, NULL) != 0) {
        config_error(path, "cannot open the Lua libraries (out of memory)");
        lua_close(L);
        return -1;
    }

    if (run_script(L, path, text, length) == 0 &&
        read_listen(L, path, config) == 0 && read_trusted_proxies(L, path, config) == 0 &&
        config_read_settings(L, path, config) == 0 &&
        check_settings(path, config) == 0 &&
        config_read_health(L, path, LUA_GLOBALSINDEX, "health_check", &config_health_defaults,
                           &config->health) == 0 &&
        config_read_access(L, path, LUA_GLOBALSINDEX, "", true, &config->access) == 0 &&
        config_read_default_site(L, path, config) == 0 &&
        config_read_pools(L, path, config) == 0 &&
        config_read_sites(L, path, config) == 0 && config_check_fastcgi_backends(path, config) == 0 &&
        config_read_scaling(L, path, config) == 0 && config_read_tls(L, path, config) == 0 &&
        read_route(L, path, &has_route) == 0) {
        if (config->router.fallback == NULL && config->router.count == 0 && !has_route)
            config_error(path, "setting 'backends' (or 'root') is missing (and there are no 'sites' "
                               "and no 'route')");
        else
            rc = 0;
    }
    if (rc == 0) {
        config_warn_strays(L, path);
        router_count_sites(&config->router);
        /* Files and error pages get their Content-Type from it: read with
         * the generation, so a reload sees an edited /etc/mime.types. */
        config->mime = mime_table_load(NULL);
        if (config->mime == NULL) {
            config_error(path, "out of memory reading /etc/mime.types");
            rc = -1;
        }
    }

    if (rc == 0 && has_route) {
        /* The Lua state lives on, for route; config_free closes it. */
        if (route_hook_init(&config->route, L, config->pools, config->pool_count,
                            config->route_time_limit) == -1) {
            config_error(path, "out of memory setting up 'route'");
            rc = -1;
        }
    } else {
        lua_close(L);
    }
    if (rc == -1)
        config_free(config);
    return rc;
}

struct pool *config_pool_at(struct config *config, size_t i)
{
    if (i == 0 && config->router.fallback != NULL)
        return &config->default_pool;
    if (config->router.fallback != NULL)
        i--;
    if (i < config->pool_count)
        return &config->pools[i].pool;
    i -= config->pool_count;
    for (size_t j = 0; j < config->router.count; j++) {
        struct site *site = &config->router.sites[j];
        if (site->pool == &site->own && i-- == 0)
            return &site->own;
        if (site->pool == &site->own && site->own.fastcgi != NULL && i-- == 0)
            return &site->own.fastcgi->pool;
    }
    return NULL;
}

void config_free(struct config *config)
{
    route_hook_free(&config->route);
    free(config->listen_host);
    config->listen_host = NULL;
    free(config->trusted_proxies);
    config->trusted_proxies = NULL;
    config->trusted_proxy_count = 0;
    free(config->scaling.status_host);
    config->scaling.status_host = NULL;
    config_free_tls(&config->tls);
    free(config->operations.access_log);
    access_log_release(config->operations.log);
    config->operations.log = NULL;
    free(config->operations.user);
    free(config->operations.pid_file);
    free(config->buffering.temp_dir);
    config->operations.access_log = config->operations.user = config->operations.pid_file = NULL;
    site_output_free(&config->output);
    access_settings_free(&config->access);
    mime_table_free(config->mime);
    config->mime = NULL;
    pool_free(&config->default_pool);
    site_output_free(&config->default_pool.output);
    for (size_t i = 0; i < config->pool_count; i++) {
        free(config->pools[i].name);
        pool_free(&config->pools[i].pool);
        site_output_free(&config->pools[i].pool.output);
        access_settings_free(&config->pools[i].pool.access);
    }
    free(config->pools);
    config->pools = NULL;
    config->pool_count = 0;
    for (size_t i = 0; i < config->router.count; i++) {
        struct site *site = &config->router.sites[i];

        free(site->name);
        pool_free(&site->own);
        site_output_free(&site->own.output);
        site_output_free(&site->output);
        access_settings_free(&site->access);
        access_settings_free(&site->own.access);
        for (size_t j = 0; j < site->alias_count; j++)
            free(site->aliases[j]);
        free(site->aliases);
        free(site->access_log);
        access_log_release(site->log);
    }
    free(config->router.sites);
    config->router.sites = NULL;
    config->router.count = 0;
    config->router.fallback = NULL;
}

struct config *config_open(const char *path)
{
    char *text;
    size_t length;
    struct config *c;

    if (config_read_file(path, &text, &length) == -1)
        return NULL;
    c = config_open_text(path, text, length);
    free(text);
    return c;
}

struct config *config_open_text(const char *path, const char *text, size_t length)
{
    struct config *c = malloc(sizeof *c);

    if (c == NULL) {
        config_error(path, "out of memory");
        return NULL;
    }
    if (config_load_text(path, text, length, c) == -1) {
        free(c);
        return NULL;
    }
    c->refs = 1;
    return c;
}

struct config *config_hold(struct config *c)
{
    c->refs++;
    return c;
}

void config_release(struct config *c)
{
    if (--c->refs > 0)
        return;
    config_free(c);
    free(c);
}
