/* config_pools.c -- the backends settings: the default site, named pools
 * and sites. Each of them is a pool: a list of "HOST:PORT" (or
 * "unix:/PATH") backends and a balance rule. */
#include "config.h"

#include "backend_protocol.h"
#include "config_read.h"
#include "http.h"
#include "net.h"

#include <errno.h>
#include <lauxlib.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Entry `index` of a backends list that begins "unix:": its address, a
 * Unix domain socket at the absolute path after it, into *addresses. The
 * socket file is the backend's: rsp neither makes nor removes it. */
static int read_unix_backend(const char *path, const char *setting, int index, const char *text,
                             struct addrinfo **addresses)
{
    const char *socket_path = text + strlen("unix:");
    char why[64] = "";

    if (socket_path[0] == '\0')
        snprintf(why, sizeof why, "the path is empty");
    else if (socket_path[0] != '/')
        snprintf(why, sizeof why, "the path is not absolute");
    else if (strlen(socket_path) > NET_UNIX_PATH_MAX)
        snprintf(why, sizeof why, "the path is longer than %zu bytes", NET_UNIX_PATH_MAX);
    if (why[0] != '\0') {
        config_error(path, "setting '%s', entry %d: \"%.100s\" must be HOST:PORT or "
                           "unix:/ABSOLUTE/PATH: %s", setting, index, text, why);
        return -1;
    }
    *addresses = net_unix_address(socket_path);
    if (*addresses == NULL) {
        config_error(path, "out of memory");
        return -1;
    }
    return 0;
}

/* Resolves entry `index` (1-based) of a backends list, "HOST:PORT" or
 * "unix:/PATH" (the name it keeps everywhere is the text as written).
 * `setting` names the list in messages. */
static int read_backend(const char *path, const char *setting, int index, const char *text,
                        struct backend **b)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    struct addrinfo *addresses;
    char host[256], port_text[6];
    const char *port;
    int rc;

    if (strncmp(text, "unix:", strlen("unix:")) == 0) {
        if (read_unix_backend(path, setting, index, text, &addresses) == -1)
            return -1;
        goto obtain;
    }
    if (config_split_host_port(text, host, sizeof host, &port) == -1) {
        config_error(path, "setting '%s', entry %d: \"%.100s\" must look like HOST:PORT "
                           "(IPv6 as [ADDRESS]:PORT) or unix:/ABSOLUTE/PATH", setting, index, text);
        return -1;
    }
    if (net_parse_port(port) == -1) {
        config_error(path, "setting '%s', entry %d: the port in \"%.100s\" must be from 1 to 65535",
                     setting, index, text);
        return -1;
    }
    snprintf(port_text, sizeof port_text, "%d", net_parse_port(port));
    rc = getaddrinfo(host, port_text, &hints, &addresses);
    if (rc != 0) {
        config_error(path, "setting '%s', entry %d: cannot resolve \"%s\": %s", setting, index, host,
                     rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        return -1;
    }
obtain:
    /* The same backend as in the running generation, if it is there. */
    *b = backend_obtain(text, addresses);
    if (*b == NULL) {
        config_error(path, "out of memory");
        return -1;
    }
    return 0;
}

/* Reads the list of "HOST:PORT" strings on top of the stack into pool,
 * whose backends speak HTTP/1.1. */
static int read_backend_list(lua_State *L, const char *path, const char *setting, struct pool *pool)
{
    size_t count;

    pool->protocol = &backend_http1;

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
                if (strcmp(pool->backends[j]->name, text) == 0) {
                    config_error(path, "setting '%s', entry %d: \"%.100s\" is listed twice",
                                 setting, index, text);
                    rc = -1;
                }
            }
            if (rc == 0) {
                rc = read_backend(path, setting, index, text, &pool->backends[i]);
                if (rc == 0)
                    pool->count = i + 1; /* pool_free releases what is counted */
            }
        }
        lua_pop(L, 1);
        if (rc == -1)
            return -1;
    }
    return 0;
}

/* True if text is a token (RFC 9110): what a header's or cookie's name is. */
static bool is_token(const char *text)
{
    if (*text == '\0')
        return false;
    for (; *text != '\0'; text++)
        if (!http_is_token_char((unsigned char)*text))
            return false;
    return true;
}

/* Reads `hash_key` of the table at t into pool, whose balance is read:
 * "client" (the default), "path", "header:NAME" or "cookie:NAME". Set with
 * any other balance, it is an error: it would do nothing. `setting` names
 * hash_key in messages, `balance` the balance setting. */
static int read_hash_key(lua_State *L, const char *path, int t, const char *setting,
                         const char *balance, struct pool *pool)
{
    const char *text, *name = "";
    int rc = 0;

    config_field(L, t, "hash_key");
    text = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    pool->hash_key = HASH_KEY_CLIENT;
    if (lua_isnil(L, -1)) {
        text = "client";
    } else if (text == NULL || strlen(text) != lua_objlen(L, -1)) {
        rc = -1;
    } else if (strcmp(text, "path") == 0) {
        pool->hash_key = HASH_KEY_PATH;
    } else if (strncmp(text, "header:", 7) == 0) {
        pool->hash_key = HASH_KEY_HEADER;
        name = text + 7;
    } else if (strncmp(text, "cookie:", 7) == 0) {
        pool->hash_key = HASH_KEY_COOKIE;
        name = text + 7;
    } else if (strcmp(text, "client") != 0) {
        rc = -1;
    }
    if (rc == 0 && pool->hash_key >= HASH_KEY_HEADER &&
        (!is_token(name) || strlen(name) > HASH_KEY_NAME_MAX))
        rc = -1;
    if (rc == -1) {
        config_error(path, "setting '%s' must be \"client\", \"path\", \"header:NAME\" or "
                           "\"cookie:NAME\" (NAME a header's or cookie's name, at most %d "
                           "characters), not %s%.100s%s", setting, HASH_KEY_NAME_MAX,
                     text != NULL ? "\"" : "a ", text != NULL ? text : luaL_typename(L, -1),
                     text != NULL ? "\"" : "");
    } else if (!lua_isnil(L, -1) && pool->balance != BALANCE_HASH) {
        config_error(path, "setting '%s' needs '%s' = \"hash\" (it is \"%s\")", setting, balance,
                     pool_balance_name(pool));
        rc = -1;
    } else {
        snprintf(pool->hash_text, sizeof pool->hash_text, "%s", text);
        for (size_t i = 0; name[i] != '\0'; i++) /* a header's name compares ignoring case */
            pool->hash_name[i] = pool->hash_key == HASH_KEY_HEADER && name[i] >= 'A' && name[i] <= 'Z'
                                 ? (char)(name[i] - 'A' + 'a') : name[i];
        pool->hash_name[strlen(name)] = '\0';
    }
    lua_pop(L, 1);
    return rc;
}

/* Reads `balance` of the table at t into pool (optional: round_robin),
 * and with it `hash_key`. */
static int read_balance(lua_State *L, const char *path, int t, const char *setting, struct pool *pool)
{
    char hash_key[320];
    int rc = 0;

    config_field(L, t, "balance");
    pool->balance = BALANCE_ROUND_ROBIN;
    if (lua_type(L, -1) == LUA_TSTRING) {
        const char *text = lua_tostring(L, -1);
        if (strcmp(text, "least_conn") == 0) {
            pool->balance = BALANCE_LEAST_CONN;
        } else if (strcmp(text, "hash") == 0) {
            pool->balance = BALANCE_HASH;
        } else if (strcmp(text, "round_robin") != 0) {
            config_error(path, "setting '%s' must be \"round_robin\", \"least_conn\" or \"hash\", "
                               "not \"%.100s\"", setting, text);
            rc = -1;
        }
    } else if (!lua_isnil(L, -1)) {
        config_error(path, "setting '%s' must be \"round_robin\", \"least_conn\" or \"hash\", not a %s",
                     setting, luaL_typename(L, -1));
        rc = -1;
    }
    lua_pop(L, 1);
    /* "pools.app.balance" -> "pools.app.hash_key" */
    snprintf(hash_key, sizeof hash_key, "%.*shash_key", (int)(strlen(setting) - strlen("balance")),
             setting);
    return rc == 0 ? read_hash_key(L, path, t, hash_key, setting, pool) : rc;
}

/* A top-level balance or hash_key applies to the top-level backends
 * only: set without them, it would be ignored, and a reader would think
 * it applies to the sites. An error instead. */
static int balance_without_backends(lua_State *L, const char *path)
{
    static const char *const names[] = { "balance", "hash_key" };
    int rc = 0;

    for (size_t i = 0; i < 2 && rc == 0; i++) {
        config_global(L, names[i]);
        if (!lua_isnil(L, -1)) {
            config_error(path, "setting '%s' applies to the top-level 'backends', and there are none "
                               "(a site's or a pool's goes in its own table)", names[i]);
            rc = -1;
        }
        lua_pop(L, 1);
    }
    return rc;
}

/* The default site: `backends` and `balance` globals, or `root`; and the
 * top level's compress, headers and error_pages, which every pool and
 * site starts from. Optional when there are sites. */
int config_read_default_site(lua_State *L, const char *path, struct config *config)
{
    static const struct site_output none;
    struct pool *pool = &config->default_pool;
    int rc = 0;

    if (config_read_output(L, path, LUA_GLOBALSINDEX, "", &none, &config->output) == -1 ||
        config_copy_output(path, &config->output, &pool->output) == -1)
        return -1;
    config_global(L, "backends");
    config_global(L, "root");
    if (!lua_isnil(L, -2) && !lua_isnil(L, -1)) {
        config_error(path, "setting 'root': a pool has backends or root, not both");
        rc = -1;
    } else if (!lua_isnil(L, -1)) {
        rc = config_read_root(L, path, LUA_GLOBALSINDEX, "root", pool);
        pool->health = config->health;
        config->router.fallback = rc == 0 ? pool : NULL;
    }
    lua_pop(L, 1);
    if (rc == 0 && !lua_isnil(L, -1)) {
        rc = read_backend_list(L, path, "backends", pool);
        pool->health = config->health;
        if (rc == 0)
            rc = read_balance(L, path, LUA_GLOBALSINDEX, "balance", pool);
        config->router.fallback = rc == 0 ? pool : NULL;
    } else if (rc == 0) {
        rc = balance_without_backends(L, path);
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

/* Reads { backends = {...}, balance = "...", health_check = ... } or
 * { root = "/srv/www" }, the table on top of the stack, into pool.
 * `setting` names the table in messages: "pools.app",
 * "sites[\"www.example.com\"]". */
static int read_pool_table(lua_State *L, const char *path, const char *setting,
                           const struct config *config, struct pool *pool)
{
    char name[300];
    int rc;

    snprintf(name, sizeof name, "%s.backends", setting);
    config_field(L, -1, "backends");
    config_field(L, -2, "root");
    if (!lua_isnil(L, -2) && !lua_isnil(L, -1)) {
        config_error(path, "setting '%s': a pool has backends or root, not both", setting);
        rc = -1;
    } else if (!lua_isnil(L, -1)) {
        snprintf(name, sizeof name, "%s.root", setting);
        rc = config_read_root(L, path, -3, name, pool);
    } else if (lua_isnil(L, -2)) {
        config_error(path, "setting '%s' is missing (a pool has backends or root)", name);
        rc = -1;
    } else {
        lua_pop(L, 1);
        rc = read_backend_list(L, path, name, pool);
        lua_pushnil(L); /* in root's place */
    }
    lua_pop(L, 2);
    if (rc == 0) {
        snprintf(name, sizeof name, "%s.balance", setting);
        rc = read_balance(L, path, -1, name, pool);
    }
    if (rc == 0) {
        snprintf(name, sizeof name, "%s.health_check", setting);
        rc = config_read_health(L, path, -1, name, &config->health, &pool->health);
    }
    return rc;
}

/* A pool name: 1 to 64 letters, digits, '_', '-' or '.', so that it reads
 * well in a log line and in a Lua script. */
static bool is_pool_name(const char *text, size_t length)
{
    if (length == 0 || length > 64 || strlen(text) != length)
        return false;
    for (size_t i = 0; i < length; i++) {
        char c = text[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return false;
    }
    return true;
}

static int compare_pools(const void *a, const void *b)
{
    return strcmp(((const struct named_pool *)a)->name, ((const struct named_pool *)b)->name);
}

/* Counts the entries of the table on top of the stack and allocates that
 * many elements of size bytes (at least one). */
static void *allocate_entries(lua_State *L, size_t size)
{
    size_t count = 0;

    for (lua_pushnil(L); lua_next(L, -2) != 0; lua_pop(L, 1))
        count++;
    return calloc(count ? count : 1, size);
}

int config_read_pools(lua_State *L, const char *path, struct config *config)
{
    int rc = 0;

    config_global(L, "pools");
    if (lua_isnil(L, -1))
        goto out;
    if (lua_type(L, -1) != LUA_TTABLE) {
        config_error(path, "setting 'pools' must be a table of NAME = { backends = {...} }, not a %s",
                     luaL_typename(L, -1));
        rc = -1;
        goto out;
    }
    config->pools = allocate_entries(L, sizeof *config->pools);
    if (config->pools == NULL) {
        config_error(path, "out of memory");
        rc = -1;
        goto out;
    }
    for (lua_pushnil(L); rc == 0 && lua_next(L, -2) != 0; lua_pop(L, 1)) {
        struct named_pool *named = &config->pools[config->pool_count];
        char setting[100];
        const char *key;

        if (lua_type(L, -2) != LUA_TSTRING) {
            config_error(path, "setting 'pools': every key must be a pool name, not a %s",
                         luaL_typename(L, -2));
            rc = -1;
            continue;
        }
        key = lua_tostring(L, -2);
        if (!is_pool_name(key, lua_objlen(L, -2))) {
            config_error(path, "setting 'pools': \"%.100s\" is not a pool name "
                               "(1 to 64 letters, digits, '_', '-' or '.')", key);
            rc = -1;
            continue;
        }
        if ((named->name = strdup(key)) == NULL) {
            config_error(path, "out of memory");
            rc = -1;
            continue;
        }
        config->pool_count++; /* so that config_free releases it */
        named->pool.root_fd = -1;
        named->pool.down_time = config->default_pool.down_time;
        snprintf(setting, sizeof setting, "pools.%s", key);
        if (lua_type(L, -1) != LUA_TTABLE) {
            config_error(path, "setting '%s' must be a table like { backends = {...} }, not a %s",
                         setting, luaL_typename(L, -1));
            rc = -1;
            continue;
        }
        static const char *const fields[] = { "backends", "balance", "hash_key", "health_check", "root",
                                              "compress", "headers", "error_pages", "limit_req", "allow",
                                              "deny", "basic_auth", "max_body_size", NULL };
        rc = read_pool_table(L, path, setting, config, &named->pool);
        if (rc == 0) {
            char prefix[110];
            snprintf(prefix, sizeof prefix, "%s.", setting);
            rc = config_read_output(L, path, -1, prefix, &config->output, &named->pool.output);
            if (rc == 0)
                rc = config_read_access(L, path, -1, prefix, false, &named->pool.access);
        }
        if (rc == 0) /* after the checks above, which explain a bare list better */
            rc = config_check_fields(L, path, setting, fields);
    }
    if (rc == -1)
        lua_pop(L, 1); /* the key lua_next would have taken */
    else /* sorted: the startup log lists them in a stable order */
        qsort(config->pools, config->pool_count, sizeof *config->pools, compare_pools);
out:
    lua_pop(L, 1);
    return rc;
}

/* The pool named name, or NULL. */
static struct pool *find_pool(struct config *config, const char *name)
{
    for (size_t i = 0; i < config->pool_count; i++)
        if (strcmp(config->pools[i].name, name) == 0)
            return &config->pools[i].pool;
    return NULL;
}

/* The backends of the site whose table is on top of the stack: either
 * pool = "NAME", one of the named pools, or its own backends and balance.
 * `setting` names the site in messages. */
static int read_site_pool(lua_State *L, const char *path, const char *setting, struct config *config,
                          struct site *site)
{
    static const char *const fields[] = { "backends", "balance", "pool", "health_check", "aliases",
                                          "access_log", "access_log_format", "root", "compress", "hash_key",
                                          "headers", "error_pages", "limit_req", "allow", "deny",
                                          "basic_auth", "max_body_size", "fastcgi", NULL };
    int rc = 0;

    config_field(L, -1, "pool");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        site->own.down_time = config->default_pool.down_time;
        site->pool = &site->own;
        rc = read_pool_table(L, path, setting, config, &site->own);
        if (rc == 0)
            rc = config_read_fastcgi(L, path, setting, config, &site->own);
        /* after the checks above, which explain a bare list better */
        return rc == 0 ? config_check_fields(L, path, setting, fields) : rc;
    }
    if (lua_type(L, -1) != LUA_TSTRING) {
        config_error(path, "setting '%s.pool' must be the name of a pool, not a %s", setting,
                     luaL_typename(L, -1));
        rc = -1;
    } else if ((site->pool = find_pool(config, lua_tostring(L, -1))) == NULL) {
        config_error(path, "setting '%s.pool': there is no pool \"%.100s\" in 'pools'", setting,
                     lua_tostring(L, -1));
        rc = -1;
    } else {
        config_field(L, -2, "backends");
        config_field(L, -3, "balance");
        config_field(L, -4, "health_check");
        config_field(L, -5, "root");
        config_field(L, -6, "hash_key");
        if (!lua_isnil(L, -5) || !lua_isnil(L, -4) || !lua_isnil(L, -3) || !lua_isnil(L, -2) ||
            !lua_isnil(L, -1)) {
            config_error(path, "setting '%s' names a pool and its own %s: choose one", setting,
                         !lua_isnil(L, -5) ? "backends" : !lua_isnil(L, -4) ? "balance"
                         : !lua_isnil(L, -3) ? "health_check (set it on the pool)"
                         : !lua_isnil(L, -2) ? "root" : "hash_key (set it on the pool)");
            rc = -1;
        }
        lua_pop(L, 5);
    }
    lua_pop(L, 1);
    if (rc == 0)
        rc = config_read_fastcgi(L, path, setting, config, NULL);
    return rc == 0 ? config_check_fields(L, path, setting, fields) : rc;
}

/* Which site already answers for name (site_name's form): the site of
 * that name or of that alias, the latter's alias index (1-based) in
 * *alias, 0 for the site's own name. NULL if no site does yet. */
static const struct site *name_owner(const struct router *router, const char *name, size_t *alias)
{
    for (size_t i = 0; i < router->count; i++) {
        const struct site *site = &router->sites[i];

        *alias = 0;
        if (site->name != NULL && strcmp(site->name, name) == 0)
            return site;
        for (size_t j = 0; j < site->alias_count; j++) {
            *alias = j + 1;
            if (strcmp(site->aliases[j], name) == 0)
                return site;
        }
    }
    return NULL;
}

/* aliases = { "www.example.org", "*.example.net", ... } of the site table
 * on top of the stack: more names for site, each one no site has yet.
 * `setting` names the site in messages. */
static int read_aliases(lua_State *L, const char *path, const char *setting, struct router *router,
                        struct site *site)
{
    size_t count, pairs = 0;
    int rc = 0;

    config_field(L, -1, "aliases");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return 0;
    }
    if (lua_type(L, -1) == LUA_TTABLE)
        for (lua_pushnil(L); lua_next(L, -2) != 0; lua_pop(L, 1))
            pairs++;
    count = lua_type(L, -1) == LUA_TTABLE ? lua_objlen(L, -1) : 0;
    if (lua_type(L, -1) != LUA_TTABLE || pairs != count) {
        config_error(path, "setting '%s.aliases' must be a list of host names "
                           "({ \"www.example.org\" }), not a %s", setting,
                     lua_type(L, -1) == LUA_TTABLE ? "table with other keys" : luaL_typename(L, -1));
        lua_pop(L, 1);
        return -1;
    }
    site->aliases = calloc(count ? count : 1, sizeof *site->aliases);
    if (site->aliases == NULL) {
        config_error(path, "out of memory");
        lua_pop(L, 1);
        return -1;
    }
    for (size_t i = 0; i < count && rc == 0; i++) {
        const struct site *owner;
        char name[256];
        size_t alias;
        bool wildcard;

        lua_rawgeti(L, -1, (int)i + 1);
        if (lua_type(L, -1) != LUA_TSTRING ||
            site_name(lua_tostring(L, -1), lua_objlen(L, -1), name, sizeof name, &wildcard) == -1) {
            config_error(path, "setting '%s.aliases[%zu]': %s%.100s%s is not a host name (or \"*.\" and one)",
                         setting, i + 1, lua_type(L, -1) == LUA_TSTRING ? "\"" : "a ",
                         lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, -1),
                         lua_type(L, -1) == LUA_TSTRING ? "\"" : "");
            rc = -1;
        } else if ((owner = name_owner(router, name, &alias)) != NULL) {
            /* One name, one site: its counters, its pool, its certificate. */
            config_error(path, "setting '%s.aliases[%zu]': %s%s is already %sthe site '%s%s'%s",
                         setting, i + 1, wildcard ? "*" : "", name, alias ? "an alias of " : "",
                         owner->wildcard ? "*" : "", owner->name, owner == site ? " itself" : "");
            rc = -1;
        } else if ((site->aliases[i] = strdup(name)) == NULL) {
            config_error(path, "out of memory");
            rc = -1;
        } else {
            site->alias_count++;
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return rc;
}

/* access_log = "PATH" | "stderr" | false and access_log_format of the
 * site table on top of the stack: the site's own log, which replaces the
 * top-level one for its requests. `setting` names the site in messages. */
static int read_site_log(lua_State *L, const char *path, const char *setting, struct site *site)
{
    int rc = 0;

    site->access_log_format = -1;
    config_field(L, -1, "access_log");
    if (lua_type(L, -1) == LUA_TSTRING && lua_objlen(L, -1) > 0 &&
        strlen(lua_tostring(L, -1)) == lua_objlen(L, -1)) {
        if ((site->access_log = strdup(lua_tostring(L, -1))) == NULL) {
            config_error(path, "out of memory");
            rc = -1;
        }
    } else if (lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1)) {
        site->access_log_off = true;
    } else if (!lua_isnil(L, -1)) {
        config_error(path, "setting '%s.access_log' must be a path, \"stderr\" or false, not %s%s", setting,
                     lua_type(L, -1) == LUA_TSTRING || lua_type(L, -1) == LUA_TBOOLEAN ? "" : "a ",
                     lua_type(L, -1) == LUA_TSTRING ? "an empty string (or one with a zero byte)"
                     : lua_type(L, -1) == LUA_TBOOLEAN ? "true" : luaL_typename(L, -1));
        rc = -1;
    }
    lua_pop(L, 1);
    config_field(L, -1, "access_log_format");
    if (rc == 0 && !lua_isnil(L, -1)) {
        if (lua_type(L, -1) != LUA_TSTRING ||
            (site->access_log_format = config_access_format(lua_tostring(L, -1))) == -1) {
            config_error(path, "setting '%s.access_log_format' must be \"combined\", \"timed\", "
                               "\"vhost_combined\" or \"json\", not %s%.100s%s", setting,
                         lua_type(L, -1) == LUA_TSTRING ? "\"" : "a ",
                         lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, -1),
                         lua_type(L, -1) == LUA_TSTRING ? "\"" : "");
            rc = -1;
        } else if (site->access_log == NULL) {
            /* One file, one format: goaccess reads a log in one. */
            config_error(path, "setting '%s.access_log_format' is the format of the site's own "
                               "access_log: set '%s.access_log' too, or the top-level access_log_format",
                         setting, setting);
            rc = -1;
        }
    }
    lua_pop(L, 1);
    return rc;
}

/* compress, headers and error_pages of the site table on top of the
 * stack, over those of its pool: a named pool's, or the top level's for
 * the site's own (which gets the same). */
static int read_site_output(lua_State *L, const char *path, const char *setting,
                            const struct config *config, struct site *site)
{
    char prefix[310];

    snprintf(prefix, sizeof prefix, "%s.", setting);
    if (config_read_output(L, path, -1, prefix,
                           site->pool == &site->own ? &config->output : &site->pool->output,
                           &site->output) == -1 ||
        config_read_access(L, path, -1, prefix, false, &site->access) == -1)
        return -1;
    return site->pool == &site->own ? config_copy_output(path, &site->output, &site->own.output) : 0;
}

/* sites = { ["NAME"] = { backends = {...}, balance = "...", aliases = {...} }, ... } */
int config_read_sites(lua_State *L, const char *path, struct config *config)
{
    struct router *router = &config->router;
    int rc = 0;

    config_global(L, "sites");
    if (lua_isnil(L, -1))
        goto out;
    if (lua_type(L, -1) != LUA_TTABLE) {
        config_error(path, "setting 'sites' must be a table of site name = { backends = {...} }, not a %s",
                     luaL_typename(L, -1));
        rc = -1;
        goto out;
    }
    router->sites = allocate_entries(L, sizeof *router->sites);
    if (router->sites == NULL) {
        config_error(path, "out of memory");
        rc = -1;
        goto out;
    }
    for (lua_pushnil(L); rc == 0 && lua_next(L, -2) != 0; lua_pop(L, 1)) {
        struct site *site = &router->sites[router->count];
        char setting[300], name[256];
        const struct site *owner;
        const char *key;
        size_t alias;

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
        owner = name_owner(router, name, &alias);
        if (owner != NULL && alias == 0) {
            config_error(path, "setting 'sites': \"%.100s\" is listed twice", key);
            rc = -1;
            continue;
        }
        if (owner != NULL) {
            config_error(path, "setting 'sites': \"%.100s\" is already an alias of the site '%s%s' "
                               "(its aliases[%zu])", key, owner->wildcard ? "*" : "", owner->name, alias);
            rc = -1;
            continue;
        }
        if ((site->name = strdup(name)) == NULL) {
            config_error(path, "out of memory");
            rc = -1;
            continue;
        }
        router->count++; /* so that config_free releases it */
        site->own.root_fd = -1;
        snprintf(setting, sizeof setting, "sites[\"%.100s\"]", key);
        if (lua_type(L, -1) != LUA_TTABLE) {
            config_error(path, "setting '%s' must be a table like { backends = {...} } or "
                               "{ pool = \"NAME\" }, not a %s", setting, luaL_typename(L, -1));
            rc = -1;
            continue;
        }
        rc = read_aliases(L, path, setting, router, site);
        if (rc == 0)
            rc = read_site_log(L, path, setting, site);
        if (rc == 0)
            rc = read_site_pool(L, path, setting, config, site);
        if (rc == 0)
            rc = read_site_output(L, path, setting, config, site);
    }
    if (rc == -1)
        lua_pop(L, 1); /* the key lua_next would have taken */
out:
    lua_pop(L, 1);
    return rc;
}

int config_read_pool_table(lua_State *L, const char *path, const char *setting,
                           const struct config *config, struct pool *pool)
{
    return read_pool_table(L, path, setting, config, pool);
}
