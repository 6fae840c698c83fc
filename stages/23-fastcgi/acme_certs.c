/* acme_certs.c -- the certificates the ACME client keeps, loaded from its
 * storage into this process, and kept current by watching it (inotify). */
#include "acme_certs.h"

#include "acme_store.h"
#include "config.h"
#include "log.h"
#include "reactor.h"
#include "tls_private.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <unistd.h>

#define ACME_CERTS_DIR "certificates"
#define ACME_ALPN_DIR "challenges/tls-alpn-01"

/* One certificate, as the config's tls.acme.domains names it. */
struct held {
    char **names;               /* names[0] names its files */
    size_t count;
    SSL_CTX *ctx;               /* NULL: none in storage yet */
    time_t not_after;
    unsigned char digest[EVP_MAX_MD_SIZE]; /* of the .crt file loaded: the same file is not loaded twice */
};

static struct {
    char *storage;
    struct held *sets;
    size_t count;
    int inotify;                /* -1: not watching */
    struct epoll_event_handler handler;
} table = { .inotify = -1 };

/* Marks the contexts acme_certs_challenge makes (their ex_data 0). */
static int challenge_marker;

static void held_free(struct held *h)
{
    for (size_t i = 0; i < h->count; i++)
        free(h->names[i]);
    free(h->names);
    SSL_CTX_free(h->ctx);
}

/* The held set named `name`; one already moved over by acme_certs_apply
 * (emptied, no names) is skipped. */
static struct held *find(const char *name)
{
    for (size_t i = 0; i < table.count; i++)
        if (table.sets[i].count > 0 && strcmp(table.sets[i].names[0], name) == 0)
            return &table.sets[i];
    return NULL;
}

/* The certificate chain `chain` and key `key` (PEM) in a new server
 * context; its expiry in *not_after. NULL if they are broken or do not
 * match (*why says which). */
static SSL_CTX *context_from_pem(const char *chain, size_t chain_length, const char *key, size_t key_length,
                                 time_t *not_after, const char **why)
{
    BIO *bio = BIO_new_mem_buf(chain, (int)chain_length);
    SSL_CTX *ctx = tls_new_server_ctx();
    EVP_PKEY *pkey = NULL;
    X509 *x = NULL;
    struct tm tm;

    *why = "out of memory";
    if (bio == NULL || ctx == NULL)
        goto fail;
    *why = "the .crt file holds no PEM certificate";
    if ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) == NULL || SSL_CTX_use_certificate(ctx, x) != 1)
        goto fail;
    if (ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm) != 1)
        goto fail;
    *not_after = timegm(&tm);
    X509_free(x);
    /* The rest of the file is the chain, sent after the certificate. */
    while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL)
        if (SSL_CTX_add0_chain_cert(ctx, x) != 1)
            goto fail;
    ERR_clear_error(); /* the end of the file */
    BIO_free(bio);
    *why = "the .key file holds no PEM private key";
    if ((bio = BIO_new_mem_buf(key, (int)key_length)) == NULL ||
        (pkey = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL)) == NULL || SSL_CTX_use_PrivateKey(ctx, pkey) != 1)
        goto fail;
    *why = "the key does not match the certificate";
    if (SSL_CTX_check_private_key(ctx) != 1)
        goto fail;
    EVP_PKEY_free(pkey);
    BIO_free(bio);
    return ctx;
fail:
    X509_free(x);
    EVP_PKEY_free(pkey);
    BIO_free(bio);
    SSL_CTX_free(ctx);
    ERR_clear_error();
    return NULL;
}

/* Reads h's pair from storage into h if it is new. Returns 1 if loaded,
 * 0 if there is nothing new (or nothing at all), -1 after logging. */
static int load(struct held *h)
{
    char crt_name[PATH_MAX], key_name[PATH_MAX];
    unsigned char digest[EVP_MAX_MD_SIZE];
    size_t crt_length, key_length;
    char *crt, *key = NULL;
    const char *why;
    time_t not_after;
    SSL_CTX *ctx;
    int rc = -1;

    snprintf(crt_name, sizeof crt_name, ACME_CERTS_DIR "/%s.crt", h->names[0]);
    snprintf(key_name, sizeof key_name, ACME_CERTS_DIR "/%s.key", h->names[0]);
    crt = acme_store_read(table.storage, crt_name, &crt_length);
    if (crt == NULL) {
        if (errno == ENOENT)
            return 0;
        log_errno("acme: %s: cannot read %s/%s", h->names[0], table.storage, crt_name);
        return -1;
    }
    if (EVP_Digest(crt, crt_length, digest, NULL, EVP_sha256(), NULL) != 1) {
        log_msg("acme: %s: out of memory", h->names[0]);
    } else if (h->ctx != NULL && memcmp(digest, h->digest, 32) == 0) {
        rc = 0; /* the one already served */
    } else if ((key = acme_store_read(table.storage, key_name, &key_length)) == NULL) {
        log_errno("acme: %s: cannot read %s/%s", h->names[0], table.storage, key_name);
    } else if ((ctx = context_from_pem(crt, crt_length, key, key_length, &not_after, &why)) == NULL) {
        log_msg("acme: %s: not serving the certificate in %s/%s: %s", h->names[0], table.storage, crt_name,
                why);
    } else {
        SSL_CTX_free(h->ctx); /* connections on it keep their own reference */
        h->ctx = ctx;
        h->not_after = not_after;
        memcpy(h->digest, digest, 32);
        rc = 1;
    }
    free(crt);
    if (key != NULL) {
        OPENSSL_cleanse(key, key_length);
        free(key);
    }
    return rc;
}

int acme_certs_reload(const char *name)
{
    struct held *h = find(name);

    return h != NULL ? load(h) : 0;
}

/* Reads what inotify says: a NAME.crt renamed into place (or written)
 * means a new certificate for NAME. */
static void storage_changed(struct epoll_event_handler *self, uint32_t events)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

    (void)self;
    (void)events;
    for (;;) {
        ssize_t n = read(table.inotify, buf, sizeof buf);
        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1 && errno != EAGAIN)
            log_errno("acme: reading inotify");
        if (n <= 0)
            return;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *e = (const struct inotify_event *)p;
            size_t length = e->len > 0 ? strlen(e->name) : 0;

            if (length > 4 && strcmp(e->name + length - 4, ".crt") == 0) {
                char name[256];
                if (length - 4 < sizeof name) {
                    memcpy(name, e->name, length - 4);
                    name[length - 4] = '\0';
                    acme_certs_reload(name);
                }
            }
            p += sizeof *e + e->len;
        }
    }
}

static void unwatch(void)
{
    if (table.inotify == -1)
        return;
    if (reactor_remove(&table.handler) == -1)
        log_errno("acme: epoll_ctl (inotify)");
    if (close(table.inotify) == -1)
        log_errno("acme: close (inotify)");
    table.inotify = -1;
}

/* Watches storage's certificates directory. Returns 0, or -1 after
 * logging (certificates then load at start and reload only). */
static int watch(void)
{
    char path[PATH_MAX];

    table.inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (table.inotify == -1) {
        log_errno("acme: inotify_init1");
        return -1;
    }
    snprintf(path, sizeof path, "%s/" ACME_CERTS_DIR, table.storage);
    table.handler = (struct epoll_event_handler){ table.inotify, storage_changed, NULL };
    if (inotify_add_watch(table.inotify, path, IN_MOVED_TO | IN_CLOSE_WRITE) == -1 ||
        reactor_add(&table.handler, EPOLLIN) == -1) {
        log_errno("acme: cannot watch %s for new certificates", path);
        if (close(table.inotify) == -1)
            log_errno("acme: close (inotify)");
        table.inotify = -1;
        return -1;
    }
    return 0;
}

/* Copies set into h (no certificate yet). Returns 0, or -1. */
static int held_init(struct held *h, const struct acme_domain_set *set)
{
    *h = (struct held){ 0 };
    if ((h->names = calloc(set->count, sizeof *h->names)) == NULL)
        return -1;
    for (h->count = 0; h->count < set->count; h->count++)
        if ((h->names[h->count] = strdup(set->names[h->count])) == NULL)
            return -1;
    return 0;
}

/* True if h holds exactly set's names. */
static bool same_names(const struct held *h, const struct acme_domain_set *set)
{
    if (h->count != set->count)
        return false;
    for (size_t i = 0; i < set->count; i++)
        if (strcmp(h->names[i], set->names[i]) != 0)
            return false;
    return true;
}

int acme_certs_apply(const struct acme_settings *a)
{
    struct held *sets;
    char *storage;
    bool moved;

    if (a == NULL) {
        acme_certs_close();
        return 0;
    }
    moved = table.storage == NULL || strcmp(table.storage, a->storage) != 0;
    sets = calloc(a->set_count, sizeof *sets);
    storage = strdup(a->storage);
    if ((sets == NULL && a->set_count > 0) || storage == NULL) {
        free(sets);
        free(storage);
        log_msg("acme: out of memory");
        return -1;
    }
    for (size_t i = 0; i < a->set_count; i++) {
        struct held *was = moved ? NULL : find(a->sets[i].names[0]);

        if (was != NULL && same_names(was, &a->sets[i])) {
            sets[i] = *was; /* moved over: still served, not loaded again */
            *was = (struct held){ 0 };
        } else if (held_init(&sets[i], &a->sets[i]) == -1) {
            for (size_t j = 0; j <= i; j++)
                held_free(&sets[j]);
            free(sets);
            free(storage);
            log_msg("acme: out of memory");
            return -1;
        }
    }
    for (size_t i = 0; i < table.count; i++)
        held_free(&table.sets[i]);
    free(table.sets);
    free(table.storage);
    table.sets = sets;
    table.count = a->set_count;
    table.storage = storage;
    if (moved || table.inotify == -1) {
        unwatch();
        watch();
    }
    for (size_t i = 0; i < table.count; i++)
        load(&table.sets[i]);
    return 0;
}

SSL_CTX *acme_certs_pick(const char *name)
{
    for (size_t i = 0; i < table.count; i++) {
        const struct held *h = &table.sets[i];
        if (h->ctx == NULL)
            continue;
        if (name == NULL)
            return h->ctx;
        for (size_t j = 0; j < h->count; j++)
            if (strcasecmp(h->names[j], name) == 0)
                return h->ctx;
    }
    return NULL;
}

time_t acme_certs_not_after(const char *name)
{
    const struct held *h = find(name);

    return h != NULL && h->ctx != NULL ? h->not_after : 0;
}

/* ALPN for a challenge handshake: acme-tls/1 and nothing else. */
static int choose_acme(SSL *ssl, const unsigned char **out, unsigned char *out_length, const unsigned char *in,
                       unsigned int in_length, void *arg)
{
    static const unsigned char ours[] = "\x0a" "acme-tls/1";
    unsigned char *chosen;

    (void)ssl;
    (void)arg;
    if (SSL_select_next_proto(&chosen, out_length, ours, sizeof ours - 1, in, in_length) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    *out = chosen;
    return SSL_TLSEXT_ERR_OK;
}

/* True if name is one of ours: a storage file name can be made of it. */
static bool held_name(const char *name)
{
    for (size_t i = 0; i < table.count; i++)
        for (size_t j = 0; j < table.sets[i].count; j++)
            if (strcasecmp(table.sets[i].names[j], name) == 0)
                return true;
    return false;
}

SSL_CTX *acme_certs_challenge(const char *name)
{
    char file[PATH_MAX], lower[256];
    const char *why, *key;
    time_t not_after;
    size_t length;
    SSL_CTX *ctx;
    char *pem;

    /* The name comes from a stranger's ClientHello: only a name of ours
     * (so no '/', no "..") becomes part of a path. */
    if (table.storage == NULL || strlen(name) >= sizeof lower || !held_name(name))
        return NULL;
    for (size_t i = 0; i <= strlen(name); i++)
        lower[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
    snprintf(file, sizeof file, ACME_ALPN_DIR "/%s.pem", lower);
    pem = acme_store_read(table.storage, file, &length);
    if (pem == NULL)
        return NULL;
    /* The file holds the certificate, then its key. */
    key = strstr(pem, "-----BEGIN PRIVATE KEY-----");
    ctx = key != NULL ? context_from_pem(pem, (size_t)(key - pem), key, length - (size_t)(key - pem), &not_after,
                                         &why)
                      : NULL;
    if (ctx == NULL)
        log_msg("acme: %s: the tls-alpn-01 certificate in %s/%s cannot be used", lower, table.storage, file);
    else if (SSL_CTX_set_ex_data(ctx, 0, &challenge_marker) != 1) {
        SSL_CTX_free(ctx);
        ctx = NULL;
    } else {
        SSL_CTX_set_alpn_select_cb(ctx, choose_acme, NULL);
    }
    OPENSSL_cleanse(pem, length);
    free(pem);
    return ctx;
}

bool acme_certs_is_challenge(const SSL_CTX *ctx)
{
    return ctx != NULL && SSL_CTX_get_ex_data(ctx, 0) == &challenge_marker;
}

void acme_certs_close(void)
{
    unwatch();
    for (size_t i = 0; i < table.count; i++)
        held_free(&table.sets[i]);
    free(table.sets);
    free(table.storage);
    table.sets = NULL;
    table.count = 0;
    table.storage = NULL;
}
