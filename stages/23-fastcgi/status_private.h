/* status_private.h -- what the renderers of the status documents share
 * (status_figures.c): the figures added up, the sites and pools shown. */
#ifndef RSP_STATUS_PRIVATE_H
#define RSP_STATUS_PRIVATE_H

#include "backend.h"
#include "config.h"
#include "stats.h"
#include "status.h"
#include "version.h"

#include <stdatomic.h>

#include <stdbool.h>
#include <stdint.h>

extern const char *const status_timeout_names[TIMEOUT_KINDS];

/* The figures of all processes, added up. */
struct totals {
    int64_t connections, in_flight, pipes, temp_files;
    uint64_t bytes_in, bytes_out, requests, classes[5];
    uint64_t tls_handshakes, tls_failures, bytes_spliced;
    uint64_t bodies_buffered, spooled_in, spooled_out;
    uint64_t requests_http1, requests_http2; /* by protocol (chapter 20) */
    int64_t h2_connections, h2_streams;
    uint64_t compressed[STATS_ENCODINGS], compress_in, compress_out; /* chapter 21 */
    int64_t encoders, encoder_memory;
};

/* The encodings as status.json and /metrics name them, in rsp's order of
 * preference, with their index in totals.compressed (enum encoding). */
struct status_encoding {
    const char *name;
    int index;
};
extern const struct status_encoding status_encodings[3];

/* A histogram as read once: counts cumulative, as Prometheus has them
 * (cumulative[STATS_BUCKETS - 1] is the count of all), and the sum in s. */
struct histogram_view {
    uint64_t cumulative[STATS_BUCKETS];
    double sum;
};

/* Appends printf-style text; after a failure (out of memory) *failed
 * stays set and nothing more is appended. */
struct out {
    struct buffer *b;
    bool failed;
};

/* The sites shown: the config's, and any other that has counted a
 * request (a site a reload removed keeps its counts: counters never go
 * down). Calls each(site) in slot order. */
#define FOR_EACH_SITE(v, site)                                                               \
    for (const struct stats_site *site = (v)->stats->sites;                                 \
         site < (v)->stats->sites + STATS_SITES; site++)                                    \
        if (atomic_load_explicit(&site->state, memory_order_acquire) == 2 &&                \
            (site_configured((v)->config, site) || site_requests(site) > 0))

/* A pool's name as the page shows it. */
typedef void (*pool_fn)(struct out *o, const struct status_view *v, const char *name,
                        const struct pool *pool, bool *first);

void out_printf(struct out *o, const char *format, ...) __attribute__((format(printf, 2, 3)));
uint64_t counter_value(const _Atomic uint64_t *counter);
uint64_t site_requests(const struct stats_site *site);
bool site_configured(const struct config *c, const struct stats_site *site);
void status_totals(const struct status_view *v, struct totals *t);
/* Reads h's counters once into view. */
void histogram_read(const struct stats_histogram *h, struct histogram_view *view);
/* The q-quantile (0 < q <= 1) of what view counted, estimated as
 * Prometheus's histogram_quantile() does; -1 when it counted nothing. */
double histogram_quantile(const struct histogram_view *view, double q);
/* Calls fn for each pool of the config with the name the page gives it:
 * "default" for the default site's, a named pool's name, a site's name
 * for the backends a site lists itself. */
void status_for_each_pool(struct out *o, const struct status_view *v, pool_fn fn);
bool backend_takes_requests(const struct backend *b);
const char *backend_active_health(const struct backend *b);

#endif
