/* config_read.h -- what the files that read the config share. Private to
 * the config_*.c files and tls.c. */
#ifndef RSP_CONFIG_READ_H
#define RSP_CONFIG_READ_H

#include "config.h"

#include <lua.h>
#include <stddef.h>

/* Prints "rsp: PATH: MESSAGE" on stderr, naming the file once even when
 * MESSAGE (one of Lua's) begins with "PATH:LINE:" itself. */
void config_error(const char *path, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* Pushes the value of global `name`. Raw access: a script that put a
 * metatable on _G must not get to run code (and raise errors) here, outside
 * a protected call, where an error would abort the whole process. */
void config_global(lua_State *L, const char *name);

/* Pushes field `name` of the table at stack index t, without metamethods. */
void config_field(lua_State *L, int t, const char *name);

/* Checks that every key of the table on top of the stack is one of the
 * NULL-terminated names in `known`: a misspelt field must not be ignored in
 * silence. Returns 0, or -1 after naming `setting` and the stray key. */
int config_check_fields(lua_State *L, const char *path, const char *setting,
                        const char *const known[]);

/* Checks that the table on top of the stack is a list: every key a whole
 * number from 1 to its length (an entry given a name, or left after a gap,
 * would be ignored in silence). Returns 0, or -1 after naming `setting`
 * and the stray key. */
int config_check_list(lua_State *L, const char *path, const char *setting);

/* Splits "HOST:PORT" or "[IPV6]:PORT" into host and port. Returns 0, or -1
 * if text does not have that shape (the port is checked separately). */
int config_split_host_port(const char *text, char *host, size_t host_size, const char **port);

/* Reads the address setting on top of the stack (not nil): a port
 * (8000, "8000") or "ADDRESS:PORT" ("[::1]:8000"). Sets *host (NULL:
 * every address; else free it) and port ("1".."65535"). Returns 0, or -1
 * after naming `setting` (config_address.c). */
int config_read_address(lua_State *L, const char *path, const char *setting, char **host,
                        char port[6]);

/* Reads a listener's setting on top of the stack (not nil): an address
 * as config_read_address reads it, or the table { address = ADDRESS,
 * proxy_protocol = BOOLEAN } (*proxy_protocol: its clients come through a
 * load balancer that sends the PROXY protocol's header first). Returns 0,
 * or -1 after naming `setting` (config_address.c). */
int config_read_listen(lua_State *L, const char *path, const char *setting, char **host, char port[6],
                       bool *proxy_protocol);

/* The backends settings (config_pools.c). Each reads its globals, fills
 * config and returns 0, or prints what is wrong and returns -1. Pools come
 * before sites, which may name them. */
int config_read_default_site(lua_State *L, const char *path, struct config *config);
int config_read_pools(lua_State *L, const char *path, struct config *config);
int config_read_sites(lua_State *L, const char *path, struct config *config);

/* The health_check settings (config_health.c). The built-in defaults, for
 * a table that leaves fields out (not enabled by themselves). */
extern const struct health_settings config_health_defaults;

/* Reads field health_check of the table at index t (LUA_GLOBALSINDEX for
 * the top level) into *out, starting from *inherited: nil keeps it, false
 * turns checks off, a table overrides the fields it has and turns them on.
 * `setting` names it in messages ("health_check", "pools.app.health_check").
 * Returns 0, or -1 after printing what is wrong. */
int config_read_health(lua_State *L, const char *path, int t, const char *setting,
                       const struct health_settings *inherited, struct health_settings *out);

/* The enum access_format that name gives (NULL: combined), or -1
 * (config_settings.c). */
int config_access_format(const char *name);

/* status_listen and workers (config_scaling.c), read after listen and the
 * table's settings (status_public). Returns 0, or -1 after printing what
 * is wrong. */
int config_read_scaling(lua_State *L, const char *path, struct config *config);

/* tls and acme_webroot (config_tls.c), read after listen and
 * status_listen. Returns 0, or -1 after printing what is wrong. */
int config_read_tls(lua_State *L, const char *path, struct config *config);

/* tls.acme, field of the tls table at index tls (config_acme.c), read
 * after tls.certificates (config->tls.context). Sets config->tls.acme
 * (NULL without it) and points acme_webroot at its challenges. Returns 0,
 * or -1 after printing what is wrong. */
int config_read_acme(lua_State *L, const char *path, int tls, struct config *config);

/* Frees what config_read_acme allocated. */
void config_free_acme(struct acme_settings *a);

/* Reads field root of the table at index t (LUA_GLOBALSINDEX for the top
 * level) into pool: nil leaves pool->root NULL and root_fd -1; else an
 * absolute path to a directory, opened O_PATH. `setting` names it in
 * messages ("pools.static.root"). Returns 0, or -1 after printing what is
 * wrong (config_files.c). */
int config_read_root(lua_State *L, const char *path, int t, const char *setting, struct pool *pool);

/* Reads the pool table on top of the stack (backends or root, balance,
 * health_check) into pool (config_pools.c). Returns 0, or -1 after
 * config_error. */
int config_read_pool_table(lua_State *L, const char *path, const char *setting,
                           const struct config *config, struct pool *pool);

/* Reads `fastcgi` of the site table on top of the stack (setting names
 * the site) into pool->fastcgi; pool: the site's own pool (its root set),
 * or NULL when the site names a pool, which is an error if it has
 * `fastcgi` (config_fastcgi.c). Returns 0, or -1 after config_error. */
int config_read_fastcgi(lua_State *L, const char *path, const char *setting, const struct config *config,
                        struct pool *pool);

/* A backend speaks one protocol: one named both by a `fastcgi` and by a
 * pool of HTTP backends would share its idle connections and its health
 * check between them. Returns 0, or -1 after config_error naming it. */
int config_check_fastcgi_backends(const char *path, struct config *config);

/* Reads fields compress, headers and error_pages of the table at index t
 * into *out, starting from a copy of *above: compress and error_pages
 * replace the copy's, headers merge into it by name. `prefix` comes
 * before the field's name in messages ("", "pools.app.",
 * "sites[\"example.org\"]."). Returns 0, or -1 after printing what is
 * wrong (*out is then to be freed with site_output_free) (config_files.c). */
int config_read_output(lua_State *L, const char *path, int t, const char *prefix,
                       const struct site_output *above, struct site_output *out);

/* Makes *to (empty) a copy of *from. Returns 0, or -1 after saying "out
 * of memory" (config_files.c). */
/* allow, deny, basic_auth and max_body_size (access_rules.h) of the table
 * at index t (LUA_GLOBALSINDEX: the top level, whose max_body_size the
 * settings table reads: top), into a; prefix ("sites[\"x\"].") names them
 * in messages. Returns 0, or -1 after a config error. */
int config_read_access(lua_State *L, const char *path, int t, const char *prefix, bool top,
                       struct access_settings *a);

int config_copy_output(const char *path, const struct site_output *from, struct site_output *to);

#endif
