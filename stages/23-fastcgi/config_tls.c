/* config_tls.c -- the settings of chapters 14 and 15: tls (listen,
 * certificates; redirect_http, hsts) and acme_webroot; tls.http2, chapter
 * 20's; tls.acme, chapter 19's, is read by config_acme.c. */
#include "config_read.h"

#include "tls.h"

#include <errno.h>
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TLS_MAX_CERTIFICATES 64
#define HSTS_MAX 315360000 /* ten years, in seconds */

static const char *const tls_fields[] = { "listen", "certificates", "redirect_http", "hsts", "acme", "http2",
                                          NULL };
static const char *const certificate_fields[] = { "cert", "key", NULL };

/* A string field of the table at t, the path of a file. */
static int read_file_field(lua_State *L, const char *path, int t, const char *setting,
                           const char *name, const char **out)
{
    bool text;

    config_field(L, t, name);
    /* lua_type first: lua_tostring would turn a number into a string. */
    text = lua_type(L, -1) == LUA_TSTRING && lua_objlen(L, -1) > 0 &&
           strlen(lua_tostring(L, -1)) == lua_objlen(L, -1);
    *out = text ? lua_tostring(L, -1) : NULL; /* stays valid: the table holds the string */
    lua_pop(L, 1);
    if (text)
        return 0;
    config_error(path, "setting '%s.%s' must be the path of a PEM file", setting, name);
    return -1;
}

/* Copies the files' paths into s->certificate_paths, for the check as
 * `user` (config_check_user.c). Returns 0, or -1 after saying so. */
static int keep_paths(const char *path, const struct tls_files *files, size_t count,
                      struct tls_settings *s)
{
    s->certificate_paths = calloc(2 * count, sizeof *s->certificate_paths);
    if (s->certificate_paths == NULL) {
        config_error(path, "out of memory");
        return -1;
    }
    s->certificate_count = count;
    for (size_t i = 0; i < count; i++) {
        s->certificate_paths[2 * i] = strdup(files[i].cert);
        s->certificate_paths[2 * i + 1] = strdup(files[i].key);
        if (s->certificate_paths[2 * i] == NULL || s->certificate_paths[2 * i + 1] == NULL) {
            config_error(path, "out of memory");
            return -1;      /* config_free_tls frees what was copied */
        }
    }
    return 0;
}

/* certificates = { { cert = "...", key = "..." }, ... }; optional with
 * acme (with_acme). */
static int read_certificates(lua_State *L, const char *path, int tls, bool with_acme,
                             struct tls_settings *s)
{
    struct tls_files files[TLS_MAX_CERTIFICATES];
    size_t count;
    int list;

    config_field(L, tls, "certificates");
    list = lua_gettop(L);
    count = lua_istable(L, list) ? lua_objlen(L, list) : 0;
    if (lua_isnil(L, list) && with_acme) {
        /* Every certificate comes from the CA (chapter 19). */
        s->context = tls_context_load(path, files, 0);
        lua_pop(L, 1);
        return s->context != NULL ? 0 : -1;
    }
    if (count == 0 || count > TLS_MAX_CERTIFICATES) {
        config_error(path, "setting 'tls.certificates' must list from 1 to %d certificates, "
                           "each { cert = \"fullchain.pem\", key = \"privkey.pem\" }",
                     TLS_MAX_CERTIFICATES);
        lua_pop(L, 1);
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        char setting[48];

        snprintf(setting, sizeof setting, "tls.certificates[%zu]", i + 1);
        lua_rawgeti(L, list, (int)i + 1);
        if (!lua_istable(L, -1)) {
            config_error(path, "setting '%s' must be { cert = \"...\", key = \"...\" }, not a %s",
                         setting, luaL_typename(L, -1));
            lua_pop(L, 2);
            return -1;
        }
        if (config_check_fields(L, path, setting, certificate_fields) == -1 ||
            read_file_field(L, path, lua_gettop(L), setting, "cert", &files[i].cert) == -1 ||
            read_file_field(L, path, lua_gettop(L), setting, "key", &files[i].key) == -1) {
            lua_pop(L, 2);
            return -1;
        }
        lua_pop(L, 1); /* the list keeps the entry, and its strings, alive */
    }
    s->context = tls_context_load(path, files, count);
    if (s->context != NULL && keep_paths(path, files, count, s) == -1) {
        tls_context_free(s->context);
        s->context = NULL;
    }
    lua_pop(L, 1);
    return s->context != NULL ? 0 : -1;
}

/* hsts = seconds (0: no header) */
static int read_hsts(lua_State *L, const char *path, int tls, struct tls_settings *s)
{
    lua_Number value;
    int rc = 0;

    config_field(L, tls, "hsts");
    value = lua_tonumber(L, -1);
    s->hsts_line[0] = '\0';
    if (lua_isnil(L, -1)) {
        /* none */
    } else if (lua_type(L, -1) != LUA_TNUMBER || value < 0 || value > HSTS_MAX ||
               value != (lua_Number)(long)value) {
        config_error(path, "setting 'tls.hsts' must be a whole number of seconds from 0 (no header) "
                           "to %d", HSTS_MAX);
        rc = -1;
    } else if (value > 0) {
        snprintf(s->hsts_line, sizeof s->hsts_line, "Strict-Transport-Security: max-age=%ld\r\n",
                 (long)value);
    }
    lua_pop(L, 1);
    return rc;
}

/* A boolean field `name` of the tls table (absent: fallback): redirect_http
 * (plain HTTP gets a redirect to https://) and http2 (ALPN offers h2, then
 * http/1.1; false: http/1.1 only). */
static int read_flag(lua_State *L, const char *path, int tls, const char *name, bool fallback, bool *out)
{
    int rc = 0;

    config_field(L, tls, name);
    *out = fallback;
    if (lua_type(L, -1) == LUA_TBOOLEAN) {
        *out = lua_toboolean(L, -1);
    } else if (!lua_isnil(L, -1)) {
        config_error(path, "setting 'tls.%s' must be true or false, not a %s", name, luaL_typename(L, -1));
        rc = -1;
    }
    lua_pop(L, 1);
    return rc;
}

/* True if host:port (host NULL: every address) and the other overlap: one
 * socket could not serve both. */
static bool overlap(const char *host, const char *port, const char *other_host, const char *other_port)
{
    return strcmp(port, other_port) == 0 &&
           (host == NULL || other_host == NULL || strcmp(host, other_host) == 0);
}

static int read_tls_listen(lua_State *L, const char *path, int tls, struct config *c)
{
    struct tls_settings *s = &c->tls;
    int rc;

    config_field(L, tls, "listen");
    if (lua_isnil(L, -1)) {
        config_error(path, "setting 'tls.listen' is missing (the HTTPS port: 443, or \"ADDRESS:443\")");
        rc = -1;
    } else {
        rc = config_read_listen(L, path, "tls.listen", &s->listen_host, s->listen_port, &s->proxy_protocol);
    }
    lua_pop(L, 1);
    if (rc == 0 && overlap(s->listen_host, s->listen_port, c->listen_host, c->listen_port)) {
        config_error(path, "setting 'tls.listen' must not be the address 'listen' serves (%s)",
                     c->listen_port);
        rc = -1;
    }
    if (rc == 0 && c->scaling.status_host != NULL &&
        overlap(s->listen_host, s->listen_port, c->scaling.status_host, c->scaling.status_port)) {
        config_error(path, "setting 'tls.listen' must not be the address 'status_listen' serves (%s)",
                     c->scaling.status_port);
        rc = -1;
    }
    return rc;
}

/* acme_webroot = "/var/www/acme": the directory certbot --webroot -w
 * writes its tokens under (.well-known/acme-challenge/). */
static int read_acme_webroot(lua_State *L, const char *path, struct tls_settings *s)
{
    const char *text;
    struct stat st;
    int rc = -1;

    config_global(L, "acme_webroot");
    text = lua_tostring(L, -1);
    if (lua_isnil(L, -1)) {
        rc = 0;
    } else if (lua_type(L, -1) != LUA_TSTRING || strlen(text) != lua_objlen(L, -1) || text[0] != '/') {
        config_error(path, "setting 'acme_webroot' must be the absolute path of a directory");
    } else if (stat(text, &st) == -1) {
        config_error(path, "setting 'acme_webroot': cannot use %s: %s", text, strerror(errno));
    } else if (!S_ISDIR(st.st_mode)) {
        config_error(path, "setting 'acme_webroot': %s is not a directory", text);
    } else if ((s->acme_webroot = strdup(text)) == NULL) {
        config_error(path, "out of memory");
    } else {
        rc = 0;
    }
    lua_pop(L, 1);
    return rc;
}

int config_read_tls(lua_State *L, const char *path, struct config *config)
{
    struct tls_settings *s = &config->tls;
    bool with_acme;
    int tls, rc = -1;

    if (read_acme_webroot(L, path, s) == -1)
        return -1;
    config_global(L, "tls");
    tls = lua_gettop(L);
    if (lua_isnil(L, tls)) {
        rc = 0;
    } else if (!lua_istable(L, tls)) {
        config_error(path, "setting 'tls' must be a table: { listen = 443, certificates = { ... } }");
    } else if (config_check_fields(L, path, "tls", tls_fields) == 0 &&
               read_tls_listen(L, path, tls, config) == 0 &&
               read_flag(L, path, tls, "redirect_http", false, &s->redirect_http) == 0 &&
               read_hsts(L, path, tls, s) == 0 && read_flag(L, path, tls, "http2", true, &s->http2) == 0) {
        /* The certificates last: they are the slow part. acme after
         * them: a name they cover is not ordered. */
        config_field(L, tls, "acme");
        with_acme = !lua_isnil(L, -1);
        lua_pop(L, 1);
        rc = read_certificates(L, path, tls, with_acme, s);
        if (rc == 0)
            rc = config_read_acme(L, path, tls, config);
    }
    lua_settop(L, tls - 1);
    return rc;
}

void config_free_tls(struct tls_settings *s)
{
    tls_context_free(s->context);
    s->context = NULL;
    free(s->listen_host);
    s->listen_host = NULL;
    free(s->acme_webroot);
    s->acme_webroot = NULL;
    config_free_acme(s->acme);
    s->acme = NULL;
    for (size_t i = 0; i < 2 * s->certificate_count; i++)
        free(s->certificate_paths[i]);
    free(s->certificate_paths);
    s->certificate_paths = NULL;
    s->certificate_count = 0;
}
