/* status_figures.c -- the figures every status document shows, added
 * up once per request from the shared counters and the config in service. */
#include "status_private.h"

#include "fastcgi_script.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const status_timeout_names[TIMEOUT_KINDS] = {
    [TIMEOUT_CONNECT] = "connect", [TIMEOUT_HEADER] = "header", [TIMEOUT_BODY] = "body",
    [TIMEOUT_RESPONSE] = "response", [TIMEOUT_IDLE] = "idle",
};


/* enum encoding's values (encoder.h): ENCODING_GZIP 1, ENCODING_BR 2, ENCODING_ZSTD 3. */
const struct status_encoding status_encodings[3] = { { "br", 2 }, { "zstd", 3 }, { "gzip", 1 } };

void out_printf(struct out *o, const char *format, ...)
{
    char small[512], *text = small;
    va_list ap;
    int n;

    if (o->failed)
        return;
    va_start(ap, format);
    n = vsnprintf(small, sizeof small, format, ap);
    va_end(ap);
    if (n < 0) {
        o->failed = true;
        return;
    }
    if ((size_t)n >= sizeof small) {
        text = malloc((size_t)n + 1);
        if (text == NULL) {
            o->failed = true;
            return;
        }
        va_start(ap, format);
        vsnprintf(text, (size_t)n + 1, format, ap);
        va_end(ap);
    }
    if (buffer_append(o->b, text, (size_t)n) == -1)
        o->failed = true;
    if (text != small)
        free(text);
}

uint64_t counter_value(const _Atomic uint64_t *counter)
{
    return atomic_load_explicit(counter, memory_order_relaxed);
}

uint64_t site_requests(const struct stats_site *site)
{
    uint64_t n = 0;

    for (size_t c = 0; c < STATS_CODES; c++)
        n += counter_value(&site->codes[c]);
    return n;
}

/* True if the site is one of the config's (the default site and "-"
 * included): those are shown even before their first request. */
bool site_configured(const struct config *c, const struct stats_site *site)
{
    if (site == c->router.unknown_stats)
        return false;
    if (site == c->router.fallback_stats)
        return c->router.fallback != NULL;
    for (size_t i = 0; i < c->router.count; i++)
        if (c->router.sites[i].stats == site)
            return true;
    return false;
}


void status_totals(const struct status_view *v, struct totals *t)
{
    memset(t, 0, sizeof *t);
    for (size_t i = 0; i < STATS_ROWS; i++) {
        const struct stats_row *r = &v->stats->rows[i];

        t->connections += atomic_load_explicit(&r->connections, memory_order_relaxed);
        t->in_flight += atomic_load_explicit(&r->in_flight, memory_order_relaxed);
        t->bytes_in += counter_value(&r->bytes_in);
        t->bytes_out += counter_value(&r->bytes_out);
        t->tls_handshakes += counter_value(&r->tls_handshakes);
        t->tls_failures += counter_value(&r->tls_failures);
        t->bytes_spliced += counter_value(&r->bytes_spliced);
        t->pipes += atomic_load_explicit(&r->pipes, memory_order_relaxed);
        t->bodies_buffered += counter_value(&r->bodies_buffered);
        t->spooled_in += counter_value(&r->spooled_in);
        t->spooled_out += counter_value(&r->spooled_out);
        t->temp_files += atomic_load_explicit(&r->temp_files, memory_order_relaxed);
        t->requests_http1 += counter_value(&r->requests_http1);
        t->requests_http2 += counter_value(&r->requests_http2);
        t->h2_connections += atomic_load_explicit(&r->h2_connections, memory_order_relaxed);
        t->h2_streams += atomic_load_explicit(&r->h2_streams, memory_order_relaxed);
        for (size_t e = 0; e < STATS_ENCODINGS; e++)
            t->compressed[e] += counter_value(&r->compressed[e]);
        t->compress_in += counter_value(&r->compress_in);
        t->compress_out += counter_value(&r->compress_out);
        /* Each process's own encoders (encoder_totals is per process): a
         * dead worker's row was zeroed, so the sum is what is alive. */
        t->encoders += atomic_load_explicit(&r->encoders, memory_order_relaxed);
        t->encoder_memory += atomic_load_explicit(&r->encoder_memory, memory_order_relaxed);
    }
    FOR_EACH_SITE(v, site) {
        for (size_t c = 0; c < STATS_CODES; c++) {
            uint64_t n = counter_value(&site->codes[c]);
            size_t class = (c + STATS_FIRST_CODE) / 100 - 1;

            t->requests += n;
            if (class < 5)
                t->classes[class] += n;
        }
    }
}

void histogram_read(const struct stats_histogram *h, struct histogram_view *view)
{
    uint64_t total = 0;

    for (size_t i = 0; i < STATS_BUCKETS; i++) {
        total += counter_value(&h->buckets[i]);
        view->cumulative[i] = total;
    }
    view->sum = (double)counter_value(&h->sum_us) / 1e6;
}

/* The bucket holding the quantile's rank is the first whose cumulative
 * count reaches it; within it, the durations are taken as spread evenly
 * from its lower bound (0 for the first) to its upper. Past the last
 * bound nothing is known: the estimate is that bound, 10 s. */
double histogram_quantile(const struct histogram_view *view, double q)
{
    uint64_t total = view->cumulative[STATS_BUCKETS - 1];
    double rank = q * (double)total;
    size_t i = 0;

    if (total == 0)
        return -1;
    while ((double)view->cumulative[i] < rank)
        i++;
    if (i == STATS_BUCKETS - 1)
        return stats_bucket_bounds[STATS_BUCKETS - 2];
    double lower = i == 0 ? 0 : stats_bucket_bounds[i - 1];
    uint64_t below = i == 0 ? 0 : view->cumulative[i - 1];

    return lower + (stats_bucket_bounds[i] - lower) * (rank - (double)below) /
                   (double)(view->cumulative[i] - below);
}

void status_for_each_pool(struct out *o, const struct status_view *v, pool_fn fn)
{
    const struct config *c = v->config;
    char name[STATS_NAME];
    bool first = true;

    if (c->router.fallback != NULL)
        fn(o, v, "default", &c->default_pool, &first);
    for (size_t i = 0; i < c->pool_count; i++)
        fn(o, v, c->pools[i].name, &c->pools[i].pool, &first);
    for (size_t i = 0; i < c->router.count; i++) {
        const struct site *site = &c->router.sites[i];

        if (site->pool != &site->own)
            continue;
        snprintf(name, sizeof name, "%s%s", site->wildcard ? "*" : "", site->name);
        fn(o, v, name, &site->own, &first);
        /* Its scripts' FastCGI backends: a pool of their own. */
        if (site->own.fastcgi != NULL) {
            snprintf(name, sizeof name, "%s%.100s fastcgi", site->wildcard ? "*" : "", site->name);
            fn(o, v, name, &site->own.fastcgi->pool, &first);
        }
    }
}

bool backend_takes_requests(const struct backend *b)
{
    return !backend_failing(b) && !backend_down(b);
}

const char *backend_active_health(const struct backend *b)
{
    if (!atomic_load(&b->stats->checked))
        return "unchecked";
    return backend_failing(b) ? "down" : "up";
}

