/* tls.c -- loading certificates into OpenSSL contexts, and choosing one
 * by the name the client asks for (SNI). The transport itself is in
 * tls_transport.c. */
#include "tls.h"
#include "tls_private.h"

#include "acme_certs.h"
#include "config_read.h"
#include "ticket_keys.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Mozilla's "intermediate" configuration: TLS 1.2 with forward-secret
 * AEAD ciphers only, TLS 1.3 with its three standard suites. */
#define TLS12_CIPHERS                                                                 \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"                      \
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"                      \
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"                      \
    "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305"
#define TLS13_SUITES "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
#define TLS_GROUPS "X25519:prime256v1:secp384r1"

struct tls_certificate {
    SSL_CTX *ctx;
    char **names;               /* DNS names it is for, lower case; "*.x.y" wildcards */
    size_t name_count;
};

struct tls_context {
    struct tls_certificate *certs; /* certs[0] is the default */
    size_t count;               /* 0: every certificate comes from ACME (chapter 19) */
    SSL_CTX *base;              /* with count 0, where connections start: no certificate */
};

/* "rsp: PATH: setting 'tls.certificates[N]FIELD': MESSAGE" */
static void cert_error(const char *path, size_t index, const char *field, const char *format, ...)
    __attribute__((format(printf, 4, 5)));
static void cert_error(const char *path, size_t index, const char *field, const char *format, ...)
{
    char message[1024];
    va_list ap;

    va_start(ap, format);
    vsnprintf(message, sizeof message, format, ap);
    va_end(ap);
    config_error(path, "setting 'tls.certificates[%zu]%s': %s", index, field, message);
}

/* The reason OpenSSL gave for its last error, for a message. */
static const char *openssl_reason(void)
{
    unsigned long e = ERR_peek_last_error();
    const char *reason = e != 0 ? ERR_reason_error_string(e) : NULL;

    return reason != NULL ? reason : "unknown error";
}

/* ALPN: h2, then http/1.1, in our order of preference whatever the
 * client's (h2 only with tls.http2). A client that offers neither (only
 * something else) gets no protocol chosen, and speaks HTTP/1.1 or goes
 * away; the handshake is not failed for it (nginx fails it, with a
 * no_application_protocol alert). */
static int choose_protocol(SSL *ssl, const unsigned char **out, unsigned char *out_length,
                           const unsigned char *in, unsigned int in_length, void *arg)
{
    static const unsigned char both[] = "\x02h2\x08http/1.1";
    const unsigned char *ours = tls_offers_h2(ssl) ? both : both + 3;
    unsigned int ours_length = tls_offers_h2(ssl) ? sizeof both - 1 : sizeof both - 4;
    unsigned char *chosen;

    (void)arg;
    if (SSL_select_next_proto(&chosen, out_length, ours, ours_length, in, in_length) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = chosen;
    return SSL_TLSEXT_ERR_OK;
}

static bool name_matches(const char *pattern, const char *name)
{
    const char *dot;

    if (strcasecmp(pattern, name) == 0)
        return true;
    /* "*.example.com" stands for exactly one more label. */
    if (pattern[0] != '*' || pattern[1] != '.')
        return false;
    dot = strchr(name, '.');
    return dot != NULL && dot != name && strcasecmp(dot + 1, pattern + 2) == 0;
}

/* The certificate for `name`: one naming it exactly, else one whose
 * wildcard covers it, else NULL. */
static struct tls_certificate *pick(struct tls_context *t, const char *name)
{
    for (int wildcards = 0; wildcards < 2; wildcards++)
        for (size_t i = 0; i < t->count; i++)
            for (size_t j = 0; j < t->certs[i].name_count; j++) {
                const char *pattern = t->certs[i].names[j];
                if ((pattern[0] == '*') == (wildcards == 1) && name_matches(pattern, name))
                    return &t->certs[i];
            }
    return NULL;
}

/* SNI: runs during the handshake, on the default certificate's context.
 * `arg` is the tls_context: it is alive, because the relay holds the
 * generation it was accepted in until it has read its first request, and
 * the handshake comes before that (and is never done again: no
 * renegotiation). */
static int choose_certificate(SSL *ssl, int *alert, void *arg)
{
    const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    struct tls_context *t = arg;
    struct tls_certificate *c;
    SSL_CTX *ctx = NULL;

    /* A tls-alpn-01 validation already has its certificate. */
    if (acme_certs_is_challenge(SSL_get_SSL_CTX(ssl)))
        return SSL_TLSEXT_ERR_OK;
    if (name != NULL && (c = pick(t, name)) != NULL)
        ctx = c->ctx;
    /* Then what the ACME client keeps (chapter 19); an unknown name gets
     * the default, which is the first of those when tls.certificates is
     * not set. */
    if (ctx == NULL && (name != NULL || t->count == 0))
        ctx = acme_certs_pick(name);
    if (ctx == NULL && t->count == 0) {
        *alert = SSL_AD_UNRECOGNIZED_NAME;
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    if (ctx == NULL)
        return name == NULL ? SSL_TLSEXT_ERR_NOACK : SSL_TLSEXT_ERR_OK;
    if (ctx != SSL_get_SSL_CTX(ssl) && SSL_set_SSL_CTX(ssl, ctx) == NULL)
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    return SSL_TLSEXT_ERR_OK;
}

/* The host name of a ClientHello's server_name extension (RFC 6066 3),
 * copied into out (size bytes), or false if there is none. */
static bool hello_server_name(SSL *ssl, char *out, size_t size)
{
    const unsigned char *p;
    size_t length, list, name;

    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p, &length) != 1 || length < 5)
        return false;
    list = (size_t)p[0] << 8 | p[1];
    name = (size_t)p[3] << 8 | p[4];
    if (list != length - 2 || p[2] != TLSEXT_NAMETYPE_host_name || name == 0 || name >= size ||
        name > length - 5 || memchr(p + 5, '\0', name) != NULL)
        return false;
    memcpy(out, p + 5, name);
    out[name] = '\0';
    return true;
}

/* True if the ClientHello offers the ALPN protocol acme-tls/1 (RFC 8737):
 * an ACME server validating a name with tls-alpn-01. */
static bool hello_wants_acme(SSL *ssl)
{
    static const unsigned char acme[] = "\x0a" "acme-tls/1";
    const unsigned char *p;
    size_t length;

    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &p,
                                  &length) != 1 || length < 2)
        return false;
    for (size_t at = 2; at < length; at += 1 + (size_t)p[at])
        if (at + sizeof acme - 1 <= length && memcmp(p + at, acme, sizeof acme - 1) == 0)
            return true;
    return false;
}

/* Runs first in every handshake: a tls-alpn-01 validation gets the
 * challenge certificate the ACME client left for its name. Anything else
 * goes on to SNI (choose_certificate). */
static int look_at_hello(SSL *ssl, int *alert, void *arg)
{
    char name[256];
    SSL_CTX *challenge;

    (void)alert;
    (void)arg;
    if (!hello_wants_acme(ssl) || !hello_server_name(ssl, name, sizeof name) ||
        (challenge = acme_certs_challenge(name)) == NULL)
        return SSL_CLIENT_HELLO_SUCCESS;
    if (SSL_set_SSL_CTX(ssl, challenge) == NULL) {
        SSL_CTX_free(challenge);
        return SSL_CLIENT_HELLO_ERROR;
    }
    SSL_CTX_free(challenge); /* the connection holds it now */
    return SSL_CLIENT_HELLO_SUCCESS;
}

SSL_CTX *tls_new_server_ctx(void)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

    if (ctx == NULL)
        return NULL;
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
        SSL_CTX_set_cipher_list(ctx, TLS12_CIPHERS) != 1 ||
        SSL_CTX_set_ciphersuites(ctx, TLS13_SUITES) != 1 ||
        SSL_CTX_set1_groups_list(ctx, TLS_GROUPS) != 1 || SSL_CTX_set_dh_auto(ctx, 1) != 1 ||
        SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"rsp", 3) != 1 ||
        ticket_keys_use(ctx) != 1) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    /* No renegotiation (a client could make us do handshakes for ever);
     * a peer that closes without close_notify is an end of stream, not an
     * error (HTTP's own framing tells a cut-off response). */
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF |
                                 SSL_OP_NO_COMPRESSION);
    /* Partial writes, from a write queue that may move in memory between
     * two tries; buffers freed while a connection is idle. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_alpn_select_cb(ctx, choose_protocol, NULL);
    return ctx;
}

static int add_name(struct tls_certificate *c, const char *name, size_t length)
{
    char **names, *copy;

    if (length == 0 || memchr(name, '\0', length) != NULL)
        return 0; /* not a name anyone can ask for */
    names = realloc(c->names, (c->name_count + 1) * sizeof *names);
    if (names == NULL)
        return -1;
    c->names = names;
    copy = strndup(name, length);
    if (copy == NULL)
        return -1;
    for (char *p = copy; *p != '\0'; p++)
        *p = (char)tolower((unsigned char)*p);
    c->names[c->name_count++] = copy;
    return 0;
}

/* The DNS names of the subjectAltName extension; with none, the common
 * name, as old certificates have it. */
static int collect_names(X509 *x, struct tls_certificate *c)
{
    GENERAL_NAMES *names = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    int rc = 0;

    for (int i = 0; names != NULL && i < sk_GENERAL_NAME_num(names) && rc == 0; i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
        if (g->type == GEN_DNS)
            rc = add_name(c, (const char *)ASN1_STRING_get0_data(g->d.dNSName),
                          (size_t)ASN1_STRING_length(g->d.dNSName));
    }
    GENERAL_NAMES_free(names);
    if (rc == 0 && c->name_count == 0) {
        X509_NAME *subject = X509_get_subject_name(x);
        int at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
        if (at >= 0) {
            ASN1_STRING *cn = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));
            rc = add_name(c, (const char *)ASN1_STRING_get0_data(cn), (size_t)ASN1_STRING_length(cn));
        }
    }
    return rc;
}

static void format_time(const ASN1_TIME *t, char *out, size_t size)
{
    struct tm tm;

    if (ASN1_TIME_to_tm(t, &tm) != 1 || strftime(out, size, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
        snprintf(out, size, "(an unreadable date)");
}

/* An expired certificate is served (the operator may be renewing it right
 * now, and refusing to start would take plain HTTP down too), but said. */
static void warn_about_dates(const char *path, size_t index, const struct tls_files *f, X509 *x)
{
    char when[64];

    if (X509_cmp_current_time(X509_get0_notAfter(x)) < 0) {
        format_time(X509_get0_notAfter(x), when, sizeof when);
        cert_error(path, index, ".cert", "warning: %s expired on %s; serving it anyway, but clients "
                   "will refuse it", f->cert, when);
    } else if (X509_cmp_current_time(X509_get0_notBefore(x)) > 0) {
        format_time(X509_get0_notBefore(x), when, sizeof when);
        cert_error(path, index, ".cert", "warning: %s is not valid before %s; serving it anyway",
                   f->cert, when);
    }
}

/* Never ask for a passphrase: rsp runs unattended. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return 0;
}

/* Reads the private key of f into *key. Returns 0, or -1 after saying why. */
static int read_key(const char *path, size_t index, const struct tls_files *f, EVP_PKEY **key)
{
    FILE *file = fopen(f->key, "r");

    if (file == NULL) {
        cert_error(path, index, ".key", "cannot open %s: %s", f->key, strerror(errno));
        return -1;
    }
    *key = PEM_read_PrivateKey(file, NULL, no_passphrase, NULL);
    if (fclose(file) != 0 && *key != NULL) {
        cert_error(path, index, ".key", "cannot read %s: %s", f->key, strerror(errno));
        EVP_PKEY_free(*key);
        return -1;
    }
    if (*key == NULL) {
        cert_error(path, index, ".key", "%s holds no PEM private key (or an encrypted one: rsp "
                   "takes keys without a passphrase)", f->key);
        return -1;
    }
    return 0;
}

/* Loads certificate `index` (counted from 1, as Lua does) into c. */
static int load_certificate(const char *path, size_t index, const struct tls_files *f,
                            struct tls_certificate *c)
{
    EVP_PKEY *key = NULL;
    X509 *x;
    FILE *file;

    c->ctx = tls_new_server_ctx();
    if (c->ctx == NULL) {
        cert_error(path, index, "", "cannot set up TLS: %s", openssl_reason());
        return -1;
    }
    /* fopen first: "No such file" or "Permission denied" says more than
     * OpenSSL's "system lib". */
    file = fopen(f->cert, "r");
    if (file == NULL) {
        cert_error(path, index, ".cert", "cannot open %s: %s", f->cert, strerror(errno));
        return -1;
    }
    if (fclose(file) != 0) {
        cert_error(path, index, ".cert", "cannot read %s: %s", f->cert, strerror(errno));
        return -1;
    }
    if (SSL_CTX_use_certificate_chain_file(c->ctx, f->cert) != 1) {
        cert_error(path, index, ".cert", "%s holds no PEM certificate (%s)", f->cert, openssl_reason());
        return -1;
    }
    x = SSL_CTX_get0_certificate(c->ctx);
    if (read_key(path, index, f, &key) == -1)
        return -1;
    if (X509_check_private_key(x, key) != 1) {
        cert_error(path, index, "", "the key in %s does not match the certificate in %s", f->key,
                   f->cert);
        EVP_PKEY_free(key);
        return -1;
    }
    if (SSL_CTX_use_PrivateKey(c->ctx, key) != 1) {
        cert_error(path, index, ".key", "cannot use the key in %s (%s)", f->key, openssl_reason());
        EVP_PKEY_free(key);
        return -1;
    }
    EVP_PKEY_free(key); /* the context holds its own reference */
    if (collect_names(x, c) == -1) {
        config_error(path, "out of memory");
        return -1;
    }
    warn_about_dates(path, index, f, x);
    return 0;
}

struct tls_context *tls_context_load(const char *path, const struct tls_files *files, size_t count)
{
    struct tls_context *t;

    /* Made before the first fork already (rsp.c); not so for rsp -t. */
    if (ticket_keys_init() == -1) {
        config_error(path, "setting 'tls': cannot make the session-ticket keys");
        return NULL;
    }
    t = calloc(1, sizeof *t);
    if (t == NULL || (count > 0 && (t->certs = calloc(count, sizeof *t->certs)) == NULL)) {
        free(t);
        config_error(path, "out of memory");
        return NULL;
    }
    if (count == 0 && (t->base = tls_new_server_ctx()) == NULL) {
        config_error(path, "setting 'tls': cannot set up TLS: %s", openssl_reason());
        tls_context_free(t);
        return NULL;
    }
    for (t->count = 0; t->count < count; t->count++) {
        if (load_certificate(path, t->count + 1, &files[t->count], &t->certs[t->count]) == -1) {
            t->count++; /* free what it set up, too */
            tls_context_free(t);
            ERR_clear_error();
            return NULL;
        }
    }
    SSL_CTX_set_tlsext_servername_callback(tls_default_ctx(t), choose_certificate);
    SSL_CTX_set_tlsext_servername_arg(tls_default_ctx(t), t);
    SSL_CTX_set_client_hello_cb(tls_default_ctx(t), look_at_hello, NULL);
    ERR_clear_error();
    return t;
}

void tls_context_free(struct tls_context *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->count; i++) {
        SSL_CTX_free(t->certs[i].ctx);
        for (size_t j = 0; j < t->certs[i].name_count; j++)
            free(t->certs[i].names[j]);
        free(t->certs[i].names);
    }
    free(t->certs);
    SSL_CTX_free(t->base);
    free(t);
}

SSL_CTX *tls_default_ctx(struct tls_context *t)
{
    return t->count > 0 ? t->certs[0].ctx : t->base;
}

bool tls_context_covers(const struct tls_context *t, const char *name)
{
    return pick((struct tls_context *)t, name) != NULL;
}
