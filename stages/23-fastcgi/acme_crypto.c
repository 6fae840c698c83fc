/* acme_crypto.c -- keys, JWS, CSR and certificates for the ACME client, on OpenSSL 3. */
#define _GNU_SOURCE /* asprintf, timegm */
#include "acme_crypto.h"

#include <jansson.h>
#include <limits.h>
#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/obj_mac.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define P256_BYTES 32           /* a coordinate, or half an ES256 signature */
#define CN_MAX 64               /* ub-common-name (RFC 5280) */
#define ACME_IDENTIFIER_OID "1.3.6.1.5.5.7.1.31"
#define ALPN_VALIDITY (7 * 24 * 3600)

/* OpenSSL's base64 works on ints: encode in pieces of this many bytes (a multiple of 3). */
#define BASE64_PIECE (3 * 1024 * 1024)

char *acme_base64url(const void *data, size_t length)
{
    const unsigned char *in = data;
    size_t size = length / 3 * 4 + 5, at = 0;
    char *out;

    if (length > (SIZE_MAX - 5) / 4 * 3)
        return NULL;
    out = malloc(size);
    if (out == NULL)
        return NULL;
    for (size_t done = 0; done < length;) {
        size_t piece = length - done < BASE64_PIECE ? length - done : BASE64_PIECE;
        at += (size_t)EVP_EncodeBlock((unsigned char *)out + at, in + done, (int)piece);
        done += piece;
    }
    out[at] = '\0';
    /* Standard base64 to base64url (RFC 4648 5), padding dropped. */
    while (at > 0 && out[at - 1] == '=')
        out[--at] = '\0';
    for (size_t i = 0; i < at; i++) {
        if (out[i] == '+')
            out[i] = '-';
        else if (out[i] == '/')
            out[i] = '_';
    }
    return out;
}

EVP_PKEY *acme_key_new(void)
{
    return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
}

/* A PEM password callback that has none: an encrypted key is refused, never prompted for. */
static int no_password(char *buf, int size, int rwflag, void *data)
{
    (void)buf, (void)size, (void)rwflag, (void)data;
    return -1;
}

/* True if key is an EC key on P-256. */
static int is_p256(EVP_PKEY *key)
{
    char group[64];
    size_t group_length;

    return EVP_PKEY_is_a(key, "EC") &&
           EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group,
                                          &group_length) == 1 &&
           strcmp(group, SN_X9_62_prime256v1) == 0;
}

/* A read-only memory BIO over length bytes, or NULL. */
static BIO *memory_bio(const char *data, size_t length)
{
    if (length > INT_MAX)
        return NULL;
    return BIO_new_mem_buf(data, (int)length);
}

EVP_PKEY *acme_key_parse(const char *pem, size_t length)
{
    BIO *bio = memory_bio(pem, length);
    EVP_PKEY *key;

    if (bio == NULL)
        return NULL;
    key = PEM_read_bio_PrivateKey(bio, NULL, no_password, NULL);
    BIO_free(bio);
    if (key != NULL && !is_p256(key)) {
        EVP_PKEY_free(key);
        key = NULL;
    }
    ERR_clear_error();
    return key;
}

/* What was written to a memory BIO, as a malloc'd string, *length set (if not NULL); or NULL. */
static char *bio_string(BIO *bio, size_t *length)
{
    char *data, *copy;
    long size = BIO_get_mem_data(bio, &data);

    if (size < 0)
        return NULL;
    copy = malloc((size_t)size + 1);
    if (copy == NULL)
        return NULL;
    memcpy(copy, data, (size_t)size);
    copy[size] = '\0';
    if (length != NULL)
        *length = (size_t)size;
    return copy;
}

char *acme_key_pem(EVP_PKEY *key, size_t *length)
{
    BIO *bio = BIO_new(BIO_s_mem());
    char *pem = NULL;

    if (bio == NULL)
        return NULL;
    if (PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL) == 1)
        pem = bio_string(bio, length);
    BIO_free(bio);
    return pem;
}

/* base64url of a big number, left-padded to `bytes` bytes, or NULL. */
static char *bignum_base64url(const BIGNUM *number, int bytes)
{
    unsigned char raw[P256_BYTES];

    if (bytes > (int)sizeof raw || BN_bn2binpad(number, raw, bytes) != bytes)
        return NULL;
    return acme_base64url(raw, (size_t)bytes);
}

char *acme_jwk(EVP_PKEY *key)
{
    BIGNUM *x = NULL, *y = NULL;
    char *x64 = NULL, *y64 = NULL, *jwk = NULL;

    if (key == NULL || !is_p256(key) || EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, &x) != 1 ||
        EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, &y) != 1)
        goto done;
    x64 = bignum_base64url(x, P256_BYTES);
    y64 = bignum_base64url(y, P256_BYTES);
    /* RFC 7638 3: the required members only, in lexicographic order, no whitespace. x and y are
     * base64url, which needs no JSON escaping. */
    if (x64 != NULL && y64 != NULL &&
        asprintf(&jwk, "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"%s\",\"y\":\"%s\"}", x64, y64) < 0)
        jwk = NULL;
done:
    BN_free(x);
    BN_free(y);
    free(x64);
    free(y64);
    return jwk;
}

char *acme_thumbprint(EVP_PKEY *key)
{
    unsigned char digest[SHA256_DIGEST_LENGTH];
    char *jwk = acme_jwk(key);
    char *thumbprint = NULL;

    if (jwk != NULL && SHA256((const unsigned char *)jwk, strlen(jwk), digest) != NULL)
        thumbprint = acme_base64url(digest, sizeof digest);
    free(jwk);
    return thumbprint;
}

char *acme_key_authorization(const char *token, EVP_PKEY *account_key)
{
    char *thumbprint = acme_thumbprint(account_key);
    char *authorization = NULL;

    if (thumbprint != NULL && asprintf(&authorization, "%s.%s", token, thumbprint) < 0)
        authorization = NULL;
    free(thumbprint);
    return authorization;
}

/* The ES256 signature of input by key as JWS wants it (RFC 7518 3.4): R||S, each 32 bytes,
 * base64url; or NULL. OpenSSL gives an ECDSA-Sig-Value in DER, which is taken apart here. */
static char *es256(EVP_PKEY *key, const char *input)
{
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    unsigned char *der = NULL, raw[2 * P256_BYTES];
    const unsigned char *cursor;
    size_t der_length = 0;
    ECDSA_SIG *signature = NULL;
    const BIGNUM *r, *s;
    char *result = NULL;

    if (context == NULL || EVP_DigestSignInit(context, NULL, EVP_sha256(), NULL, key) != 1 ||
        EVP_DigestSign(context, NULL, &der_length, (const unsigned char *)input, strlen(input)) != 1)
        goto done;
    der = malloc(der_length);
    if (der == NULL ||
        EVP_DigestSign(context, der, &der_length, (const unsigned char *)input, strlen(input)) != 1 ||
        der_length > LONG_MAX)
        goto done;
    cursor = der;
    signature = d2i_ECDSA_SIG(NULL, &cursor, (long)der_length);
    if (signature == NULL)
        goto done;
    ECDSA_SIG_get0(signature, &r, &s);
    if (BN_bn2binpad(r, raw, P256_BYTES) != P256_BYTES || BN_bn2binpad(s, raw + P256_BYTES, P256_BYTES) != P256_BYTES)
        goto done;
    result = acme_base64url(raw, sizeof raw);
done:
    ECDSA_SIG_free(signature);
    free(der);
    EVP_MD_CTX_free(context);
    return result;
}

/* The JWS protected header as compact JSON, or NULL. */
static char *jws_header(EVP_PKEY *key, const char *kid, const char *nonce, const char *url)
{
    json_t *header = json_pack("{s:s, s:s, s:s}", "alg", "ES256", "nonce", nonce, "url", url);
    char *text = NULL;

    if (header == NULL)
        return NULL;
    if (kid != NULL) {
        if (json_object_set_new(header, "kid", json_string(kid)) != 0)
            goto done;
    } else {
        char *jwk_text = acme_jwk(key);
        json_t *jwk = jwk_text != NULL ? json_loads(jwk_text, 0, NULL) : NULL;
        free(jwk_text);
        if (jwk == NULL || json_object_set_new(header, "jwk", jwk) != 0)
            goto done;
    }
    text = json_dumps(header, JSON_COMPACT);
done:
    json_decref(header);
    return text;
}

char *acme_jws(EVP_PKEY *key, const char *kid, const char *nonce, const char *url, const char *payload)
{
    char *header = NULL, *protected64 = NULL, *payload64 = NULL, *input = NULL, *signature = NULL;
    char *jws = NULL;
    json_t *object;

    if (key == NULL || nonce == NULL || url == NULL || payload == NULL)
        return NULL;
    header = jws_header(key, kid, nonce, url);
    if (header == NULL)
        goto done;
    protected64 = acme_base64url(header, strlen(header));
    payload64 = acme_base64url(payload, strlen(payload));
    if (protected64 == NULL || payload64 == NULL || asprintf(&input, "%s.%s", protected64, payload64) < 0) {
        input = NULL;
        goto done;
    }
    signature = es256(key, input);
    if (signature == NULL)
        goto done;
    object = json_pack("{s:s, s:s, s:s}", "protected", protected64, "payload", payload64, "signature",
                       signature);
    if (object != NULL) {
        jws = json_dumps(object, JSON_COMPACT);
        json_decref(object);
    }
done:
    free(header);
    free(protected64);
    free(payload64);
    free(input);
    free(signature);
    return jws;
}

/* GENERAL_NAMES holding each of names as a dNSName, or NULL. */
static GENERAL_NAMES *dns_names(const char *const *names, size_t count)
{
    GENERAL_NAMES *list = sk_GENERAL_NAME_new_null();

    if (list == NULL)
        return NULL;
    for (size_t i = 0; i < count; i++) {
        GENERAL_NAME *entry = GENERAL_NAME_new();
        ASN1_IA5STRING *text = ASN1_IA5STRING_new();
        if (entry == NULL || text == NULL || names[i] == NULL || names[i][0] == '\0' ||
            strlen(names[i]) > INT_MAX || ASN1_STRING_set(text, names[i], (int)strlen(names[i])) != 1) {
            GENERAL_NAME_free(entry);
            ASN1_IA5STRING_free(text);
            GENERAL_NAMES_free(list);
            return NULL;
        }
        GENERAL_NAME_set0_value(entry, GEN_DNS, text);
        if (sk_GENERAL_NAME_push(list, entry) <= 0) {
            GENERAL_NAME_free(entry);
            GENERAL_NAMES_free(list);
            return NULL;
        }
    }
    return list;
}

/* A name with CN = name, or an empty name when name is too long for a CN; NULL on failure. */
static X509_NAME *common_name(const char *name)
{
    X509_NAME *subject = X509_NAME_new();

    if (subject != NULL && strlen(name) <= CN_MAX &&
        X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8, (const unsigned char *)name, -1, -1, 0) != 1) {
        X509_NAME_free(subject);
        return NULL;
    }
    return subject;
}

/* The CSR's extensions: a subjectAltName of names. 0 or -1. */
static int csr_add_names(X509_REQ *request, const char *const *names, size_t count)
{
    GENERAL_NAMES *list = dns_names(names, count);
    STACK_OF(X509_EXTENSION) *extensions = sk_X509_EXTENSION_new_null();
    X509_EXTENSION *san = list != NULL ? X509V3_EXT_i2d(NID_subject_alt_name, 0, list) : NULL;
    int result = -1;

    if (extensions != NULL && san != NULL && sk_X509_EXTENSION_push(extensions, san) > 0) {
        san = NULL;         /* the stack owns it now */
        if (X509_REQ_add_extensions(request, extensions) == 1)
            result = 0;
    }
    X509_EXTENSION_free(san);
    sk_X509_EXTENSION_pop_free(extensions, X509_EXTENSION_free);
    GENERAL_NAMES_free(list);
    return result;
}

/* base64url of a DER encoding i2d gives of object, or NULL. */
#define DER_BASE64URL(i2d, object, out)                                           \
    do {                                                                          \
        unsigned char *der_ = NULL;                                               \
        int der_length_ = i2d(object, &der_);                                     \
        (out) = der_length_ > 0 ? acme_base64url(der_, (size_t)der_length_) : NULL; \
        OPENSSL_free(der_);                                                       \
    } while (0)

char *acme_csr(EVP_PKEY *key, const char *const *names, size_t count)
{
    X509_REQ *request;
    X509_NAME *subject = NULL;
    char *csr = NULL;

    if (key == NULL || names == NULL || count == 0 || names[0] == NULL)
        return NULL;
    request = X509_REQ_new();
    subject = common_name(names[0]);
    if (request == NULL || subject == NULL || X509_REQ_set_version(request, X509_REQ_VERSION_1) != 1 ||
        X509_REQ_set_subject_name(request, subject) != 1 || X509_REQ_set_pubkey(request, key) != 1 ||
        csr_add_names(request, names, count) != 0 || X509_REQ_sign(request, key, EVP_sha256()) <= 0)
        goto done;
    DER_BASE64URL(i2d_X509_REQ, request, csr);
done:
    X509_NAME_free(subject);
    X509_REQ_free(request);
    return csr;
}

/* The acmeIdentifier extension (RFC 8737 3), critical: an OCTET STRING holding
 * SHA-256(key_authorization), DER-encoded inside the extension's own OCTET STRING. NULL on failure. */
static X509_EXTENSION *acme_identifier(const char *key_authorization)
{
    unsigned char digest[SHA256_DIGEST_LENGTH], *der = NULL;
    ASN1_OCTET_STRING *inner = ASN1_OCTET_STRING_new(), *value = ASN1_OCTET_STRING_new();
    ASN1_OBJECT *oid = OBJ_txt2obj(ACME_IDENTIFIER_OID, 1);
    X509_EXTENSION *extension = NULL;
    int der_length;

    if (inner == NULL || value == NULL || oid == NULL ||
        SHA256((const unsigned char *)key_authorization, strlen(key_authorization), digest) == NULL ||
        ASN1_OCTET_STRING_set(inner, digest, sizeof digest) != 1)
        goto done;
    der_length = i2d_ASN1_OCTET_STRING(inner, &der);
    if (der_length <= 0 || ASN1_OCTET_STRING_set(value, der, der_length) != 1)
        goto done;
    extension = X509_EXTENSION_create_by_OBJ(NULL, oid, 1, value);
done:
    OPENSSL_free(der);
    ASN1_OBJECT_free(oid);
    ASN1_OCTET_STRING_free(inner);
    ASN1_OCTET_STRING_free(value);
    return extension;
}

/* A random positive 128-bit serial number for certificate. 0 or -1. */
static int random_serial(X509 *certificate)
{
    unsigned char bytes[16];
    BIGNUM *number = NULL;
    int result = -1;

    if (RAND_bytes(bytes, sizeof bytes) != 1)
        return -1;
    bytes[0] &= 0x7f;           /* positive; and never all zero: */
    bytes[0] |= 0x40;
    number = BN_bin2bn(bytes, sizeof bytes, NULL);
    if (number != NULL && BN_to_ASN1_INTEGER(number, X509_get_serialNumber(certificate)) != NULL)
        result = 0;
    BN_free(number);
    return result;
}

/* The tls-alpn-01 certificate for name, signed by key. NULL on failure. */
static X509 *alpn_certificate(const char *name, const char *key_authorization, EVP_PKEY *key)
{
    X509 *certificate = X509_new();
    X509_NAME *subject = common_name(name);
    GENERAL_NAMES *san = dns_names(&name, 1);
    X509_EXTENSION *identifier = acme_identifier(key_authorization);
    time_t now = time(NULL);
    int ok = certificate != NULL && subject != NULL && san != NULL && identifier != NULL && now != (time_t)-1 &&
             X509_set_version(certificate, X509_VERSION_3) == 1 && random_serial(certificate) == 0 &&
             X509_set_subject_name(certificate, subject) == 1 && X509_set_issuer_name(certificate, subject) == 1 &&
             X509_time_adj_ex(X509_getm_notBefore(certificate), 0, 0, &now) != NULL &&
             X509_time_adj_ex(X509_getm_notAfter(certificate), 0, ALPN_VALIDITY, &now) != NULL &&
             X509_set_pubkey(certificate, key) == 1 &&
             X509_add1_ext_i2d(certificate, NID_subject_alt_name, san, 0, X509V3_ADD_DEFAULT) == 1 &&
             X509_add_ext(certificate, identifier, -1) == 1 && X509_sign(certificate, key, EVP_sha256()) > 0;

    X509_EXTENSION_free(identifier);
    GENERAL_NAMES_free(san);
    X509_NAME_free(subject);
    if (!ok) {
        X509_free(certificate);
        return NULL;
    }
    return certificate;
}

char *acme_alpn_pem(const char *name, const char *key_authorization, size_t *length)
{
    EVP_PKEY *key;
    X509 *certificate = NULL;
    BIO *bio = NULL;
    char *pem = NULL;

    if (name == NULL || name[0] == '\0' || key_authorization == NULL)
        return NULL;
    key = acme_key_new();
    if (key != NULL)
        certificate = alpn_certificate(name, key_authorization, key);
    if (certificate != NULL)
        bio = BIO_new(BIO_s_mem());
    if (bio != NULL && PEM_write_bio_X509(bio, certificate) == 1 &&
        PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL) == 1)
        pem = bio_string(bio, length);
    BIO_free(bio);
    X509_free(certificate);
    EVP_PKEY_free(key);
    return pem;
}

/* The first certificate in a PEM text, or NULL. */
static X509 *first_certificate(const char *pem, size_t length)
{
    BIO *bio = memory_bio(pem, length);
    X509 *certificate = NULL;

    if (bio != NULL) {
        certificate = PEM_read_bio_X509(bio, NULL, no_password, NULL);
        BIO_free(bio);
    }
    ERR_clear_error();
    return certificate;
}

/* *out = an ASN1_TIME as a time_t. 0 or -1. */
static int asn1_time(const ASN1_TIME *when, time_t *out)
{
    struct tm tm;

    memset(&tm, 0, sizeof tm);
    if (when == NULL || ASN1_TIME_to_tm(when, &tm) != 1)
        return -1;
    *out = timegm(&tm);
    return 0;
}

/* A printable ASCII copy of a SAN dNSName, or NULL (an odd byte in it, or out of memory). */
static char *dns_name_copy(const ASN1_IA5STRING *text)
{
    const unsigned char *bytes = ASN1_STRING_get0_data(text);
    int length = ASN1_STRING_length(text);
    char *copy;

    if (length <= 0)
        return NULL;
    for (int i = 0; i < length; i++)
        if (bytes[i] <= 0x20 || bytes[i] >= 0x7f)
            return NULL;
    copy = malloc((size_t)length + 1);
    if (copy != NULL) {
        memcpy(copy, bytes, (size_t)length);
        copy[length] = '\0';
    }
    return copy;
}

/* facts->names = certificate's SAN dNSNames. 0 or -1 (out of memory). */
static int cert_names(X509 *certificate, struct acme_cert_facts *facts)
{
    GENERAL_NAMES *list = X509_get_ext_d2i(certificate, NID_subject_alt_name, NULL, NULL);
    int count = list != NULL ? sk_GENERAL_NAME_num(list) : 0;
    int result = 0;

    if (count > 0) {
        facts->names = calloc((size_t)count, sizeof *facts->names);
        if (facts->names == NULL)
            result = -1;
    }
    for (int i = 0; i < count && result == 0; i++) {
        const GENERAL_NAME *entry = sk_GENERAL_NAME_value(list, i);
        int type;
        const ASN1_IA5STRING *text = GENERAL_NAME_get0_value(entry, &type);
        char *copy;
        if (type != GEN_DNS)
            continue;
        copy = dns_name_copy(text);
        if (copy != NULL)
            facts->names[facts->name_count++] = copy;
    }
    GENERAL_NAMES_free(list);
    return result;
}

/* base64url of the content octets of serial's DER encoding (RFC 9773 4.1), or NULL. */
static char *serial_base64url(const ASN1_INTEGER *serial)
{
    unsigned char *der = NULL;
    const unsigned char *content;
    long content_length;
    int tag, class, der_length = i2d_ASN1_INTEGER(serial, &der);
    char *result = NULL;

    if (der_length > 0) {
        content = der;
        if (!(ASN1_get_object(&content, &content_length, &tag, &class, der_length) & 0x80) &&
            tag == V_ASN1_INTEGER && content_length > 0)
            result = acme_base64url(content, (size_t)content_length);
    }
    OPENSSL_free(der);
    return result;
}

/* facts->ari_id = the certificate's ARI certID, left NULL without an AKI keyIdentifier. 0 or -1. */
static int cert_ari_id(X509 *certificate, struct acme_cert_facts *facts)
{
    const ASN1_OCTET_STRING *key_id = X509_get0_authority_key_id(certificate);
    char *key64, *serial64;
    int result = -1;

    if (key_id == NULL || ASN1_STRING_length(key_id) <= 0)
        return 0;
    key64 = acme_base64url(ASN1_STRING_get0_data(key_id), (size_t)ASN1_STRING_length(key_id));
    serial64 = serial_base64url(X509_get0_serialNumber(certificate));
    if (key64 != NULL && serial64 != NULL && asprintf(&facts->ari_id, "%s.%s", key64, serial64) >= 0)
        result = 0;
    else
        facts->ari_id = NULL;
    free(key64);
    free(serial64);
    return result;
}

int acme_cert_facts(const char *pem, size_t length, struct acme_cert_facts *facts)
{
    X509 *certificate = first_certificate(pem, length);
    int result = -1;

    memset(facts, 0, sizeof *facts);
    if (certificate == NULL)
        return -1;
    if (asn1_time(X509_get0_notBefore(certificate), &facts->not_before) == 0 &&
        asn1_time(X509_get0_notAfter(certificate), &facts->not_after) == 0 &&
        cert_names(certificate, facts) == 0 && cert_ari_id(certificate, facts) == 0)
        result = 0;
    X509_free(certificate);
    ERR_clear_error();
    if (result != 0)
        acme_cert_facts_free(facts);
    return result;
}

void acme_cert_facts_free(struct acme_cert_facts *facts)
{
    for (size_t i = 0; i < facts->name_count; i++)
        free(facts->names[i]);
    free(facts->names);
    free(facts->ari_id);
    memset(facts, 0, sizeof *facts);
}

int acme_chain_matches_key(const char *chain_pem, size_t chain_length, EVP_PKEY *key)
{
    X509 *certificate = first_certificate(chain_pem, chain_length);
    EVP_PKEY *public_key = certificate != NULL ? X509_get0_pubkey(certificate) : NULL;
    int match = public_key != NULL && key != NULL && EVP_PKEY_eq(public_key, key) == 1;

    X509_free(certificate);
    ERR_clear_error();
    return match;
}
