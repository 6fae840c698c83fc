/* acme_client.c -- ordering and renewing certificates from an ACME CA
 * (RFC 8555), one order at a time, on the reactor.
 *
 * An order goes: the directory (once), a nonce, the account (its key kept
 * in storage; asking newAccount again with the same key finds it), the
 * order, for each authorization one challenge answered (http-01: a token
 * file rsp's plain listener serves; tls-alpn-01: a certificate its TLS
 * listener shows to a validation handshake), then finalize with a CSR
 * and download the chain. Every step is one request through http_client,
 * whose answer calls the next step; a step that must wait (the CA is still
 * validating) arms the client's timer. Every POST is a JWS signed with the
 * account key and carrying a fresh nonce from the CA's last answer; a
 * badNonce answer is retried with the nonce it brings. */
#define _GNU_SOURCE /* asprintf */
#include "acme_client.h"

#include "acme_certs.h"
#include "acme_crypto.h"
#include "acme_json.h"
#include "acme_store.h"
#include "config.h"
#include "http_client.h"
#include "log.h"
#include "reactor.h"
#include "timer.h"

#include <openssl/rand.h>

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REQUEST_TIMEOUT 30.0        /* seconds, one request to the CA */
#define MAX_RESPONSE (1u << 20)     /* bytes; a chain is a few KiB */
#define MAX_NONCE_RETRIES 20        /* badNonce answers in a row (a CA testing us rejects half) */
#define MAX_POLLS 120               /* of an authorization or an order */
#define POLL_DELAY 1.0              /* seconds between polls, unless Retry-After says */
#define MAX_POLL_DELAY 60.0
#define FIRST_BACKOFF 60.0          /* after a failure; doubles */
#define MAX_BACKOFF 86400.0         /* a day */
#define CHECK_INTERVAL 43200.0      /* twice a day, renewal is looked at again */
#define CHECK_JITTER 3600.0         /* plus up to an hour */
#define LOCKED_RETRY 10.0           /* seconds, when another process holds a set's lock */

enum set_state { SET_VALID, SET_OBTAINING, SET_RENEWING, SET_FAILED };

/* One certificate: its names (names[0] names its files), what storage
 * holds for it, and when to look at it next. */
struct cert_set {
    char **names;
    size_t count;
    enum set_state state;
    bool queued;                /* waiting for its turn to be worked on */
    bool has_cert;              /* storage holds one (maybe due for renewal) */
    time_t not_before, not_after;
    char *ari_id;               /* RFC 9773 certID of the one held, or NULL */
    char *last_error;
    time_t next_attempt;        /* wall clock; 0: none planned */
    double backoff;             /* the next failure's delay */
    bool told_locked;           /* "another rsp is ordering it" said once */
    struct timer timer;         /* the next check or attempt */
};

/* What the step after a request is given: the CA's answer, 2xx. */
typedef void (*next_step)(const struct http_client_response *r);

static struct {
    struct acme_settings settings; /* a copy: email, directory, ca_root, storage, challenges */
    struct cert_set *sets;
    size_t count;
    bool running;

    EVP_PKEY *account_key;
    char *kid;                  /* the account URL; NULL until known */
    struct acme_directory dir;
    bool have_dir;
    char *nonce;                /* the freshest Replay-Nonce, or NULL */

    /* The job: the set being worked on, and where it is. */
    struct cert_set *working;
    bool checking;              /* only looking at renewal information */
    int lock_fd;
    struct http_client *http;
    next_step then;             /* what the answer to the request under way goes to */
    next_step post_then;        /* what the answer to the POST under way goes to */
    char *post_url, *post_payload; /* the POST under way, for a badNonce retry */
    bool post_jwk;              /* signed with the key itself (newAccount), not the kid */
    int nonce_retries;
    char *order_url;
    struct acme_order order;
    bool have_order;
    size_t authz_at;            /* the authorization being answered */
    char *challenge_file;       /* in storage, removed once the authorization is over */
    const char *challenge_type;
    char *challenge_name;
    int polls;
    EVP_PKEY *cert_key;
    struct timer wait;          /* between polls, and to start a job */
    void (*after_wait)(void);
} client = { .lock_fd = -1 };

static void job_next(void);
static void job_failed(const char *format, ...) __attribute__((format(printf, 1, 2)));
static void order_create(void);
static void authorization_next(void);
static void job_order(const char *replacing);

/* -- time ------------------------------------------------------------- */

static double jitter(double most)
{
    uint32_t r;

    if (RAND_bytes((unsigned char *)&r, sizeof r) != 1)
        r = (uint32_t)getpid();
    return most * (r / 4294967296.0);
}

static void format_date(time_t t, char *out, size_t size)
{
    struct tm tm;

    if (gmtime_r(&t, &tm) == NULL || strftime(out, size, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
        snprintf(out, size, "(unknown)");
}

/* Arms set's timer for wall-clock time `when`. */
static void set_timer_at(struct cert_set *set, time_t when)
{
    double delay = difftime(when, time(NULL));

    if (delay < 0)
        delay = 0;
    if (timer_arm(&set->timer, reactor_now() + delay) == -1)
        log_msg("acme: %s: out of memory: no timer", set->names[0]);
}

/* When set's certificate is due for renewal: a third of its lifetime
 * before it ends. */
static time_t renew_at(const struct cert_set *set)
{
    return set->not_after - (set->not_after - set->not_before) / 3;
}

/* Plans set's next look: at its renewal time, or in twice a day, the
 * sooner. */
static void plan_check(struct cert_set *set)
{
    time_t when = time(NULL) + (time_t)(CHECK_INTERVAL + jitter(CHECK_JITTER));

    if (renew_at(set) < when)
        when = renew_at(set);
    set->next_attempt = 0;
    set_timer_at(set, when);
}

/* -- storage ---------------------------------------------------------- */

static char *store_name(const char *format, const char *name)
{
    char *out;

    return asprintf(&out, format, name) == -1 ? NULL : out;
}

/* Reads what storage holds for set: has_cert, its dates, its ARI id.
 * Returns true if a usable certificate is there. */
static bool read_stored(struct cert_set *set)
{
    struct acme_cert_facts facts;
    char *file = store_name("certificates/%s.crt", set->names[0]), *pem;
    size_t length;

    set->has_cert = false;
    if (file == NULL)
        return false;
    pem = acme_store_read(client.settings.storage, file, &length);
    if (pem == NULL) {
        if (errno != ENOENT)
            log_errno("acme: %s: cannot read %s/%s", set->names[0], client.settings.storage, file);
    } else if (acme_cert_facts(pem, length, &facts) == -1) {
        log_msg("acme: %s: %s/%s holds no certificate: ordering a new one", set->names[0],
                client.settings.storage, file);
    } else {
        set->has_cert = true;
        set->not_before = facts.not_before;
        set->not_after = facts.not_after;
        free(set->ari_id);
        set->ari_id = facts.ari_id;
        facts.ari_id = NULL;
        acme_cert_facts_free(&facts);
    }
    free(pem);
    free(file);
    return set->has_cert;
}

/* Removes the challenge file of the authorization just over. */
static void challenge_clean(void)
{
    if (client.challenge_file == NULL)
        return;
    if (acme_store_remove(client.settings.storage, client.challenge_file) == -1)
        log_errno("acme: cannot remove %s/%s", client.settings.storage, client.challenge_file);
    free(client.challenge_file);
    client.challenge_file = NULL;
    free(client.challenge_name);
    client.challenge_name = NULL;
}

/* -- the job ---------------------------------------------------------- */

/* Forgets the job's order, challenge, lock and request. */
static void job_clear(void)
{
    if (client.http != NULL)
        http_client_cancel(client.http);
    client.http = NULL;
    timer_disarm(&client.wait);
    challenge_clean();
    if (client.lock_fd != -1 && close(client.lock_fd) == -1)
        log_errno("acme: close (lock)");
    client.lock_fd = -1;
    free(client.post_url);
    free(client.post_payload);
    client.post_url = client.post_payload = NULL;
    free(client.order_url);
    client.order_url = NULL;
    if (client.have_order)
        acme_order_free(&client.order);
    client.have_order = false;
    EVP_PKEY_free(client.cert_key);
    client.cert_key = NULL;
    client.working = NULL;
    client.checking = false;
}

/* Ends the job of a set that now holds a good certificate. */
static void job_done(void)
{
    struct cert_set *set = client.working;

    set->state = SET_VALID;
    set->backoff = 0;
    free(set->last_error);
    set->last_error = NULL;
    plan_check(set);
    job_clear();
    job_next();
}

static void job_failed(const char *format, ...)
{
    struct cert_set *set = client.working;
    char message[1024];
    va_list ap;

    va_start(ap, format);
    vsnprintf(message, sizeof message, format, ap);
    va_end(ap);
    if (client.checking) {
        /* Only a look at the renewal window failed: the certificate is as
         * good as it was, and the lifetime rule still holds. */
        log_msg("acme: %s: cannot read the CA's renewal information: %s", set->names[0], message);
        plan_check(set);
        job_clear();
        job_next();
        return;
    }
    set->backoff = set->backoff == 0 ? FIRST_BACKOFF : set->backoff * 2;
    if (set->backoff > MAX_BACKOFF)
        set->backoff = MAX_BACKOFF;
    free(set->last_error);
    set->last_error = strdup(message);
    set->state = SET_FAILED;
    set->next_attempt = time(NULL) + (time_t)set->backoff;
    log_msg("acme: %s: failed: %s; next attempt in %.0f s", set->names[0], message, set->backoff);
    set_timer_at(set, set->next_attempt);
    job_clear();
    job_next();
}

/* Waits `delay` seconds, then calls then(). */
static void job_wait(double delay, void (*then)(void))
{
    client.after_wait = then;
    if (timer_arm(&client.wait, reactor_now() + delay) == -1)
        job_failed("out of memory");
}

static void wait_fired(struct timer *timer)
{
    (void)timer;
    client.after_wait();
}

/* -- requests --------------------------------------------------------- */

/* The Retry-After of r, bounded, or `fallback`. */
static double retry_after(const struct http_client_response *r, double fallback)
{
    double delay = acme_retry_after(http_client_header(r, "Retry-After"), time(NULL));

    if (delay < 0)
        return fallback;
    return delay > MAX_POLL_DELAY ? MAX_POLL_DELAY : delay < POLL_DELAY ? POLL_DELAY : delay;
}

static void post_send(void);

/* An answer of 400 and more: a problem document (RFC 7807) says why. */
static void answered_problem(const struct http_client_response *r)
{
    struct acme_problem problem = { 0 };
    const char *why, *type;

    if (acme_problem_parse(r->body, r->body_length, &problem, &why) == -1) {
        job_failed("the CA answered %d (%s)", r->status, why);
        return;
    }
    type = problem.type != NULL ? problem.type : "";
    if (strcmp(type, "urn:ietf:params:acme:error:badNonce") == 0 && client.post_url != NULL &&
        client.nonce != NULL && ++client.nonce_retries <= MAX_NONCE_RETRIES) {
        acme_problem_free(&problem);
        post_send(); /* with the nonce this answer brought */
        return;
    }
    if (strcmp(type, "urn:ietf:params:acme:error:rateLimited") == 0) {
        double delay = acme_retry_after(http_client_header(r, "Retry-After"), time(NULL));
        if (delay > client.working->backoff)
            client.working->backoff = delay / 2; /* job_failed doubles it */
    }
    job_failed("the CA answered %d: %s%s%s", r->status, problem.detail != NULL ? problem.detail : "",
               problem.detail != NULL ? " " : "", type);
    acme_problem_free(&problem);
}

static void answered(void *closure, const struct http_client_response *r, const char *error)
{
    const char *nonce;

    (void)closure;
    client.http = NULL;
    if (error != NULL) {
        job_failed("%s", error);
        return;
    }
    if ((nonce = http_client_header(r, "Replay-Nonce")) != NULL) {
        free(client.nonce);
        client.nonce = strdup(nonce);
    }
    if (r->status >= 400) {
        answered_problem(r);
        return;
    }
    if (r->status < 200 || r->status > 299) {
        job_failed("the CA answered %d to %s", r->status, client.post_url != NULL ? client.post_url : "a request");
        return;
    }
    client.then(r);
}

/* Sends method url (with a JOSE body for a POST); the answer goes to
 * then. */
static void request(const char *method, const char *url, const char *body, next_step then)
{
    struct http_client_request req = {
        .method = method,
        .url = url,
        .content_type = body != NULL ? "application/jose+json" : NULL,
        .body = body,
        .body_length = body != NULL ? strlen(body) : 0,
        .ca_file = client.settings.ca_root,
        .timeout = REQUEST_TIMEOUT,
        .max_response = MAX_RESPONSE,
    };

    client.then = then;
    client.http = http_client_start(&req, answered, NULL);
    if (client.http == NULL)
        job_failed("cannot ask %s: %s", url, errno == EINVAL ? "not an https:// URL" : strerror(errno));
}

static void nonce_fetched(const struct http_client_response *r)
{
    (void)r;
    if (client.nonce == NULL) {
        job_failed("the CA's newNonce gave no Replay-Nonce");
        return;
    }
    post_send();
}

/* Signs and sends the POST in client.post_url / post_payload, first
 * getting a nonce if there is none. */
static void post_send(void)
{
    char *jws;

    if (client.nonce == NULL) {
        request("HEAD", client.dir.new_nonce, NULL, nonce_fetched);
        return;
    }
    jws = acme_jws(client.account_key, client.post_jwk ? NULL : client.kid, client.nonce, client.post_url,
                   client.post_payload);
    free(client.nonce); /* used up, whatever the answer */
    client.nonce = NULL;
    if (jws == NULL) {
        job_failed("cannot sign a request (out of memory?)");
        return;
    }
    request("POST", client.post_url, jws, client.post_then);
    free(jws);
}

/* POSTs payload ("" for POST-as-GET) to url, signed with the account's
 * kid (or its key, jwk); the answer goes to then. */
static void post(const char *url, const char *payload, bool jwk, next_step then)
{
    free(client.post_url);
    free(client.post_payload);
    client.post_url = strdup(url);
    client.post_payload = strdup(payload);
    client.post_jwk = jwk;
    client.nonce_retries = 0;
    client.post_then = then;
    if (client.post_url == NULL || client.post_payload == NULL) {
        job_failed("out of memory");
        return;
    }
    post_send();
}

/* -- directory and account -------------------------------------------- */

static void account_known(const struct http_client_response *r)
{
    const char *location = http_client_header(r, "Location");

    if (location == NULL || strncmp(location, "https://", 8) != 0) {
        job_failed("the CA's newAccount answer has no account URL (Location)");
        return;
    }
    client.kid = strdup(location);
    if (client.kid == NULL) {
        job_failed("out of memory");
        return;
    }
    log_msg("acme: account %s", client.kid);
    order_create();
}

/* The account key: from storage, or made and stored. Returns 0, or -1
 * after failing the job. */
static int account_key(void)
{
    size_t length;
    char *pem;

    if (client.account_key != NULL)
        return 0;
    pem = acme_store_read(client.settings.storage, "account.key", &length);
    if (pem != NULL) {
        client.account_key = acme_key_parse(pem, length);
        free(pem);
        if (client.account_key == NULL) {
            job_failed("%s/account.key holds no P-256 key: move it away to make a new account",
                       client.settings.storage);
            return -1;
        }
        return 0;
    }
    if (errno != ENOENT) {
        job_failed("cannot read %s/account.key: %s", client.settings.storage, strerror(errno));
        return -1;
    }
    client.account_key = acme_key_new();
    pem = client.account_key != NULL ? acme_key_pem(client.account_key, &length) : NULL;
    if (pem == NULL || acme_store_write(client.settings.storage, "account.key", pem, length) == -1) {
        int error = errno;
        free(pem);
        EVP_PKEY_free(client.account_key);
        client.account_key = NULL;
        job_failed("cannot store a new account key in %s: %s", client.settings.storage, strerror(error));
        return -1;
    }
    free(pem);
    return 0;
}

static void account_ensure(void)
{
    char *payload;

    if (client.kid != NULL) {
        order_create();
        return;
    }
    if (account_key() == -1)
        return;
    payload = acme_account_payload(client.settings.email);
    if (payload == NULL) {
        job_failed("out of memory");
        return;
    }
    post(client.dir.new_account, payload, true, account_known);
    free(payload);
}

static void renewal_info_answered(const struct http_client_response *r);

/* After the directory: a check looks at the renewal information; an
 * order needs the account. */
static void directory_ready(void)
{
    if (client.checking && client.dir.renewal_info == NULL) {
        plan_check(client.working); /* the lifetime rule alone, then */
        job_clear();
        job_next();
        return;
    }
    if (client.checking) {
        char *url;
        if (asprintf(&url, "%s/%s", client.dir.renewal_info, client.working->ari_id) == -1) {
            job_failed("out of memory");
            return;
        }
        request("GET", url, NULL, renewal_info_answered);
        free(url);
        return;
    }
    account_ensure();
}

static void directory_answered(const struct http_client_response *r)
{
    const char *why;

    if (acme_directory_parse(r->body, r->body_length, &client.dir, &why) == -1) {
        job_failed("the directory %s is not an ACME directory: %s", client.settings.directory, why);
        return;
    }
    client.have_dir = true;
    directory_ready();
}

static void directory_ensure(void)
{
    if (client.have_dir)
        directory_ready();
    else
        request("GET", client.settings.directory, NULL, directory_answered);
}

/* -- renewal information (RFC 9773) ------------------------------------ */

static void renewal_info_answered(const struct http_client_response *r)
{
    struct cert_set *set = client.working;
    struct acme_renewal_info info;
    time_t now = time(NULL), when;
    char *replacing;
    const char *why;

    if (acme_renewal_info_parse(r->body, r->body_length, &info, &why) == -1) {
        /* Not worth a failure: the lifetime rule still holds. */
        log_msg("acme: %s: the CA's renewal information is unusable (%s)", set->names[0], why);
        plan_check(set);
        job_clear();
        job_next();
        return;
    }
    /* A moment chosen at random in the window, so that not every client of
     * the CA comes at once. */
    when = info.start + (time_t)jitter(difftime(info.end, info.start));
    if (when > now) {
        time_t check = now + (time_t)(CHECK_INTERVAL + jitter(CHECK_JITTER));
        char opens[64], closes[64];
        format_date(info.start, opens, sizeof opens);
        format_date(info.end, closes, sizeof closes);
        log_msg("acme: %s: not due: the CA's renewal window is %s to %s", set->names[0], opens, closes);
        set->next_attempt = 0;
        set_timer_at(set, when < check ? when : check);
        job_clear();
        job_next();
        return;
    }
    log_msg("acme: %s: renewing (the CA's renewal window opened)", set->names[0]);
    replacing = strdup(set->ari_id);
    if (replacing == NULL) {
        client.checking = false;
        job_failed("out of memory");
        return;
    }
    job_order(replacing);
    free(replacing);
}

/* -- the order -------------------------------------------------------- */

static void certificate_answered(const struct http_client_response *r)
{
    struct cert_set *set = client.working;
    char *key_pem = NULL, *key_file = store_name("certificates/%s.key", set->names[0]);
    char *crt_file = store_name("certificates/%s.crt", set->names[0]);
    char until[64];
    size_t key_length = 0;

    if (key_file == NULL || crt_file == NULL ||
        (key_pem = acme_key_pem(client.cert_key, &key_length)) == NULL) {
        job_failed("out of memory");
    } else if (acme_chain_matches_key(r->body, r->body_length, client.cert_key) != 1) {
        job_failed("the CA's certificate does not match the key of the request");
    } else if (acme_store_write(client.settings.storage, key_file, key_pem, key_length) == -1 ||
               acme_store_write(client.settings.storage, crt_file, r->body, r->body_length) == -1) {
        /* The key goes first: a .crt in place always has its key. */
        job_failed("cannot store the certificate in %s/certificates: %s", client.settings.storage,
                   strerror(errno));
    } else if (!read_stored(set)) {
        job_failed("the CA's answer holds no certificate");
    } else {
        acme_certs_reload(set->names[0]); /* this process serves it now, if it serves */
        format_date(set->not_after, until, sizeof until);
        log_msg("acme: %s: certificate obtained (valid until %s)", set->names[0], until);
        job_done();
    }
    if (key_pem != NULL) {
        OPENSSL_cleanse(key_pem, key_length);
        free(key_pem);
    }
    free(key_file);
    free(crt_file);
}

static void order_poll(void);

/* The order, as the CA sees it after finalize or a poll. */
static void order_answered(const struct http_client_response *r)
{
    const char *why;

    if (client.have_order)
        acme_order_free(&client.order);
    client.have_order = false;
    if (acme_order_parse(r->body, r->body_length, &client.order, &why) == -1) {
        job_failed("the CA's order is unreadable: %s", why);
        return;
    }
    client.have_order = true;
    switch (client.order.status) {
    case ACME_VALID:
        if (client.order.certificate == NULL) {
            job_failed("the CA's valid order names no certificate");
            return;
        }
        post(client.order.certificate, "", false, certificate_answered);
        return;
    case ACME_PROCESSING:
    case ACME_READY: /* finalize not seen yet */
        if (++client.polls > MAX_POLLS) {
            job_failed("the CA took too long to issue the certificate");
            return;
        }
        job_wait(retry_after(r, POLL_DELAY), order_poll);
        return;
    default:
        job_failed("the order became %s%s%s", client.order.status == ACME_INVALID ? "invalid" : "unusable",
                   client.order.error_detail != NULL ? ": " : "",
                   client.order.error_detail != NULL ? client.order.error_detail : "");
    }
}

static void order_poll(void)
{
    post(client.order_url, "", false, order_answered);
}

/* Every authorization is valid: a new key, a CSR for it, finalize. */
static void order_finalize(void)
{
    struct cert_set *set = client.working;
    char *csr, *payload;

    client.cert_key = acme_key_new();
    csr = client.cert_key != NULL ? acme_csr(client.cert_key, (const char *const *)set->names, set->count) : NULL;
    payload = csr != NULL ? acme_finalize_payload(csr) : NULL;
    free(csr);
    if (payload == NULL) {
        job_failed("cannot make the certificate request (out of memory?)");
        return;
    }
    client.polls = 0;
    post(client.order.finalize, payload, false, order_answered);
    free(payload);
}

static void authorization_poll(void);

/* What validation failed of name: the CA's words, and where to look. */
static void validation_failed(const char *detail)
{
    bool http = client.challenge_type != NULL && strcmp(client.challenge_type, "http-01") == 0;

    job_failed("%s: %s validation failed (%s): check that %s resolves to this server and that port %s "
               "reaches rsp",
               client.challenge_name != NULL ? client.challenge_name : "a name",
               client.challenge_type != NULL ? client.challenge_type : "the", detail != NULL ? detail : "no reason given",
               client.challenge_name != NULL ? client.challenge_name : "the name", http ? "80" : "443");
}

/* Reads the authorization r carries into authz. Returns 0, or -1 after
 * failing the job. */
static int authorization_read(const struct http_client_response *r, struct acme_authorization *authz)
{
    const char *why;

    if (acme_authorization_parse(r->body, r->body_length, authz, &why) == -1) {
        job_failed("the CA's authorization is unreadable: %s", why);
        return -1;
    }
    return 0;
}

/* authz is valid: frees it and goes on to the order's next authorization. */
static void authorization_valid(struct acme_authorization *authz)
{
    acme_authorization_free(authz);
    client.authz_at++;
    authorization_next();
}

/* The authorization after its challenge was answered. */
static void authorization_polled(const struct http_client_response *r)
{
    struct acme_authorization authz;

    if (authorization_read(r, &authz) == -1)
        return;
    if (authz.status == ACME_VALID) {
        log_msg("acme: %s: %s validated (%s)", client.working->names[0], authz.identifier, client.challenge_type);
        challenge_clean();
        authorization_valid(&authz);
    } else if (authz.status == ACME_PENDING || authz.status == ACME_PROCESSING) {
        acme_authorization_free(&authz);
        if (++client.polls > MAX_POLLS)
            validation_failed("the CA never finished validating");
        else
            job_wait(retry_after(r, POLL_DELAY), authorization_poll);
    } else {
        const char *detail = NULL;
        for (size_t i = 0; i < authz.challenge_count && detail == NULL; i++)
            detail = authz.challenges[i].error_detail;
        validation_failed(detail);
        acme_authorization_free(&authz);
    }
}

static void authorization_poll(void)
{
    post(client.order.authorizations[client.authz_at], "", false, authorization_polled);
}

static void challenge_answered(const struct http_client_response *r)
{
    (void)r;
    client.polls = 0;
    job_wait(POLL_DELAY / 2, authorization_poll);
}

/* Leaves what the challenge of type asks for where rsp serves it: a token
 * file (http-01) or a certificate (tls-alpn-01). Returns 0, or -1 after
 * failing the job. */
static int challenge_prepare(const struct acme_challenge *ch, const char *name)
{
    char *key_authorization = acme_key_authorization(ch->token, client.account_key), *data = NULL;
    size_t length = 0;
    bool http = strcmp(ch->type, "http-01") == 0;

    if (key_authorization == NULL) {
        job_failed("out of memory");
        return -1;
    }
    /* A token is base64url: it cannot lead out of the directory. */
    for (const char *p = ch->token; *p != '\0'; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' ||
              *p == '_')) {
            free(key_authorization);
            job_failed("the CA's challenge token is not base64url");
            return -1;
        }
    if (http) {
        data = key_authorization;
        length = strlen(data);
        key_authorization = NULL;
        client.challenge_file = store_name("challenges/.well-known/acme-challenge/%s", ch->token);
    } else {
        data = acme_alpn_pem(name, key_authorization, &length);
        client.challenge_file = store_name("challenges/tls-alpn-01/%s.pem", name);
    }
    free(key_authorization);
    client.challenge_type = http ? "http-01" : "tls-alpn-01";
    client.challenge_name = strdup(name);
    if (data == NULL || client.challenge_file == NULL || client.challenge_name == NULL) {
        free(data);
        job_failed("out of memory");
        return -1;
    }
    if (acme_store_write(client.settings.storage, client.challenge_file, data, length) == -1) {
        int error = errno;
        free(data);
        job_failed("cannot write %s/%s: %s", client.settings.storage, client.challenge_file, strerror(error));
        return -1;
    }
    free(data);
    return 0;
}

/* The authorization of one name: valid already, or a challenge to answer. */
static void authorization_answered(const struct http_client_response *r)
{
    const struct acme_challenge *chosen = NULL;
    struct acme_authorization authz;

    if (authorization_read(r, &authz) == -1)
        return;
    if (authz.status == ACME_VALID) {
        authorization_valid(&authz);
        return;
    }
    if (authz.status != ACME_PENDING) {
        job_failed("the authorization of %s is %s", authz.identifier,
                   authz.status == ACME_INVALID ? "invalid" : "not pending");
        acme_authorization_free(&authz);
        return;
    }
    for (size_t k = 0; k < 2 && chosen == NULL && client.settings.challenges[k][0] != '\0'; k++)
        for (size_t i = 0; i < authz.challenge_count && chosen == NULL; i++)
            if (strcmp(authz.challenges[i].type, client.settings.challenges[k]) == 0 &&
                authz.challenges[i].token != NULL && authz.challenges[i].url != NULL)
                chosen = &authz.challenges[i];
    if (chosen == NULL) {
        job_failed("the CA offers no challenge rsp may answer (%s%s%s) for %s", client.settings.challenges[0],
                   client.settings.challenges[1][0] != '\0' ? ", " : "", client.settings.challenges[1],
                   authz.identifier);
    } else if (challenge_prepare(chosen, authz.identifier) == 0) {
        /* "{}": we are ready, validate (RFC 8555 7.5.1). */
        post(chosen->url, "{}", false, challenge_answered);
    }
    acme_authorization_free(&authz);
}

static void authorization_next(void)
{
    if (client.authz_at == client.order.authorization_count) {
        order_finalize();
        return;
    }
    post(client.order.authorizations[client.authz_at], "", false, authorization_answered);
}

static void order_created(const struct http_client_response *r)
{
    const char *location = http_client_header(r, "Location"), *why;

    if (location == NULL || (client.order_url = strdup(location)) == NULL) {
        job_failed("the CA's new order has no URL (Location)");
        return;
    }
    if (acme_order_parse(r->body, r->body_length, &client.order, &why) == -1) {
        job_failed("the CA's new order is unreadable: %s", why);
        return;
    }
    client.have_order = true;
    client.authz_at = 0;
    if (client.order.status == ACME_READY || client.order.status == ACME_VALID ||
        client.order.status == ACME_PROCESSING) {
        client.authz_at = client.order.authorization_count;
        if (client.order.status == ACME_READY) {
            order_finalize();
        } else {
            client.polls = 0;
            order_answered(r);
        }
        return;
    }
    authorization_next();
}

static void order_create(void)
{
    struct cert_set *set = client.working;
    const char *const *names = (const char *const *)set->names;
    char *payload;

    /* Renewing with renewal information: say which certificate this one
     * replaces (RFC 9773 5). */
    if (set->has_cert && set->ari_id != NULL && client.dir.renewal_info != NULL)
        payload = acme_renewal_order_payload(names, set->count, set->ari_id);
    else
        payload = acme_order_payload(names, set->count);
    if (payload == NULL) {
        job_failed("out of memory");
        return;
    }
    post(client.dir.new_order, payload, false, order_created);
    free(payload);
}

/* -- the queue -------------------------------------------------------- */

/* Orders a certificate for the set being worked on, under the set's lock,
 * so that two processes sharing storage order it once. `replacing` is the
 * ARI certID of the certificate a renewal window said to replace (NULL:
 * the lifetime rule decided). Under the lock storage is read again:
 * another process may have just done this very order. */
static void job_order(const char *replacing)
{
    struct cert_set *set = client.working;
    char *lock = store_name("certificates/%s.lock", set->names[0]), until[64];
    bool fresh;

    client.checking = false;
    client.lock_fd = lock != NULL ? acme_store_lock(client.settings.storage, lock) : -1;
    if (client.lock_fd == -1) {
        if (errno == EWOULDBLOCK || errno == EAGAIN) {
            if (!set->told_locked)
                log_msg("acme: %s: another rsp is ordering it (%s/%s is locked); looking again in %.0f s",
                        set->names[0], client.settings.storage, lock, LOCKED_RETRY);
            set->told_locked = true;
            set->next_attempt = time(NULL) + (time_t)LOCKED_RETRY;
            set_timer_at(set, set->next_attempt);
            free(lock);
            job_clear();
            job_next();
            return;
        }
        free(lock);
        job_failed("cannot lock %s/certificates/%s.lock: %s", client.settings.storage, set->names[0],
                   strerror(errno));
        return;
    }
    free(lock);
    set->told_locked = false;
    if (replacing != NULL)
        fresh = read_stored(set) && (set->ari_id == NULL || strcmp(set->ari_id, replacing) != 0);
    else
        fresh = read_stored(set) && time(NULL) < renew_at(set);
    if (fresh) {
        format_date(set->not_after, until, sizeof until);
        log_msg("acme: %s: using the stored certificate, valid until %s", set->names[0], until);
        acme_certs_reload(set->names[0]);
        job_done();
        return;
    }
    if (set->has_cert) {
        set->state = SET_RENEWING;
        format_date(set->not_after, until, sizeof until);
        if (replacing == NULL)
            log_msg("acme: %s: renewing (valid until %s)", set->names[0], until);
    } else {
        set->state = SET_OBTAINING;
        log_msg("acme: %s: ordering a certificate from %s", set->names[0], client.settings.directory);
    }
    set->next_attempt = 0;
    directory_ensure();
}

/* Starts work on set: a look at renewal information when the lifetime
 * rule says it is not due and the CA may say otherwise, else an order. */
static void job_start(struct cert_set *set)
{
    client.working = set;
    if (!read_stored(set) || time(NULL) >= renew_at(set)) {
        job_order(NULL);
        return;
    }
    if (set->ari_id == NULL || (client.have_dir && client.dir.renewal_info == NULL)) {
        set->state = SET_VALID;
        plan_check(set);
        job_clear();
        job_next();
        return;
    }
    client.checking = true;
    directory_ensure();
}

/* Starts the next set waiting, if nothing is being worked on. */
static void job_next(void)
{
    if (client.working != NULL || !client.running)
        return;
    for (size_t i = 0; i < client.count; i++)
        if (client.sets[i].queued) {
            client.sets[i].queued = false;
            job_start(&client.sets[i]);
            return;
        }
}

static void set_timer_fired(struct timer *timer)
{
    struct cert_set *set = timer->closure;

    set->queued = true;
    job_next();
}

/* -- life ------------------------------------------------------------- */

static void set_free(struct cert_set *set)
{
    timer_disarm(&set->timer);
    for (size_t i = 0; i < set->count; i++)
        free(set->names[i]);
    free(set->names);
    free(set->ari_id);
    free(set->last_error);
}

static void settings_free(struct acme_settings *s)
{
    free(s->email);
    free(s->directory);
    free(s->ca_root);
    free(s->storage);
    *s = (struct acme_settings){ 0 };
}

/* True if a asks for what the client does now. */
static bool unchanged(const struct acme_settings *a)
{
    const struct acme_settings *s = &client.settings;

#define SAME(x, y) (((x) == NULL && (y) == NULL) || ((x) != NULL && (y) != NULL && strcmp((x), (y)) == 0))
    if (!client.running || !SAME(a->email, s->email) || !SAME(a->directory, s->directory) ||
        !SAME(a->ca_root, s->ca_root) || !SAME(a->storage, s->storage) || a->set_count != client.count ||
        memcmp(a->challenges, s->challenges, sizeof s->challenges) != 0)
        return false;
#undef SAME
    for (size_t i = 0; i < a->set_count; i++) {
        if (a->sets[i].count != client.sets[i].count)
            return false;
        for (size_t j = 0; j < a->sets[i].count; j++)
            if (strcmp(a->sets[i].names[j], client.sets[i].names[j]) != 0)
                return false;
    }
    return true;
}

static char *copy(const char *text, bool *failed)
{
    char *out = text != NULL ? strdup(text) : NULL;

    if (text != NULL && out == NULL)
        *failed = true;
    return out;
}

int acme_client_prepare(const struct acme_settings *a, const char *user)
{
    struct passwd *pw = user != NULL && geteuid() == 0 ? getpwnam(user) : NULL;
    char *why = NULL;

    if (a == NULL)
        return 0;
    if (acme_store_prepare(a->storage, pw != NULL ? pw->pw_uid : (uid_t)-1, pw != NULL ? pw->pw_gid : (gid_t)-1,
                           &why) == 0)
        return 0;
    log_msg("acme: cannot prepare the storage directory: %s", why);
    free(why);
    return -1;
}

int acme_client_apply(const struct acme_settings *a)
{
    bool failed = false;
    char *why = NULL;

    if (a == NULL) {
        acme_client_stop();
        return 0;
    }
    if (unchanged(a))
        return 0;
    acme_client_stop();
    if (acme_store_prepare(a->storage, (uid_t)-1, (gid_t)-1, &why) == -1) {
        log_msg("acme: certificates are not ordered: %s", why);
        free(why);
        return -1;
    }
    client.settings.email = copy(a->email, &failed);
    client.settings.directory = copy(a->directory, &failed);
    client.settings.ca_root = copy(a->ca_root, &failed);
    client.settings.storage = copy(a->storage, &failed);
    memcpy(client.settings.challenges, a->challenges, sizeof a->challenges);
    client.sets = calloc(a->set_count, sizeof *client.sets);
    if (client.sets == NULL && a->set_count > 0)
        failed = true;
    for (size_t i = 0; i < a->set_count && !failed; i++) {
        struct cert_set *set = &client.sets[i];

        timer_init(&set->timer, set_timer_fired, set);
        client.count = i + 1;
        set->names = calloc(a->sets[i].count, sizeof *set->names);
        if (set->names == NULL) {
            failed = true;
            break;
        }
        for (set->count = 0; set->count < a->sets[i].count && !failed; set->count++)
            set->names[set->count] = copy(a->sets[i].names[set->count], &failed);
    }
    timer_init(&client.wait, wait_fired, NULL);
    if (failed) {
        acme_client_stop();
        log_msg("acme: out of memory: certificates are not ordered");
        return -1;
    }
    client.running = true;
    for (size_t i = 0; i < client.count; i++) {
        struct cert_set *set = &client.sets[i];
        char until[64];

        if (read_stored(set) && time(NULL) < renew_at(set)) {
            set->state = SET_VALID;
            format_date(set->not_after, until, sizeof until);
            log_msg("acme: %s: using the stored certificate, valid until %s", set->names[0], until);
        } else {
            set->state = set->has_cert ? SET_RENEWING : SET_OBTAINING;
        }
        /* Everyone gets a first look once the reactor runs: an order, or
         * the renewal information. */
        set_timer_at(set, time(NULL));
    }
    return 0;
}

void acme_client_stop(void)
{
    if (client.running || client.sets != NULL) {
        job_clear();
        for (size_t i = 0; i < client.count; i++)
            set_free(&client.sets[i]);
    }
    free(client.sets);
    client.sets = NULL;
    client.count = 0;
    client.running = false;
    settings_free(&client.settings);
    EVP_PKEY_free(client.account_key);
    client.account_key = NULL;
    free(client.kid);
    client.kid = NULL;
    if (client.have_dir)
        acme_directory_free(&client.dir);
    client.have_dir = false;
    free(client.nonce);
    client.nonce = NULL;
}

void acme_client_forget(void)
{
    /* The request under way is the parent's: its socket is closed here
     * without a word to the reactor (this process has its own epoll), and
     * the lock must not stay held by this process's copy of the
     * descriptor. Timers are disarmed on this process's copy of the heap. */
    if (client.http != NULL)
        http_client_forget(client.http);
    client.http = NULL;
    if (client.lock_fd != -1 && close(client.lock_fd) == -1)
        log_errno("acme: close (lock)");
    client.lock_fd = -1;
    free(client.challenge_file); /* the parent removes it, not us */
    client.challenge_file = NULL;
    acme_client_stop();
}

size_t acme_client_count(void)
{
    return client.running ? client.count : 0;
}

struct acme_certificate_status acme_client_status(size_t i)
{
    static const char *const states[] = { "valid", "obtaining", "renewing", "failed" };
    const struct cert_set *set = &client.sets[i];

    return (struct acme_certificate_status){
        .names = set->names,
        .name_count = set->count,
        .state = states[set->state],
        .not_after = set->has_cert ? set->not_after : 0,
        .last_error = set->last_error,
        .next_attempt = set->next_attempt,
    };
}
