/* config_access.c -- reading allow, deny, basic_auth and max_body_size
 * (access_rules.h) from the top level, a named pool's table or a site's. */
#include "access_rules.h"
#include "basic_auth.h"
#include "config_read.h"
#include "config_settings.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* allow or deny (its value on top of the stack): a list of "all",
 * addresses and CIDR prefixes, appended to a->rules. Returns 0, or -1
 * after a config error. */
static int read_rules(lua_State *L, const char *path, const char *setting, bool allow,
                      struct access_settings *a)
{
    size_t count;

    if (lua_type(L, -1) != LUA_TTABLE) {
        config_error(path, "setting '%s' must be a list like { \"10.0.0.0/8\", \"2001:db8::/32\" }, "
                           "not a %s", setting, luaL_typename(L, -1));
        return -1;
    }
    if (config_check_list(L, path, setting) == -1)
        return -1;
    count = lua_objlen(L, -1);
    if (count == 0) {
        config_error(path, "setting '%s' is an empty list", setting);
        return -1;
    }
    struct access_rule *rules = realloc(a->rules, (a->rule_count + count) * sizeof *rules);
    if (rules == NULL) {
        config_error(path, "out of memory");
        return -1;
    }
    a->rules = rules;
    for (size_t i = 1; i <= count; i++) {
        struct access_rule *r = &a->rules[a->rule_count];

        lua_rawgeti(L, -1, (int)i);
        if (lua_type(L, -1) != LUA_TSTRING || cidr_parse(lua_tostring(L, -1), &r->prefix) == -1) {
            config_error(path, "setting '%s'[%zu] must be \"all\", an address or a CIDR prefix "
                               "like \"10.0.0.0/8\" or \"2001:db8::/32\"", setting, i);
            lua_pop(L, 1);
            return -1;
        }
        lua_pop(L, 1);
        r->allow = allow;
        a->rule_count++;
    }
    a->has_allow |= allow;
    a->rules_set = true;
    return 0;
}

/* A string field of the basic_auth table on top of the stack, copied
 * into *out. Returns 0, or -1 after a config error. */
static int read_text(lua_State *L, const char *path, const char *setting, const char *name, char **out)
{
    config_field(L, -1, name);
    if (lua_type(L, -1) != LUA_TSTRING || lua_objlen(L, -1) == 0 ||
        strlen(lua_tostring(L, -1)) != lua_objlen(L, -1) ||
        strpbrk(lua_tostring(L, -1), "\"\\\r\n") != NULL) {
        config_error(path, "setting '%s.%s' must be a non-empty string (without quotes, "
                           "backslashes or line breaks)", setting, name);
        lua_pop(L, 1);
        return -1;
    }
    *out = strdup(lua_tostring(L, -1));
    lua_pop(L, 1);
    if (*out == NULL) {
        config_error(path, "out of memory");
        return -1;
    }
    return 0;
}

/* basic_auth = { realm = "...", users = "FILE", forward = false } (on top
 * of the stack), its users read from the file. */
static int read_basic_auth(lua_State *L, const char *path, const char *setting,
                           struct access_settings *a)
{
    static const char *const fields[] = { "realm", "users", "forward", NULL };

    if (lua_type(L, -1) != LUA_TTABLE) {
        config_error(path, "setting '%s' must be a table like { realm = \"private\", users = "
                           "\"/etc/rsp/htpasswd\" }, not a %s", setting, luaL_typename(L, -1));
        return -1;
    }
    if (config_check_fields(L, path, setting, fields) == -1)
        return -1;
    if ((a->auth = calloc(1, sizeof *a->auth)) == NULL) {
        config_error(path, "out of memory");
        return -1;
    }
    if (read_text(L, path, setting, "realm", &a->auth->realm) == -1 ||
        read_text(L, path, setting, "users", &a->auth->users_path) == -1)
        return -1;
    config_field(L, -1, "forward");
    if (!lua_isnil(L, -1) && !lua_isboolean(L, -1)) {
        config_error(path, "setting '%s.forward' must be true or false, not a %s", setting,
                     luaL_typename(L, -1));
        lua_pop(L, 1);
        return -1;
    }
    a->auth->forward = lua_toboolean(L, -1);
    lua_pop(L, 1);
    basic_auth_challenge(a->auth);
    return basic_auth_load(path, setting, a->auth);
}

int config_read_access(lua_State *L, const char *path, int t, const char *prefix, bool top,
                       struct access_settings *a)
{
    static const char *const names[] = { "allow", "deny", "basic_auth", "max_body_size" };
    int rc = 0;

    if (t < 0 && t > LUA_REGISTRYINDEX)
        t = lua_gettop(L) + t + 1; /* the fields pushed below move a relative index */
    for (size_t i = 0; rc == 0 && i < sizeof names / sizeof names[0]; i++) {
        char setting[400];

        /* The top level's max_body_size is read from the settings table. */
        if (top && i == 3)
            continue;
        snprintf(setting, sizeof setting, "%s%s", prefix, names[i]);
        config_field(L, t, names[i]);
        if (!lua_isnil(L, -1)) {
            if (i < 2)
                rc = read_rules(L, path, setting, i == 0, a);
            else if (i == 2)
                rc = read_basic_auth(L, path, setting, a);
            else if ((rc = config_read_size_value(L, path, setting, &a->max_body)) == 0)
                a->max_body_set = true;
        }
        lua_pop(L, 1);
    }
    return rc;
}
