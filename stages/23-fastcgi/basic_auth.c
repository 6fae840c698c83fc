/* basic_auth.c -- htpasswd files and the check of Basic credentials
 * (basic_auth.h): crypt_rn from libcrypt, and a per-process cache of the
 * SHA-256 of Authorization values verified in the last minute. */
#define _GNU_SOURCE
#include "basic_auth.h"

#include "config_read.h"
#include "reactor.h"

#include <crypt.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A user name and a password each take at most this many bytes; a header
 * value at most the base64 of both and the colon. */
#define AUTH_NAME_MAX 256
#define AUTH_PASSWORD_MAX 1024
#define AUTH_VALUE_MAX (6 + 4 * ((AUTH_NAME_MAX + AUTH_PASSWORD_MAX + 1 + 2) / 3))

/* The cache: this many verified values, each trusted for this long. */
#define AUTH_CACHE_SLOTS 1024
#define AUTH_CACHE_SECONDS 60.0

struct cache_entry {
    unsigned char digest[32];   /* SHA-256 of the file's reading (load) and the value */
    double verified;            /* reactor time; 0: empty */
};

static struct cache_entry cache[AUTH_CACHE_SLOTS];

/* True if hash is of a kind crypt(3) here does, and one we accept. */
static bool accepted_hash(const char *hash)
{
    return strncmp(hash, "$2b$", 4) == 0 || strncmp(hash, "$2y$", 4) == 0 ||
           strncmp(hash, "$6$", 3) == 0 || strncmp(hash, "$y$", 3) == 0;
}

/* Whether hash, accepted_hash's kind, is whole: bcrypt's 60 characters,
 * or for sha512crypt and yescrypt "$ID$[PARAMS$]SALT$HASH" with a hash
 * after the last '$', in crypt(3)'s alphabet. A hash cut short (or one
 * with a stray space) would refuse every password in silence. */
static bool complete_hash(const char *hash)
{
    size_t dollars = 0;
    const char *last = strrchr(hash, '$');

    for (const char *c = hash; *c != '\0'; c++) {
        if (*c == '$')
            dollars++;
        else if (strchr("./=,", *c) == NULL && !(*c >= '0' && *c <= '9') && !(*c >= 'a' && *c <= 'z') &&
                 !(*c >= 'A' && *c <= 'Z'))
            return false;
    }
    if (hash[1] == '2')
        return strlen(hash) == 60 && dollars == 3;
    return dollars >= 3 && last[1] != '\0';
}

/* Whether auth already has a user called name. */
static bool has_user(const struct basic_auth *auth, const char *name, size_t name_length)
{
    for (size_t i = 0; i < auth->user_count; i++)
        if (strlen(auth->users[i].name) == name_length && memcmp(auth->users[i].name, name, name_length) == 0)
            return true;
    return false;
}

/* Adds a user to auth. Returns 0, or -1 if out of memory. */
static int add_user(struct basic_auth *auth, const char *name, size_t name_length, const char *hash)
{
    struct htpasswd_user *users = realloc(auth->users, (auth->user_count + 1) * sizeof *users);

    if (users == NULL)
        return -1;
    auth->users = users;
    users[auth->user_count].name = strndup(name, name_length);
    users[auth->user_count].hash = strdup(hash);
    if (users[auth->user_count].name == NULL || users[auth->user_count].hash == NULL) {
        free(users[auth->user_count].name);
        free(users[auth->user_count].hash);
        return -1;
    }
    auth->user_count++;
    return 0;
}

/* One line of the file (its newline cut). Returns 0, or -1 after a
 * config error. */
static int read_line(const char *config_path, const char *setting, struct basic_auth *auth,
                     unsigned number, char *line)
{
    size_t length = strlen(line);
    char *colon;

    if (length > 0 && line[length - 1] == '\r')
        line[--length] = '\0';
    if (length == 0 || line[0] == '#')
        return 0;
    colon = strchr(line, ':');
    if (colon == NULL || colon == line || colon - line > AUTH_NAME_MAX) {
        config_error(config_path, "setting '%s.users': %s line %u is not user:hash", setting,
                     auth->users_path, number);
        return -1;
    }
    if (!accepted_hash(colon + 1)) {
        config_error(config_path, "setting '%s.users': %s line %u, user '%.*s': the hash is not "
                                  "bcrypt ($2b$, $2y$), sha512crypt ($6$) or yescrypt ($y$); "
                                  "plain, MD5 ($apr1$, $1$) and DES are refused",
                     setting, auth->users_path, number, (int)(colon - line), line);
        return -1;
    }
    if (!complete_hash(colon + 1)) {
        config_error(config_path, "setting '%s.users': %s line %u, user '%.*s': the hash is cut short "
                                  "or has a character a crypt(3) hash does not",
                     setting, auth->users_path, number, (int)(colon - line), line);
        return -1;
    }
    if (has_user(auth, line, (size_t)(colon - line))) {
        config_error(config_path, "setting '%s.users': %s line %u: user '%.*s' is there twice", setting,
                     auth->users_path, number, (int)(colon - line), line);
        return -1;
    }
    if (add_user(auth, line, (size_t)(colon - line), colon + 1) == -1) {
        config_error(config_path, "out of memory");
        return -1;
    }
    return 0;
}

int basic_auth_load(const char *config_path, const char *setting, struct basic_auth *auth)
{
    FILE *f = fopen(auth->users_path, "re");
    char *line = NULL;
    size_t size = 0;
    unsigned number = 0;
    int rc = 0;
    static unsigned long loads;

    auth->load = ++loads;
    if (f == NULL) {
        config_error(config_path, "setting '%s.users': cannot open %s: %s", setting,
                     auth->users_path, strerror(errno));
        return -1;
    }
    for (;;) {
        errno = 0;
        ssize_t n = getline(&line, &size, f);
        if (n == -1) {
            if (errno != 0) {
                config_error(config_path, "setting '%s.users': cannot read %s: %s", setting,
                             auth->users_path, strerror(errno));
                rc = -1;
            }
            break;
        }
        number++;
        if (n > 0 && line[n - 1] == '\n')
            line[n - 1] = '\0';
        if (read_line(config_path, setting, auth, number, line) == -1) {
            rc = -1;
            break;
        }
    }
    free(line);
    fclose(f);
    if (rc == 0 && auth->user_count == 0) {
        config_error(config_path, "setting '%s.users': %s has no users", setting, auth->users_path);
        rc = -1;
    }
    return rc;
}

void basic_auth_challenge(struct basic_auth *auth)
{
    snprintf(auth->challenge, sizeof auth->challenge,
             "WWW-Authenticate: Basic realm=\"%s\", charset=\"UTF-8\"\r\n", auth->realm);
}

/* The value of a base64 digit, or -1. */
static int digit(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decodes strict base64 (padded, no spaces, zero bits past the end) of
 * length bytes into out. Returns the length decoded, or -1. */
static long decode_base64(const char *in, size_t length, char *out, size_t size)
{
    size_t n = 0;

    if (length == 0 || length % 4 != 0 || length / 4 * 3 > size)
        return -1;
    for (size_t i = 0; i < length; i += 4) {
        int d[4];
        bool last = i + 4 == length;
        for (int j = 0; j < 4; j++)
            d[j] = digit(in[i + j]);
        if (d[0] < 0 || d[1] < 0)
            return -1;
        if (last && in[i + 2] == '=' && in[i + 3] == '=') {
            if (d[1] & 0x0f)
                return -1;
            out[n++] = (char)(d[0] << 2 | d[1] >> 4);
        } else if (last && in[i + 3] == '=') {
            if (d[2] < 0 || (d[2] & 0x03))
                return -1;
            out[n++] = (char)(d[0] << 2 | d[1] >> 4);
            out[n++] = (char)((d[1] & 0x0f) << 4 | d[2] >> 2);
        } else {
            if (d[2] < 0 || d[3] < 0)
                return -1;
            out[n++] = (char)(d[0] << 2 | d[1] >> 4);
            out[n++] = (char)((d[1] & 0x0f) << 4 | d[2] >> 2);
            out[n++] = (char)((d[2] & 0x03) << 6 | d[3]);
        }
    }
    return (long)n;
}

/* The cache's key for value under auth. Returns 0, or -1. */
static int cache_key(const struct basic_auth *auth, const char *value, size_t length,
                     unsigned char digest[32])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned int n = 0;
    int ok = md != NULL && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 &&
             EVP_DigestUpdate(md, &auth->load, sizeof auth->load) == 1 &&
             EVP_DigestUpdate(md, value, length) == 1 && EVP_DigestFinal_ex(md, digest, &n) == 1;

    EVP_MD_CTX_free(md);
    return ok && n == 32 ? 0 : -1;
}

/* The slot key may be in: the digest's first bytes pick it. */
static struct cache_entry *cache_slot(const unsigned char digest[32])
{
    unsigned index = (unsigned)digest[0] | (unsigned)digest[1] << 8;

    return &cache[index % AUTH_CACHE_SLOTS];
}

/* True if user's password is password (crypt_rn; the hashes compared in
 * constant time). */
static bool password_matches(const struct htpasswd_user *user, const char *password)
{
    struct crypt_data *data = calloc(1, sizeof *data);
    bool ok = false;

    if (data == NULL)
        return false;
    const char *hash = crypt_rn(password, user->hash, data, sizeof *data);
    if (hash != NULL && hash[0] != '*' && strlen(hash) == strlen(user->hash))
        ok = CRYPTO_memcmp(hash, user->hash, strlen(hash)) == 0;
    OPENSSL_cleanse(data, sizeof *data);
    free(data);
    return ok;
}

/* Checks decoded "user:password" (split at the first colon). */
static bool credentials_match(const struct basic_auth *auth, char *text, size_t length)
{
    char *colon = memchr(text, ':', length);

    if (colon == NULL || colon == text || colon - text > AUTH_NAME_MAX ||
        length - (size_t)(colon - text) - 1 > AUTH_PASSWORD_MAX || memchr(text, '\0', length) != NULL)
        return false;
    *colon = '\0';
    text[length] = '\0';
    for (size_t i = 0; i < auth->user_count; i++)
        if (strcmp(auth->users[i].name, text) == 0)
            return password_matches(&auth->users[i], colon + 1);
    /* An unknown user costs a hash as a known one does, so the time of a
     * 401 does not tell which names exist. */
    if (auth->user_count > 0)
        (void)password_matches(&auth->users[0], colon + 1);
    return false;
}

bool basic_auth_verify(const struct basic_auth *auth, const char *value, size_t length)
{
    char decoded[AUTH_VALUE_MAX];
    unsigned char digest[32];
    struct cache_entry *slot = NULL;
    double now = reactor_now();
    bool ok;

    if (value == NULL || length < 7 || length > AUTH_VALUE_MAX || strncasecmp(value, "Basic ", 6) != 0)
        return false;
    if (cache_key(auth, value, length, digest) == 0) {
        slot = cache_slot(digest);
        if (slot->verified > 0 && now - slot->verified < AUTH_CACHE_SECONDS &&
            CRYPTO_memcmp(slot->digest, digest, sizeof digest) == 0)
            return true;
    }
    long n = decode_base64(value + 6, length - 6, decoded, sizeof decoded - 1);
    ok = n > 0 && credentials_match(auth, decoded, (size_t)n);
    OPENSSL_cleanse(decoded, sizeof decoded);
    if (ok && slot != NULL) {
        memcpy(slot->digest, digest, sizeof digest);
        slot->verified = now;
    }
    return ok;
}
