/* fuzz_acme.c -- libFuzzer harness for what the ACME client reads from a
 * CA: the JSON parsers (acme_json.c), the Retry-After reader, and the
 * certificate reader (acme_crypto.c: acme_cert_facts, acme_chain_matches_key).
 *
 * The first byte chooses the reader (its value modulo 7): 0 directory,
 * 1 order, 2 authorization, 3 problem, 4 renewalInfo, 5 Retry-After,
 * 6 a PEM certificate chain; the rest is the body (or header value, or
 * PEM). Besides "no crash, no sanitizer report, no leak", it checks:
 *
 *  - a parser returns 0 or -1; -1 comes with a reason and leaves its struct
 *    zeroed (nothing to free); reading the same bytes again gives the same
 *    result;
 *  - what a parser accepts is what the client may use without looking
 *    again: every URL starts "https://" and has no space or control byte;
 *    at most 100 authorizations and challenges; a token is base64url (it
 *    becomes a file name); an identifier is letters, digits, '-' and '.';
 *    a detail has no control byte and at most 512 bytes; a valid order has
 *    its certificate URL; a renewal window ends after it starts;
 *  - Retry-After is -1 or a finite number >= 0, and -1 for anything that
 *    is neither digits nor starts with a day name;
 *  - a certificate's names are printable ASCII, its ARI certID two
 *    base64url parts joined by one '.', and acme_chain_matches_key says 0
 *    or 1 (1 only for a chain acme_cert_facts reads).
 *
 * Build and run: see fuzz/README.md. */
#include "acme_crypto.h"
#include "acme_json.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "fuzz_acme: property violated: %s\n  ", #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, "\n");                                         \
            abort();                                                       \
        }                                                                  \
    } while (0)

/* True if every byte of the n bytes at p is zero. */
static int zeroed(const void *p, size_t n)
{
    const unsigned char *bytes = p;
    for (size_t i = 0; i < n; i++)
        if (bytes[i] != 0)
            return 0;
    return 1;
}

/* True if text is base64url (letters, digits, '-', '_'), at least one character. */
static int base64url_text(const char *text, size_t length)
{
    if (length == 0)
        return 0;
    for (size_t i = 0; i < length; i++)
        if (!(('A' <= text[i] && text[i] <= 'Z') || ('a' <= text[i] && text[i] <= 'z') ||
              ('0' <= text[i] && text[i] <= '9') || text[i] == '-' || text[i] == '_'))
            return 0;
    return 1;
}

static void check_url(const char *url, const char *what)
{
    CHECK(url != NULL && strncmp(url, "https://", 8) == 0 && strlen(url) > 8, "%s \"%s\"", what,
          url ? url : "(null)");
    for (const char *p = url; *p; p++)
        CHECK((unsigned char)*p > 0x20 && *p != 0x7f, "%s has byte 0x%02x", what, (unsigned char)*p);
}

static void check_detail(const char *detail)
{
    if (detail == NULL)
        return;
    CHECK(strlen(detail) <= ACME_JSON_DETAIL_MAX, "detail of %zu bytes", strlen(detail));
    for (const char *p = detail; *p; p++)
        CHECK((unsigned char)*p >= 0x20 && *p != 0x7f, "detail has byte 0x%02x", (unsigned char)*p);
}

static void check_status(enum acme_status status)
{
    CHECK(status >= ACME_STATUS_UNKNOWN && status <= ACME_REVOKED, "status %d", (int)status);
}

static void fuzz_directory(const char *body, size_t length)
{
    struct acme_directory d;
    const char *why = NULL;
    int r = acme_directory_parse(body, length, &d, &why), again;

    CHECK(r == 0 || (r == -1 && why != NULL && zeroed(&d, sizeof d)), "directory: %d", r);
    if (r == 0) {
        check_url(d.new_nonce, "newNonce");
        check_url(d.new_account, "newAccount");
        check_url(d.new_order, "newOrder");
        if (d.renewal_info != NULL)
            check_url(d.renewal_info, "renewalInfo");
        acme_directory_free(&d);
        CHECK(zeroed(&d, sizeof d), "directory not zeroed by free");
    }
    again = acme_directory_parse(body, length, &d, &why);
    CHECK(again == r, "directory: %d then %d", r, again);
    acme_directory_free(&d);
}

static void fuzz_order(const char *body, size_t length)
{
    struct acme_order o;
    const char *why = NULL;
    int r = acme_order_parse(body, length, &o, &why), again;

    CHECK(r == 0 || (r == -1 && why != NULL && zeroed(&o, sizeof o)), "order: %d", r);
    if (r == 0) {
        check_status(o.status);
        CHECK(o.authorization_count <= ACME_JSON_ITEMS_MAX, "%zu authorizations", o.authorization_count);
        for (size_t i = 0; i < o.authorization_count; i++)
            check_url(o.authorizations[i], "authorization");
        check_url(o.finalize, "finalize");
        if (o.certificate != NULL)
            check_url(o.certificate, "certificate");
        CHECK(o.status != ACME_VALID || o.certificate != NULL, "a valid order without a certificate");
        check_detail(o.error_detail);
        acme_order_free(&o);
    }
    again = acme_order_parse(body, length, &o, &why);
    CHECK(again == r, "order: %d then %d", r, again);
    acme_order_free(&o);
}

static void fuzz_authorization(const char *body, size_t length)
{
    struct acme_authorization a;
    const char *why = NULL;
    int r = acme_authorization_parse(body, length, &a, &why), again;

    CHECK(r == 0 || (r == -1 && why != NULL && zeroed(&a, sizeof a)), "authorization: %d", r);
    if (r == 0) {
        check_status(a.status);
        CHECK(a.identifier != NULL && a.identifier[0] != '\0' && a.identifier[0] != '.' &&
                  strspn(a.identifier, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") ==
                      strlen(a.identifier),
              "identifier \"%s\"", a.identifier ? a.identifier : "(null)");
        CHECK(a.challenge_count <= ACME_JSON_ITEMS_MAX, "%zu challenges", a.challenge_count);
        for (size_t i = 0; i < a.challenge_count; i++) {
            const struct acme_challenge *c = &a.challenges[i];
            CHECK(c->type != NULL && c->type[0] != '\0', "challenge %zu without a type", i);
            check_url(c->url, "challenge url");
            check_status(c->status);
            CHECK(c->token != NULL || (strcmp(c->type, "http-01") != 0 && strcmp(c->type, "tls-alpn-01") != 0 &&
                                       strcmp(c->type, "dns-01") != 0),
                  "a %s challenge without a token", c->type);
            CHECK(c->token == NULL || base64url_text(c->token, strlen(c->token)), "token \"%s\"", c->token);
            check_detail(c->error_detail);
        }
        acme_authorization_free(&a);
    }
    again = acme_authorization_parse(body, length, &a, &why);
    CHECK(again == r, "authorization: %d then %d", r, again);
    acme_authorization_free(&a);
}

static void fuzz_problem(const char *body, size_t length)
{
    struct acme_problem p;
    const char *why = NULL;
    int r = acme_problem_parse(body, length, &p, &why);

    CHECK(r == 0 || (r == -1 && why != NULL && zeroed(&p, sizeof p)), "problem: %d", r);
    if (r == 0) {
        CHECK(p.type != NULL && p.type[0] != '\0', "a problem without a type");
        for (const char *c = p.type; *c; c++)
            CHECK((unsigned char)*c >= 0x20 && *c != 0x7f, "type has byte 0x%02x", (unsigned char)*c);
        check_detail(p.detail);
        acme_problem_free(&p);
    }
}

static void fuzz_renewal_info(const char *body, size_t length)
{
    struct acme_renewal_info info;
    const char *why = NULL;
    int r = acme_renewal_info_parse(body, length, &info, &why);

    CHECK(r == 0 || (r == -1 && why != NULL && zeroed(&info, sizeof info)), "renewalInfo: %d", r);
    CHECK(r != 0 || info.end > info.start, "window %lld to %lld", (long long)info.start, (long long)info.end);
}

static void fuzz_retry_after(const char *value)
{
    double seconds = acme_retry_after(value, (time_t)1700000000);

    CHECK(seconds == -1 || (isfinite(seconds) && seconds >= 0), "Retry-After \"%s\": %f", value, seconds);
    if (seconds != -1) {
        const char *p = value + strspn(value, " \t");
        CHECK((*p >= '0' && *p <= '9') || strchr("SMTWF", *p) != NULL, "Retry-After \"%s\": %f", value, seconds);
    }
}

static void fuzz_certificate(const char *pem, size_t length)
{
    static EVP_PKEY *key;
    struct acme_cert_facts facts;
    int r = acme_cert_facts(pem, length, &facts), match;

    CHECK(r == 0 || (r == -1 && zeroed(&facts, sizeof facts)), "cert_facts: %d", r);
    if (r == 0) {
        for (size_t i = 0; i < facts.name_count; i++) {
            CHECK(facts.names[i] != NULL && facts.names[i][0] != '\0', "empty name %zu", i);
            for (const char *p = facts.names[i]; *p; p++)
                CHECK((unsigned char)*p > 0x20 && *p != 0x7f, "name has byte 0x%02x", (unsigned char)*p);
        }
        if (facts.ari_id != NULL) {
            const char *dot = strchr(facts.ari_id, '.');
            CHECK(dot != NULL && base64url_text(facts.ari_id, (size_t)(dot - facts.ari_id)) &&
                      base64url_text(dot + 1, strlen(dot + 1)),
                  "ARI certID \"%s\"", facts.ari_id);
        }
        acme_cert_facts_free(&facts);
    }
    if (key == NULL)
        key = acme_key_new();       /* kept for the whole run: one key is enough */
    CHECK(key != NULL, "no key");
    match = acme_chain_matches_key(pem, length, key);
    CHECK(match == 0 || (match == 1 && r == 0), "matches_key %d, cert_facts %d", match, r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    char *body;
    size_t length;

    if (len == 0)
        return 0;
    length = len - 1;
    /* An exactly sized copy: ASan sees any read past the end. Retry-After is a C string: it gets
     * its own copy, NUL-terminated. */
    body = malloc(length ? length : 1);
    CHECK(body != NULL, "out of memory");
    memcpy(body, data + 1, length);
    switch (data[0] % 7) {
    case 0: fuzz_directory(body, length); break;
    case 1: fuzz_order(body, length); break;
    case 2: fuzz_authorization(body, length); break;
    case 3: fuzz_problem(body, length); break;
    case 4: fuzz_renewal_info(body, length); break;
    case 5: {
        char *value = strndup(body, length);
        CHECK(value != NULL, "out of memory");
        fuzz_retry_after(value);
        free(value);
        break;
    }
    default: fuzz_certificate(body, length); break;
    }
    free(body);
    return 0;
}
