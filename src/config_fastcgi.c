/* config_fastcgi.c -- a site's `fastcgi` (chapter 23): the backends its
 * scripts run on, and what runs.
 *
 *   sites = { ["blog.example.org"] = { root = "/srv/blog", fastcgi = {
 *       backends = { "127.0.0.1:9000" },  -- balance as any pool's
 *       index = "index.php",              -- a directory's script, and the front controller
 *       extensions = { ".php" },          -- what runs
 *       params = { APP_ENV = "prod" },    -- extra FastCGI params
 *       keep_conn = false,                -- true: connections kept and reused
 *   } } }
 *
 * It needs the site's `root`: the scripts are files beneath it. Its
 * health_check (or the top level's) asks each backend for its path in
 * FastCGI records (php-fpm answers its ping.path with "pong"; a 404 for a
 * script it has not got still shows it up). */
#include "config.h"

#include "backend_protocol.h"
#include "config_read.h"
#include "fastcgi_script.h"

#include "router.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>

/* A copy of the string on top of the stack, or NULL (out of memory). */
static char *copy_top(lua_State *L)
{
    size_t n;
    const char *s = lua_tolstring(L, -1, &n);
    char *c = malloc(n + 1);

    if (c != NULL)
        memcpy(c, s, n + 1);
    return c;
}

/* True if the string on top of the stack is a file name: not empty, no
 * '/', no NUL, not starting with '.'. */
static bool is_file_name(lua_State *L)
{
    size_t n;
    const char *s = lua_tolstring(L, -1, &n);

    return n > 0 && n < 256 && strlen(s) == n && s[0] != '.' && strchr(s, '/') == NULL;
}

/* `index` (default "index.php"). */
static int read_index(lua_State *L, const char *path, const char *setting, struct fastcgi_settings *s)
{
    int rc = 0;

    config_field(L, -1, "index");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushliteral(L, "index.php");
    }
    if (lua_type(L, -1) != LUA_TSTRING || !is_file_name(L)) {
        config_error(path, "setting '%s.index' must be a file name like \"index.php\" (no '/', not "
                           "hidden)", setting);
        rc = -1;
    } else if ((s->index = copy_top(L)) == NULL) {
        config_error(path, "out of memory");
        rc = -1;
    }
    lua_pop(L, 1);
    return rc;
}

/* `extensions` (default { ".php" }): each a '.' then a name. */
static int read_extensions(lua_State *L, const char *path, const char *setting, struct fastcgi_settings *s)
{
    char name[360];
    int rc = 0;

    snprintf(name, sizeof name, "%s.extensions", setting);
    config_field(L, -1, "extensions");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_createtable(L, 1, 0);
        lua_pushliteral(L, ".php");
        lua_rawseti(L, -2, 1);
    }
    if (lua_type(L, -1) != LUA_TTABLE || lua_objlen(L, -1) == 0) {
        config_error(path, "setting '%s' must be a list of extensions like { \".php\" }", name);
        lua_pop(L, 1);
        return -1;
    }
    if (config_check_list(L, path, name) == -1) {
        lua_pop(L, 1);
        return -1;
    }
    size_t count = lua_objlen(L, -1);
    s->extensions = calloc(count, sizeof *s->extensions);
    if (s->extensions == NULL) {
        config_error(path, "out of memory");
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < count; i++) {
        lua_rawgeti(L, -1, (int)i + 1);
        size_t n = 0;
        const char *e = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
        if (e == NULL || n < 2 || n > 32 || strlen(e) != n || e[0] != '.' || strchr(e + 1, '/') != NULL ||
            strchr(e + 1, '.') != NULL) {
            config_error(path, "setting '%s'[%zu] must be an extension like \".php\"", name, i + 1);
            rc = -1;
        } else if ((s->extensions[i] = copy_top(L)) == NULL) {
            config_error(path, "out of memory");
            rc = -1;
        } else {
            s->extension_count++;
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return rc;
}

/* True if the key on the stack at -2 is a param name: [A-Z0-9_]+. */
static bool is_param_name(lua_State *L)
{
    size_t n;
    const char *s;

    if (lua_type(L, -2) != LUA_TSTRING)
        return false;
    s = lua_tolstring(L, -2, &n);
    if (n == 0 || n > 128 || strlen(s) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return false;
    return true;
}

/* `params` (optional): NAME = "value". */
static int read_params(lua_State *L, const char *path, const char *setting, struct fastcgi_settings *s)
{
    int rc = 0;
    size_t count = 0;

    config_field(L, -1, "params");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return 0;
    }
    if (lua_type(L, -1) != LUA_TTABLE) {
        config_error(path, "setting '%s.params' must be a table of NAME = \"value\", not a %s", setting,
                     luaL_typename(L, -1));
        lua_pop(L, 1);
        return -1;
    }
    for (lua_pushnil(L); lua_next(L, -2) != 0; lua_pop(L, 1))
        count++;
    s->params = calloc(2 * count + 1, sizeof *s->params);
    if (s->params == NULL) {
        config_error(path, "out of memory");
        lua_pop(L, 1);
        return -1;
    }
    for (lua_pushnil(L); rc == 0 && lua_next(L, -2) != 0; lua_pop(L, 1)) {
        size_t n = 0;
        if (!is_param_name(L)) {
            config_error(path, "setting '%s.params': every name must be letters A-Z, digits or '_' "
                               "(like APP_ENV)", setting);
            rc = -1;
        } else if (lua_type(L, -1) != LUA_TSTRING || (lua_tolstring(L, -1, &n), strlen(lua_tostring(L, -1)) != n)) {
            config_error(path, "setting '%s.params.%s' must be a string", setting, lua_tostring(L, -2));
            rc = -1;
        } else {
            char *value = copy_top(L);
            lua_pushvalue(L, -2);
            char *name = copy_top(L);
            lua_pop(L, 1);
            s->params[2 * s->param_count] = name;
            s->params[2 * s->param_count + 1] = value;
            if (name == NULL || value == NULL) {
                config_error(path, "out of memory");
                rc = -1;
            }
            s->param_count++;
        }
    }
    if (rc == -1)
        lua_pop(L, 1); /* the key lua_next would have taken */
    lua_pop(L, 1);
    return rc;
}

/* `keep_conn` (default false). A php-fpm worker serves one connection
 * until it closes: every connection kept open holds one, and requests
 * beyond the pool's workers would wait for ever behind idle ones. So
 * only when asked. */
static int read_keep_conn(lua_State *L, const char *path, const char *setting, struct fastcgi_settings *s)
{
    int rc = 0;

    config_field(L, -1, "keep_conn");
    if (lua_type(L, -1) == LUA_TBOOLEAN) {
        s->keep_conn = lua_toboolean(L, -1);
    } else if (!lua_isnil(L, -1)) {
        config_error(path, "setting '%s.keep_conn' must be true or false, not a %s", setting,
                     luaL_typename(L, -1));
        rc = -1;
    }
    lua_pop(L, 1);
    return rc;
}

int config_read_fastcgi(lua_State *L, const char *path, const char *setting, const struct config *config,
                        struct pool *pool)
{
    static const char *const fields[] = { "backends", "balance", "hash_key", "health_check", "index",
                                          "extensions", "params", "keep_conn", NULL };
    char name[340];
    int rc = -1;

    config_field(L, -1, "fastcgi");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return 0;
    }
    snprintf(name, sizeof name, "%s.fastcgi", setting);
    if (lua_type(L, -1) != LUA_TTABLE) {
        config_error(path, "setting '%s' must be a table like { backends = { \"127.0.0.1:9000\" } }, not a %s",
                     name, luaL_typename(L, -1));
    } else if (pool == NULL || pool->root == NULL) {
        config_error(path, "setting '%s' needs the site's own root (the directory of its scripts)", name);
    } else if (config_check_fields(L, path, name, fields) == 0) {
        pool->fastcgi = calloc(1, sizeof *pool->fastcgi);
        if (pool->fastcgi == NULL) {
            config_error(path, "out of memory");
        } else {
            struct fastcgi_pool *f = pool->fastcgi;
            f->pool.root_fd = -1;
            f->pool.down_time = config->default_pool.down_time;
            rc = config_read_pool_table(L, path, name, config, &f->pool);
            f->pool.protocol = &backend_fastcgi;
            f->pool.health.fastcgi = true;
            if (rc == 0)
                rc = read_index(L, path, name, &f->settings);
            if (rc == 0)
                rc = read_extensions(L, path, name, &f->settings);
            if (rc == 0)
                rc = read_params(L, path, name, &f->settings);
            if (rc == 0)
                rc = read_keep_conn(L, path, name, &f->settings);
        }
    }
    lua_pop(L, 1);
    return rc;
}

/* The site whose fastcgi pool is `pool`, or NULL. */
static const struct site *fastcgi_site(const struct config *config, const struct pool *pool)
{
    for (size_t i = 0; i < config->router.count; i++)
        if (config->router.sites[i].own.fastcgi != NULL && &config->router.sites[i].own.fastcgi->pool == pool)
            return &config->router.sites[i];
    return NULL;
}

int config_check_fastcgi_backends(const char *path, struct config *config)
{
    const struct pool *a, *b;

    for (size_t i = 0; (a = config_pool_at(config, i)) != NULL; i++) {
        if (a->protocol != &backend_fastcgi)
            continue;
        for (size_t j = 0; (b = config_pool_at(config, j)) != NULL; j++) {
            if (b->protocol == &backend_fastcgi)
                continue;
            for (size_t k = 0; k < a->count; k++)
                for (size_t m = 0; m < b->count; m++)
                    if (a->backends[k] == b->backends[m]) {
                        const struct site *site = fastcgi_site(config, a);
                        config_error(path, "setting 'sites[\"%s%.100s\"].fastcgi.backends'[%zu]: %s is also an "
                                           "HTTP backend of another pool; a backend speaks one protocol",
                                     site != NULL && site->wildcard ? "*" : "", site != NULL ? site->name : "?",
                                     k + 1, a->backends[k]->name);
                        return -1;
                    }
        }
    }
    return 0;
}

void fastcgi_pool_free(struct fastcgi_pool *f)
{
    if (f == NULL)
        return;
    pool_free(&f->pool);
    free(f->settings.index);
    for (size_t i = 0; i < f->settings.extension_count; i++)
        free(f->settings.extensions[i]);
    free(f->settings.extensions);
    for (size_t i = 0; i < 2 * f->settings.param_count; i++)
        free(f->settings.params[i]);
    free(f->settings.params);
    free(f->settings.seen);
    free(f);
}
