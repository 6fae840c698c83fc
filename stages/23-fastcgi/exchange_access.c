/* exchange_access.c -- who may enter (stage 22): a request's client
 * address against allow/deny, its rate against limit_req, its
 * Authorization header against basic_auth, its announced body against
 * max_body_size, in that order, each setting taken from the request's
 * site, else its pool, else the top level. Refusals are rsp's own answers
 * (exchange_refuse), so error_pages and headers apply to them. */
#include "exchange_private.h"

#include "access_rules.h"
#include "basic_auth.h"
#include "limit.h"
#include "log.h"
#include "router.h"
#include "stats.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* The allow/deny rules that apply: the site's, else the pool's, else the
 * top level's (which may have none). */
static const struct access_settings *rules_for(const struct relay *relay)
{
    const struct exchange *x = relay->x;

    if (x->output_site != NULL && x->output_site->access.rules_set)
        return &x->output_site->access;
    if (x->pool != NULL && x->pool->access.rules_set)
        return &x->pool->access;
    return &relay->config->access;
}

/* The basic_auth that applies, or NULL. */
static const struct basic_auth *auth_for(const struct relay *relay)
{
    const struct exchange *x = relay->x;

    if (x->output_site != NULL && x->output_site->access.auth != NULL)
        return x->output_site->access.auth;
    if (x->pool != NULL && x->pool->access.auth != NULL)
        return x->pool->access.auth;
    return relay->config->access.auth;
}

/* The max_body_size that applies (0: none). */
static uint64_t max_body_for(const struct relay *relay)
{
    const struct exchange *x = relay->x;

    if (x->output_site != NULL && x->output_site->access.max_body_set)
        return x->output_site->access.max_body;
    if (x->pool != NULL && x->pool->access.max_body_set)
        return x->pool->access.max_body;
    return relay->config->buffering.max_body;
}

const char *exchange_client(const struct relay *relay)
{
    return relay->x->client_address[0] != '\0' ? relay->x->client_address : relay->client_address;
}

/* True if the address in text[0..length) (surrounding spaces and tabs
 * allowed) is one of trusted_proxies; *valid false if it is no address. */
static bool trusted(const struct config *config, const char *text, size_t length, bool *valid,
                    char out[INET6_ADDRSTRLEN])
{
    unsigned char raw[16];
    int family;

    while (length > 0 && (text[0] == ' ' || text[0] == '\t'))
        text++, length--;
    while (length > 0 && (text[length - 1] == ' ' || text[length - 1] == '\t'))
        length--;
    *valid = length > 0 && length < INET6_ADDRSTRLEN;
    if (!*valid)
        return false;
    memcpy(out, text, length);
    out[length] = '\0';
    *valid = cidr_address(out, &family, raw) == 0;
    return *valid && cidr_contains_any(config->trusted_proxies, config->trusted_proxy_count, family, raw);
}

/* The client X-Forwarded-For names into out: its values, in header order,
 * read as one comma-separated list from the right, the first address not
 * in trusted_proxies (all in it: the left-most). False if an address read
 * is malformed, or there is none. */
static bool forwarded_client(struct relay *relay, char out[INET6_ADDRSTRLEN])
{
    struct request_view view = relay_request_view(relay);
    char address[INET6_ADDRSTRLEN];
    bool found = false, valid;

    for (size_t i = view.header_count; i-- > 0;) {
        if (request_find_header(&view, "x-forwarded-for", i) != i)
            continue;
        const char *value = view.buf + view.headers[i].value.offset;
        size_t end = view.headers[i].value.length, start;

        for (;; end = start - 1) {
            for (start = end; start > 0 && value[start - 1] != ','; start--)
                ;
            bool is_trusted = trusted(relay->config, value + start, end - start, &valid, address);
            if (!valid)
                return false;
            memcpy(out, address, sizeof address);
            found = true;
            if (!is_trusted)
                return true;
            if (start == 0)
                break;
        }
    }
    return found;
}

void exchange_find_client(struct relay *relay)
{
    struct exchange *x = relay->x;
    const struct config *config = relay->config;
    char address[INET6_ADDRSTRLEN];
    unsigned char raw[16];
    int family;

    memcpy(x->client_address, relay->client_address, sizeof x->client_address);
    x->chain_believed = config->trusted_proxy_count == 0;
    if (config->trusted_proxy_count == 0 || cidr_address(relay->client_address, &family, raw) == -1 ||
        !cidr_contains_any(config->trusted_proxies, config->trusted_proxy_count, family, raw))
        return;
    x->chain_believed = true;
    if (forwarded_client(relay, address))
        memcpy(x->client_address, address, sizeof x->client_address);
}

/* True if the client's address passes allow/deny. */
static bool address_allowed(const struct relay *relay)
{
    const struct access_settings *a = rules_for(relay);
    unsigned char address[16];
    int family;

    if (a->rule_count == 0)
        return true;
    /* An address we cannot read matches only "all"-like rules: refused
     * when anything is allowed selectively. */
    if (cidr_address(exchange_client(relay), &family, address) == -1)
        return !a->has_allow;
    return access_rules_allow(a->rules, a->rule_count, a->has_allow, family, address);
}

/* The limit_req that applies to relay's request: the site's, else the
 * pool's, else the top level's (rate 0: none). */
static const struct limit_req_settings *limit_req_for(const struct relay *relay)
{
    const struct exchange *x = relay->x;

    return &site_output_for(relay->config, x->output_site, x->pool)->limit_req;
}

/* limit_req: takes a token of the client's bucket at the level that
 * applies; none left, answers 429 with Retry-After. Returns true if
 * refused. */
static bool over_rate(struct relay *relay)
{
    const struct limit_req_settings *l = limit_req_for(relay);
    struct limit_key key;
    char retry[40];

    if (l->rate == 0 || relay_client_key(relay, l->level, &key) == -1)
        return false;
    struct limit_verdict v = limit_take(&key, l->rate, l->burst, limit_now());
    if (v.allowed)
        return false;
    if (v.log)
        log_msg("limit_req: %s over %g/s (burst %u): 429 (%" PRIu32 " refused since the last line)",
                exchange_client(relay), l->rate, l->burst, v.refused);
    stats_count_refused(relay->x->site, REFUSED_LIMIT_REQ);
    snprintf(retry, sizeof retry, "Retry-After: %u\r\n", v.retry_after);
    exchange_refuse(relay, 429, retry, false);
    return true;
}

void exchange_auth_failed(struct relay *relay)
{
    /* Its limit_req token was taken by over_rate, as every request's is:
     * a guesser gets no more attempts than its rate allows requests. */
    stats_count_refused(relay->x->site, REFUSED_AUTH);
}

/* True if the request carries credentials auth accepts. */
static bool authorized(struct relay *relay, const struct basic_auth *auth)
{
    struct request_view view = relay_request_view(relay);
    size_t i = request_find_header(&view, "authorization", 0);

    if (i == view.header_count || request_find_header(&view, "authorization", i + 1) != view.header_count)
        return false; /* none, or two: malformed */
    return basic_auth_verify(auth, view.buf + view.headers[i].value.offset, view.headers[i].value.length);
}

bool exchange_admit(struct relay *relay)
{
    struct exchange *x = relay->x;
    const struct basic_auth *auth;

    if (!address_allowed(relay)) {
        stats_count_refused(x->site, REFUSED_DENY);
        exchange_fail_request(relay, 403);
        return false;
    }
    if (over_rate(relay))
        return false;
    auth = auth_for(relay);
    if (auth != NULL) {
        if (!authorized(relay, auth)) {
            exchange_auth_failed(relay);
            exchange_refuse(relay, 401, auth->challenge, false);
            return false;
        }
        x->info.drop_authorization = !auth->forward;
    }
    x->max_body = max_body_for(relay);
    if (x->max_body > 0 && !x->info.body.done && !x->info.body.chunked &&
        body_framer_remaining(&x->info.body) > x->max_body) {
        stats_count_refused(x->site, REFUSED_BODY_SIZE);
        exchange_fail_request(relay, 413); /* before reading a byte of it */
        return false;
    }
    return true;
}
