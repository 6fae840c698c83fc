/* config_acme.c -- the tls.acme block of chapter 19: which CA, which
 * names, where the keys and certificates live. Only read and checked
 * here; nothing touches the network or the disk (rsp -t runs this too).
 * The storage directory is made when rsp starts (acme_store_prepare). */
#define _GNU_SOURCE /* asprintf */
#include "config_read.h"

#include "tls.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ACME_DEFAULT_DIRECTORY "https://acme-v02.api.letsencrypt.org/directory"
#define ACME_DEFAULT_STORAGE "/var/lib/rsp/acme"
#define ACME_MAX_SETS 64        /* certificates */
#define ACME_MAX_NAMES 100      /* names in one certificate: Let's Encrypt's limit */
#define ACME_TEXT_MAX 1024      /* an email, a URL, a path */

static const char *const acme_fields[] = { "agree_to_terms", "email", "directory", "ca_root", "storage",
                                           "domains", "challenges", NULL };

/* True if name is a DNS name a public CA could issue for: labels of
 * letters, digits and inner hyphens, at least two of them, 253 bytes at
 * most, and not all digits (an IPv4 address is not a DNS name). */
static bool dns_name(const char *name)
{
    size_t length = strlen(name), label = 0, labels = 1;
    bool digits_only = true;

    if (length == 0 || length > 253 || name[0] == '.' || name[length - 1] == '.')
        return false;
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c == '.') {
            if (label == 0 || name[i - 1] == '-')
                return false;
            label = 0;
            labels++;
            continue;
        }
        if (!(isalnum(c) || (c == '-' && label > 0)) || ++label > 63)
            return false;
        if (!isdigit(c))
            digits_only = false;
    }
    return labels >= 2 && name[length - 1] != '-' && !digits_only;
}

/* A string field of table t: NULL when absent; else a copy, checked to
 * be 1..ACME_TEXT_MAX bytes of printable ASCII without spaces. Returns 0,
 * or -1 after naming the setting. */
static int read_text(lua_State *L, const char *path, int t, const char *name, const char *shape,
                     char **out)
{
    const char *text;
    size_t length;
    int rc = 0;

    *out = NULL;
    config_field(L, t, name);
    text = lua_tolstring(L, -1, &length);
    if (lua_isnil(L, -1)) {
        /* absent */
    } else if (lua_type(L, -1) != LUA_TSTRING || length == 0 || length > ACME_TEXT_MAX ||
               strlen(text) != length) {
        config_error(path, "setting 'tls.acme.%s' must be %s", name, shape);
        rc = -1;
    } else {
        for (size_t i = 0; i < length && rc == 0; i++)
            if (text[i] <= ' ' || text[i] > '~') {
                config_error(path, "setting 'tls.acme.%s' must be %s", name, shape);
                rc = -1;
            }
        if (rc == 0 && (*out = strdup(text)) == NULL) {
            config_error(path, "out of memory");
            rc = -1;
        }
    }
    lua_pop(L, 1);
    return rc;
}

static int read_agreement(lua_State *L, const char *path, int t)
{
    bool agreed;

    config_field(L, t, "agree_to_terms");
    agreed = lua_type(L, -1) == LUA_TBOOLEAN && lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (agreed)
        return 0;
    config_error(path, "setting 'tls.acme.agree_to_terms' must be true: ordering certificates means "
                       "accepting the CA's terms of service (Let's Encrypt's are at "
                       "https://letsencrypt.org/repository/), so say so");
    return -1;
}

/* ca_root must be a file this process can read: opened, not just
 * looked at, so that a reload made as `user` (which reads it when it
 * next orders) is refused naming it. Returns 0, or -1 after saying why. */
static int check_ca_root(const char *path, const char *file)
{
    struct stat st;
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    const char *why = NULL;

    if (fd == -1)
        why = strerror(errno);
    else if (fstat(fd, &st) == -1)
        why = strerror(errno);
    else if (!S_ISREG(st.st_mode))
        why = "not a file";
    if (fd != -1)
        close(fd);
    if (why == NULL)
        return 0;
    config_error(path, "setting 'tls.acme.ca_root': cannot use %s: %s", file, why);
    return -1;
}

/* email, directory, ca_root and storage, with their defaults. */
static int read_texts(lua_State *L, const char *path, int t, struct acme_settings *a)
{
    if (read_text(L, path, t, "email", "an email address (\"me@example.org\")", &a->email) == -1 ||
        read_text(L, path, t, "directory", "the https:// URL of an ACME directory", &a->directory) == -1 ||
        read_text(L, path, t, "ca_root", "the absolute path of a PEM file", &a->ca_root) == -1 ||
        read_text(L, path, t, "storage", "the absolute path of a directory", &a->storage) == -1)
        return -1;
    if (a->email != NULL && (strchr(a->email, '@') == NULL || a->email[0] == '@' ||
                             strchr(a->email, ',') != NULL || strchr(a->email, '"') != NULL)) {
        config_error(path, "setting 'tls.acme.email' must be an email address (\"me@example.org\")");
        return -1;
    }
    if (a->directory == NULL && (a->directory = strdup(ACME_DEFAULT_DIRECTORY)) == NULL)
        goto out_of_memory;
    if (strncmp(a->directory, "https://", 8) != 0 || a->directory[8] == '\0' || a->directory[8] == '/') {
        config_error(path, "setting 'tls.acme.directory' must be the https:// URL of an ACME directory");
        return -1;
    }
    if (a->ca_root != NULL) {
        if (a->ca_root[0] != '/') {
            config_error(path, "setting 'tls.acme.ca_root' must be the absolute path of a PEM file");
            return -1;
        }
        if (check_ca_root(path, a->ca_root) == -1)
            return -1;
    }
    if (a->storage == NULL && (a->storage = strdup(ACME_DEFAULT_STORAGE)) == NULL)
        goto out_of_memory;
    if (a->storage[0] != '/') {
        config_error(path, "setting 'tls.acme.storage' must be the absolute path of a directory");
        return -1;
    }
    return 0;
out_of_memory:
    config_error(path, "out of memory");
    return -1;
}

/* challenges = { "http-01", "tls-alpn-01" }: which, in which order. */
static int read_challenges(lua_State *L, const char *path, int t, struct acme_settings *a)
{
    static const char *const shape = "a list of \"http-01\" and \"tls-alpn-01\", in the order to try them";
    size_t count;
    int rc = 0;

    config_field(L, t, "challenges");
    if (lua_isnil(L, -1)) {
        strcpy(a->challenges[0], "http-01");
        strcpy(a->challenges[1], "tls-alpn-01");
        lua_pop(L, 1);
        return 0;
    }
    count = lua_istable(L, -1) ? lua_objlen(L, -1) : 0;
    if (count == 0 || count > 2) {
        config_error(path, "setting 'tls.acme.challenges' must be %s", shape);
        lua_pop(L, 1);
        return -1;
    }
    for (size_t i = 0; i < count && rc == 0; i++) {
        const char *type;

        lua_rawgeti(L, -1, (int)i + 1);
        type = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
        if ((strcmp(type, "http-01") != 0 && strcmp(type, "tls-alpn-01") != 0) ||
            (i == 1 && strcmp(type, a->challenges[0]) == 0)) {
            config_error(path, "setting 'tls.acme.challenges' must be %s", shape);
            rc = -1;
        } else {
            strcpy(a->challenges[i], type);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return rc;
}

/* True if name is already one of a's names, in any set. */
static bool listed(const struct acme_settings *a, const char *name)
{
    for (size_t i = 0; i < a->set_count; i++)
        for (size_t j = 0; j < a->sets[i].count; j++)
            if (strcmp(a->sets[i].names[j], name) == 0)
                return true;
    return false;
}

/* Adds name (checked, lower-cased) to the set being built, the last of
 * a->sets. A name tls.certificates covers is left out: it is not ordered.
 * Returns 0, or -1 after naming `setting`. */
static int add_name(const char *path, const char *setting, struct acme_settings *a, const char *name,
                    const struct tls_context *certificates)
{
    struct acme_domain_set *set = &a->sets[a->set_count - 1];
    char lower[256], **names;
    size_t length = strlen(name);

    if (name[0] == '*') {
        config_error(path, "setting '%s': %s is a wildcard, which needs the dns-01 challenge; rsp "
                           "answers http-01 and tls-alpn-01 only: list the names themselves",
                     setting, name);
        return -1;
    }
    if (length >= sizeof lower || !dns_name(name)) {
        config_error(path, "setting '%s': \"%s\" is not a DNS name a CA could issue a certificate for",
                     setting, name);
        return -1;
    }
    for (size_t i = 0; i <= length; i++)
        lower[i] = (char)tolower((unsigned char)name[i]);
    if (listed(a, lower)) {
        config_error(path, "setting '%s': %s is listed twice", setting, lower);
        return -1;
    }
    if (certificates != NULL && tls_context_covers(certificates, lower))
        return 0;
    if (set->count == ACME_MAX_NAMES) {
        config_error(path, "setting '%s': a certificate has at most %d names", setting, ACME_MAX_NAMES);
        return -1;
    }
    names = realloc(set->names, (set->count + 1) * sizeof *names);
    if (names == NULL || (names[set->count] = strdup(lower)) == NULL) {
        if (names != NULL)
            set->names = names;
        config_error(path, "out of memory");
        return -1;
    }
    set->names = names;
    set->count++;
    return 0;
}

/* Starts a new, empty set at the end of a->sets. */
static int open_set(const char *path, const char *setting, struct acme_settings *a)
{
    struct acme_domain_set *sets;

    if (a->set_count == ACME_MAX_SETS) {
        config_error(path, "setting '%s' may list at most %d certificates", setting, ACME_MAX_SETS);
        return -1;
    }
    sets = realloc(a->sets, (a->set_count + 1) * sizeof *sets);
    if (sets == NULL) {
        config_error(path, "out of memory");
        return -1;
    }
    a->sets = sets;
    a->sets[a->set_count++] = (struct acme_domain_set){ NULL, 0 };
    return 0;
}

/* Drops the last set if every name of it was covered by tls.certificates. */
static void close_set(struct acme_settings *a)
{
    if (a->sets[a->set_count - 1].count == 0)
        free(a->sets[--a->set_count].names);
}

/* One entry of domains: "name", or { "name", "other", ... } for one
 * certificate holding them all. The entry is on top of the stack. */
static int read_domain_entry(lua_State *L, const char *path, size_t index, struct acme_settings *a,
                             const struct tls_context *certificates)
{
    char setting[48];
    size_t count;
    int rc = 0;

    snprintf(setting, sizeof setting, "tls.acme.domains[%zu]", index);
    if (open_set(path, setting, a) == -1)
        return -1;
    if (lua_type(L, -1) == LUA_TSTRING) {
        rc = add_name(path, setting, a, lua_tostring(L, -1), certificates);
    } else if (lua_istable(L, -1) && (count = lua_objlen(L, -1)) > 0) {
        for (size_t i = 0; i < count && rc == 0; i++) {
            lua_rawgeti(L, -1, (int)i + 1);
            if (lua_type(L, -1) != LUA_TSTRING) {
                config_error(path, "setting '%s' must list names (strings), not a %s", setting,
                             luaL_typename(L, -1));
                rc = -1;
            } else {
                rc = add_name(path, setting, a, lua_tostring(L, -1), certificates);
            }
            lua_pop(L, 1);
        }
    } else {
        config_error(path, "setting '%s' must be a name (\"example.org\") or a list of names for one "
                           "certificate ({ \"example.org\", \"www.example.org\" })", setting);
        rc = -1;
    }
    if (rc == 0)
        close_set(a);
    return rc;
}

/* The default certificate of a site: its name and its aliases, those of
 * them that are DNS names (no wildcard), in one set. Returns 0, or -1
 * after logging. */
static int site_domains(const char *path, const struct site *site, struct acme_settings *a,
                        const struct tls_context *certificates)
{
    bool opened = false;
    int rc = 0;

    for (size_t i = 0; i <= site->alias_count && rc == 0; i++) {
        const char *name = i == 0 ? site->name : site->aliases[i - 1];

        /* a wildcard is kept as ".example.com", which is no DNS name */
        if (!dns_name(name) || listed(a, name))
            continue;
        if (!opened && (rc = open_set(path, "tls.acme.domains", a)) == 0)
            opened = true;
        if (rc == 0)
            rc = add_name(path, "tls.acme.domains", a, name, certificates);
    }
    if (rc == 0 && opened)
        close_set(a);
    return rc;
}

/* domains = { ... }; without it, one certificate per site for its name
 * and aliases, those that are DNS names. */
static int read_domains(lua_State *L, const char *path, int t, struct config *config,
                        struct acme_settings *a)
{
    const struct tls_context *certificates = config->tls.context;
    size_t count;
    int rc = 0;

    config_field(L, t, "domains");
    if (lua_isnil(L, -1)) {
        for (size_t i = 0; i < config->router.count && rc == 0; i++)
            rc = site_domains(path, &config->router.sites[i], a, certificates);
        if (rc == 0 && a->set_count == 0) {
            config_error(path, "setting 'tls.acme.domains': no site name is a DNS name left to get a "
                               "certificate for: list the names (domains = { \"example.org\" })");
            rc = -1;
        }
    } else if (!lua_istable(L, -1) || (count = lua_objlen(L, -1)) == 0) {
        config_error(path, "setting 'tls.acme.domains' must list the names to get certificates for: "
                           "{ \"example.org\", { \"example.net\", \"www.example.net\" } }");
        rc = -1;
    } else {
        for (size_t i = 0; i < count && rc == 0; i++) {
            lua_rawgeti(L, -1, (int)i + 1);
            rc = read_domain_entry(L, path, i + 1, a, certificates);
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    return rc;
}

int config_read_acme(lua_State *L, const char *path, int tls, struct config *config)
{
    struct acme_settings *a;
    int t, rc = -1;

    config_field(L, tls, "acme");
    t = lua_gettop(L);
    if (lua_isnil(L, t)) {
        lua_pop(L, 1);
        return 0;
    }
    if (!lua_istable(L, t)) {
        config_error(path, "setting 'tls.acme' must be a table: { agree_to_terms = true, email = \"...\" }");
        lua_pop(L, 1);
        return -1;
    }
    if (config->tls.acme_webroot != NULL) {
        config_error(path, "setting 'acme_webroot' is for certbot: with 'tls.acme' rsp answers the "
                           "challenges itself, so leave acme_webroot out");
        lua_pop(L, 1);
        return -1;
    }
    a = calloc(1, sizeof *a);
    if (a == NULL) {
        config_error(path, "out of memory");
        lua_pop(L, 1);
        return -1;
    }
    config->tls.acme = a;
    if (config_check_fields(L, path, "tls.acme", acme_fields) == 0 && read_agreement(L, path, t) == 0 &&
        read_texts(L, path, t, a) == 0 && read_challenges(L, path, t, a) == 0 &&
        read_domains(L, path, t, config, a) == 0) {
        /* The http-01 tokens are served from there, as acme_webroot's are. */
        if (asprintf(&config->tls.acme_webroot, "%s/challenges", a->storage) == -1) {
            config->tls.acme_webroot = NULL;
            config_error(path, "out of memory");
        } else {
            rc = 0;
        }
    }
    lua_settop(L, t - 1);
    return rc;
}

void config_free_acme(struct acme_settings *a)
{
    if (a == NULL)
        return;
    for (size_t i = 0; i < a->set_count; i++) {
        for (size_t j = 0; j < a->sets[i].count; j++)
            free(a->sets[i].names[j]);
        free(a->sets[i].names);
    }
    free(a->sets);
    free(a->email);
    free(a->directory);
    free(a->ca_root);
    free(a->storage);
    free(a);
}
