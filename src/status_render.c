/* status_render.c -- the status page, status.json and /metrics, written
 * from one status_view. The three say the same figures: each is gathered
 * here once per request, from the shared counters (every process's rows
 * added up) and the names in the config generation in service. */
#include "acme_client.h"
#include "limit.h"
#include "status_private.h"

#include <stdio.h>
#include <unistd.h>

/* --- status.json ------------------------------------------------------ */

/* Writes text as a JSON string. */
static void put_json_string(struct out *o, const char *text)
{
    out_printf(o, "\"");
    for (const unsigned char *p = (const unsigned char *)text; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\')
            out_printf(o, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            out_printf(o, "\\u%04x", *p);
        else
            out_printf(o, "%c", *p);
    }
    out_printf(o, "\"");
}

static void json_pool(struct out *o, const struct status_view *v, const char *name,
                      const struct pool *pool, bool *first)
{
    (void)v;
    out_printf(o, "%s\n    {\"name\": ", *first ? "" : ",");
    *first = false;
    put_json_string(o, name);
    out_printf(o, ", \"balance\": \"%s\", ", pool_balance_name(pool));
    if (pool->balance == BALANCE_HASH) {
        out_printf(o, "\"hash_key\": ");
        put_json_string(o, pool->hash_text);
        out_printf(o, ", ");
    }
    if (pool->root != NULL) { /* a pool of files: its directory, and no backends */
        out_printf(o, "\"root\": ");
        put_json_string(o, pool->root);
        out_printf(o, ", ");
    }
    out_printf(o, "\"backends\": [");
    for (size_t i = 0; i < pool->count; i++) {
        const struct backend *b = pool->backends[i];

        out_printf(o, "%s\n      {\"name\": ", i == 0 ? "" : ",");
        put_json_string(o, b->name);
        out_printf(o, ", \"up\": %s, \"active_health\": \"%s\", \"passive_health\": \"%s\", "
               "\"in_flight\": %lld, \"idle\": %lld, \"requests\": %llu, \"failures\": %llu}",
            backend_takes_requests(b) ? "true" : "false", backend_active_health(b), backend_down(b) ? "down" : "up",
            (long long)stats_backend_in_flight(b->stats), (long long)stats_backend_idle(b->stats),
            (unsigned long long)counter_value(&b->stats->requests),
            (unsigned long long)counter_value(&b->stats->failures));
    }
    out_printf(o, "]}");
}

/* "p50": ..., "p99": ... of a histogram, estimated from its buckets
 * (histogram_quantile); null before anything was counted. */
static void json_quantiles(struct out *o, const struct stats_histogram *h)
{
    static const double qs[] = { 0.5, 0.99 };
    struct histogram_view view;

    histogram_read(h, &view);
    for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
        double estimate = histogram_quantile(&view, qs[i]);

        out_printf(o, "%s\"p%.0f\": ", i == 0 ? "" : ", ", qs[i] * 100);
        if (estimate < 0)
            out_printf(o, "null");
        else
            out_printf(o, "%.6f", estimate);
    }
}

/* "certificates": what the ACME client keeps (chapter 19). */
static void json_certificates(struct out *o)
{
    out_printf(o, "  \"certificates\": [");
    for (size_t i = 0; i < acme_client_count(); i++) {
        struct acme_certificate_status c = acme_client_status(i);

        out_printf(o, "%s\n    {\"names\": [", i == 0 ? "" : ",");
        for (size_t j = 0; j < c.name_count; j++) {
            out_printf(o, "%s", j == 0 ? "" : ", ");
            put_json_string(o, c.names[j]);
        }
        out_printf(o, "], \"state\": \"%s\", \"not_after\": ", c.state);
        if (c.not_after != 0)
            out_printf(o, "%lld", (long long)c.not_after);
        else
            out_printf(o, "null");
        out_printf(o, ", \"last_error\": ");
        if (c.last_error != NULL)
            put_json_string(o, c.last_error);
        else
            out_printf(o, "null");
        out_printf(o, ", \"next_attempt\": ");
        if (c.next_attempt != 0)
            out_printf(o, "%lld}", (long long)c.next_attempt);
        else
            out_printf(o, "null}");
    }
    out_printf(o, "%s],\n", acme_client_count() > 0 ? "\n  " : "");
}

/* {"limit_req": N, ...}: refusals by reason. */
static void json_refused(struct out *o, const _Atomic uint64_t *refused)
{
    out_printf(o, "{");
    for (int r = 0; r < REFUSED_REASONS; r++)
        out_printf(o, "%s\"%s\": %llu", r == 0 ? "" : ", ", stats_refused_names[r],
            (unsigned long long)counter_value(&refused[r]));
    out_printf(o, "}");
}

/* "limits": every refusal by reason, and limit.h's table (chapter 22). */
static void json_limits(struct out *o, const struct status_view *v)
{
    const struct limit_table *l = limit_shared();

    out_printf(o, "  \"limits\": {\"refused\": ");
    json_refused(o, v->stats->refused);
    out_printf(o, ", \"addresses\": %lld, \"evictions\": %llu},\n",
        l == NULL ? 0LL : (long long)atomic_load_explicit(&l->addresses, memory_order_relaxed),
        l == NULL ? 0ULL : (unsigned long long)atomic_load_explicit(&l->evictions, memory_order_relaxed));
}

int status_render_json(struct buffer *out, const struct status_view *v)
{
    struct out o = { out, false };
    const struct status_facts *f = v->facts;
    struct totals t;
    bool first = true;

    status_totals(v, &t);
    out_printf(&o, "{\n  \"version\": \"" RSP_VERSION "\",\n  \"pid\": %ld,\n", (long)getpid());
    out_printf(&o, "  \"started_at\": %.3f,\n  \"uptime_seconds\": %.3f,\n", f->started_at,
        v->now - f->started_at);
    out_printf(&o, "  \"generation\": %u,\n  \"generation_loaded_at\": %.3f,\n", v->config->generation,
        f->loaded_at);
    out_printf(&o, "  \"reloads\": {\"ok\": %llu, \"failed\": %llu},\n", (unsigned long long)f->reloads_ok,
        (unsigned long long)f->reloads_failed);
    out_printf(&o, "  \"workers\": {\"configured\": %u, \"pids\": [", f->workers);
    for (size_t i = 0; i < f->pid_count; i++)
        out_printf(&o, "%s%ld", i == 0 ? "" : ", ", (long)f->pids[i]);
    out_printf(&o, "], \"restarts\": %llu},\n", (unsigned long long)f->restarts);
    out_printf(&o, "  \"connections\": %lld,\n  \"requests_in_flight\": %lld,\n  \"requests_total\": %llu,\n",
        (long long)t.connections, (long long)t.in_flight, (unsigned long long)t.requests);
    out_printf(&o, "  \"requests_by_protocol\": {\"http1\": %llu, \"http2\": %llu},\n",
        (unsigned long long)t.requests_http1, (unsigned long long)t.requests_http2);
    out_printf(&o, "  \"requests_by_class\": {");
    for (int i = 0; i < 5; i++)
        out_printf(&o, "%s\"%dxx\": %llu", i == 0 ? "" : ", ", i + 1, (unsigned long long)t.classes[i]);
    out_printf(&o, "},\n  \"timeouts\": {");
    for (int i = 0; i < TIMEOUT_KINDS; i++)
        out_printf(&o, "%s\"%s\": %llu", i == 0 ? "" : ", ", status_timeout_names[i],
            (unsigned long long)counter_value(&v->stats->timeouts[i]));
    out_printf(&o, "},\n  \"bytes\": {\"in\": %llu, \"out\": %llu},\n",
        (unsigned long long)t.bytes_in, (unsigned long long)t.bytes_out);
    out_printf(&o, "  \"tls_handshakes\": {\"ok\": %llu, \"failed\": %llu},\n",
        (unsigned long long)t.tls_handshakes, (unsigned long long)t.tls_failures);
    out_printf(&o, "  \"splice\": {\"bytes\": %llu, \"pipes\": %lld},\n",
        (unsigned long long)t.bytes_spliced, (long long)t.pipes);
    out_printf(&o, "  \"buffering\": {\"bodies_buffered\": %llu, \"spooled_bytes\": {\"in\": %llu, "
                   "\"out\": %llu}, \"temp_files\": %lld},\n",
        (unsigned long long)t.bodies_buffered, (unsigned long long)t.spooled_in,
        (unsigned long long)t.spooled_out, (long long)t.temp_files);
    out_printf(&o, "  \"http2\": {\"connections\": %lld, \"streams\": %lld},\n",
        (long long)t.h2_connections, (long long)t.h2_streams);
    out_printf(&o, "  \"compression\": {\"responses\": {");
    for (size_t e = 0; e < 3; e++)
        out_printf(&o, "%s\"%s\": %llu", e == 0 ? "" : ", ", status_encodings[e].name,
            (unsigned long long)t.compressed[status_encodings[e].index]);
    out_printf(&o, "}, \"bytes_in\": %llu, \"bytes_out\": %llu, \"encoders\": %lld, \"memory_bytes\": %lld},\n",
        (unsigned long long)t.compress_in, (unsigned long long)t.compress_out, (long long)t.encoders,
        (long long)t.encoder_memory);
    json_limits(&o, v);
    json_certificates(&o);
    out_printf(&o, "  \"sites\": [");
    FOR_EACH_SITE(v, site) {
        bool first_code = true;

        out_printf(&o, "%s\n    {\"name\": ", first ? "" : ",");
        first = false;
        put_json_string(&o, site->name);
        out_printf(&o, ", \"requests\": %llu, \"codes\": {", (unsigned long long)site_requests(site));
        for (size_t c = 0; c < STATS_CODES; c++) {
            uint64_t n = counter_value(&site->codes[c]);

            if (n == 0)
                continue;
            out_printf(&o, "%s\"%zu\": %llu", first_code ? "" : ", ", c + STATS_FIRST_CODE,
                (unsigned long long)n);
            first_code = false;
        }
        out_printf(&o, "}, \"refused\": ");
        json_refused(&o, site->refused);
        out_printf(&o, ", \"duration_seconds\": {");
        json_quantiles(&o, &site->duration);
        out_printf(&o, "}}");
    }
    out_printf(&o, "\n  ],\n  \"pools\": [");
    status_for_each_pool(&o, v, json_pool);
    out_printf(&o, "\n  ],\n  \"history\": {\"interval_seconds\": 1, \"requests_per_second\": [");
    for (size_t i = 0; i < v->history_count; i++)
        out_printf(&o, "%s%u", i == 0 ? "" : ", ", v->history[i]);
    out_printf(&o, "]}\n}\n");
    return o.failed ? -1 : 0;
}

/* --- /metrics ---------------------------------------------------------- */

/* Writes a label value: \, " and newline escaped. */
static void put_label(struct out *o, const char *text)
{
    for (const char *p = text; *p != '\0'; p++) {
        if (*p == '\\' || *p == '"')
            out_printf(o, "\\%c", *p);
        else if (*p == '\n')
            out_printf(o, "\\n");
        else
            out_printf(o, "%c", *p);
    }
}

static void family(struct out *o, const char *name, const char *type, const char *help)
{
    out_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Writes the samples of histogram `name` labelled label="value": its
 * buckets (cumulative, le="+Inf" last), _sum and _count. */
static void put_histogram(struct out *o, const char *name, const char *label, const char *value,
                          const struct stats_histogram *h)
{
    struct histogram_view view;

    histogram_read(h, &view);
    for (size_t i = 0; i < STATS_BUCKETS; i++) {
        out_printf(o, "%s_bucket{%s=\"", name, label);
        put_label(o, value);
        if (i < STATS_BUCKETS - 1)
            out_printf(o, "\",le=\"%g\"} %llu\n", stats_bucket_bounds[i],
                       (unsigned long long)view.cumulative[i]);
        else
            out_printf(o, "\",le=\"+Inf\"} %llu\n", (unsigned long long)view.cumulative[i]);
    }
    out_printf(o, "%s_sum{%s=\"", name, label);
    put_label(o, value);
    out_printf(o, "\"} %.6f\n%s_count{%s=\"", view.sum, name, label);
    put_label(o, value);
    out_printf(o, "\"} %llu\n", (unsigned long long)view.cumulative[STATS_BUCKETS - 1]);
}

static void metrics_backend_up(struct out *o, const struct status_view *v, const char *name,
                               const struct pool *pool, bool *first)
{
    (void)v;
    (void)first;
    for (size_t i = 0; i < pool->count; i++) {
        out_printf(o, "rsp_backend_up{pool=\"");
        put_label(o, name);
        out_printf(o, "\",backend=\"");
        put_label(o, pool->backends[i]->name);
        out_printf(o, "\"} %d\n", backend_takes_requests(pool->backends[i]) ? 1 : 0);
    }
}

/* What metrics_backends writes of each backend. */
enum backend_figure { FIGURE_REQUESTS, FIGURE_IN_FLIGHT, FIGURE_IDLE, FIGURE_RESPONSE_TIME };

/* Each backend of the config once, though several pools may list it. */
static void metrics_backends(struct out *o, const struct status_view *v, enum backend_figure figure)
{
    struct pool *pool;

    for (size_t i = 0; (pool = config_pool_at(v->config, i)) != NULL; i++) {
        for (size_t j = 0; j < pool->count; j++) {
            const struct backend *b = pool->backends[j];
            bool seen = false;
            struct pool *earlier;

            for (size_t k = 0; k < i && !seen && (earlier = config_pool_at(v->config, k)) != NULL; k++)
                seen = backend_bit(earlier, b) != 0;
            for (size_t k = 0; k < j && !seen; k++)
                seen = pool->backends[k] == b;
            if (seen)
                continue;
            if (figure == FIGURE_RESPONSE_TIME) {
                put_histogram(o, "rsp_backend_response_seconds", "backend", b->name, &b->stats->response_time);
                continue;
            }
            out_printf(o, "%s{backend=\"", figure == FIGURE_IN_FLIGHT ? "rsp_backend_in_flight"
                                            : figure == FIGURE_IDLE    ? "rsp_backend_idle"
                                                                       : "rsp_backend_requests_total");
            put_label(o, b->name);
            if (figure == FIGURE_IN_FLIGHT)
                out_printf(o, "\"} %lld\n", (long long)stats_backend_in_flight(b->stats));
            else if (figure == FIGURE_IDLE)
                out_printf(o, "\"} %lld\n", (long long)stats_backend_idle(b->stats));
            else
                out_printf(o, "\"} %llu\n", (unsigned long long)counter_value(&b->stats->requests));
        }
    }
}

/* rsp_refused_total by site and reason (the ones not zero), and limit.h's
 * table: addresses in it, evictions (chapter 22). */
static void metrics_limits(struct out *o, const struct status_view *v)
{
    const struct limit_table *l = limit_shared();

    family(o, "rsp_refused_total", "counter", "Requests and connections refused, by site and reason.");
    FOR_EACH_SITE(v, site) {
        for (int r = 0; r < REFUSED_REASONS; r++) {
            uint64_t n = counter_value(&site->refused[r]);

            if (n == 0)
                continue;
            out_printf(o, "rsp_refused_total{site=\"");
            put_label(o, site->name);
            out_printf(o, "\",reason=\"%s\"} %llu\n", stats_refused_names[r], (unsigned long long)n);
        }
    }
    family(o, "rsp_limit_addresses", "gauge", "Client addresses limit_req and limit_conn track now.");
    out_printf(o, "rsp_limit_addresses %lld\n",
        l == NULL ? 0LL : (long long)atomic_load_explicit(&l->addresses, memory_order_relaxed));
    family(o, "rsp_limit_evictions_total", "counter", "Tracked addresses pushed out of the full table.");
    out_printf(o, "rsp_limit_evictions_total %llu\n",
        l == NULL ? 0ULL : (unsigned long long)atomic_load_explicit(&l->evictions, memory_order_relaxed));
}

int status_render_metrics(struct buffer *out, const struct status_view *v)
{
    struct out o = { out, false };
    const struct status_facts *f = v->facts;
    struct totals t;

    status_totals(v, &t);
    family(&o, "rsp_requests_total", "counter", "Requests answered, by site and status code.");
    FOR_EACH_SITE(v, site) {
        for (size_t c = 0; c < STATS_CODES; c++) {
            uint64_t n = counter_value(&site->codes[c]);

            if (n == 0)
                continue;
            out_printf(&o, "rsp_requests_total{site=\"");
            put_label(&o, site->name);
            out_printf(&o, "\",code=\"%zu\"} %llu\n", c + STATS_FIRST_CODE, (unsigned long long)n);
        }
    }
    family(&o, "rsp_request_duration_seconds", "histogram",
           "Time from a request's first byte to its response's last, by site (rsp's own answers included).");
    FOR_EACH_SITE(v, site)
        put_histogram(&o, "rsp_request_duration_seconds", "site", site->name, &site->duration);
    family(&o, "rsp_backend_up", "gauge",
           "Whether a backend takes requests (1), or health checks or a failed connect took it out (0).");
    status_for_each_pool(&o, v, metrics_backend_up);
    family(&o, "rsp_backend_requests_total", "counter", "Requests sent to a backend.");
    metrics_backends(&o, v, FIGURE_REQUESTS);
    family(&o, "rsp_backend_in_flight", "gauge", "Requests a backend is serving now.");
    metrics_backends(&o, v, FIGURE_IN_FLIGHT);
    family(&o, "rsp_backend_idle", "gauge", "Connections to a backend kept open for the next request.");
    metrics_backends(&o, v, FIGURE_IDLE);
    family(&o, "rsp_backend_response_seconds", "histogram",
           "Time from sending a request's head to a backend to reading its response's head.");
    metrics_backends(&o, v, FIGURE_RESPONSE_TIME);
    family(&o, "rsp_connections", "gauge", "Client connections open.");
    out_printf(&o, "rsp_connections %lld\n", (long long)t.connections);
    family(&o, "rsp_requests_in_flight", "gauge", "Requests begun and not yet answered.");
    out_printf(&o, "rsp_requests_in_flight %lld\n", (long long)t.in_flight);
    family(&o, "rsp_requests_by_protocol_total", "counter",
           "Requests answered, by the protocol they came in (each HTTP/2 stream is one).");
    out_printf(&o, "rsp_requests_by_protocol_total{protocol=\"http1\"} %llu\n"
                   "rsp_requests_by_protocol_total{protocol=\"http2\"} %llu\n",
        (unsigned long long)t.requests_http1, (unsigned long long)t.requests_http2);
    family(&o, "rsp_http2_connections", "gauge", "Client connections speaking HTTP/2.");
    out_printf(&o, "rsp_http2_connections %lld\n", (long long)t.h2_connections);
    family(&o, "rsp_http2_streams", "gauge", "HTTP/2 streams open, on all connections.");
    out_printf(&o, "rsp_http2_streams %lld\n", (long long)t.h2_streams);
    family(&o, "rsp_bytes_total", "counter", "Bytes read from clients (in) and written to them (out).");
    out_printf(&o, "rsp_bytes_total{direction=\"in\"} %llu\nrsp_bytes_total{direction=\"out\"} %llu\n",
        (unsigned long long)t.bytes_in, (unsigned long long)t.bytes_out);
    family(&o, "rsp_tls_handshakes_total", "counter", "TLS handshakes on the HTTPS port, by result.");
    out_printf(&o, "rsp_tls_handshakes_total{result=\"ok\"} %llu\nrsp_tls_handshakes_total{result=\"failed\"} %llu\n",
        (unsigned long long)t.tls_handshakes, (unsigned long long)t.tls_failures);
    family(&o, "rsp_spliced_bytes_total", "counter",
           "Response body bytes moved to clients by splice (also in rsp_bytes_total's out).");
    out_printf(&o, "rsp_spliced_bytes_total %llu\n", (unsigned long long)t.bytes_spliced);
    family(&o, "rsp_splice_pipes", "gauge", "Pipes open for splice, in use or kept idle.");
    out_printf(&o, "rsp_splice_pipes %lld\n", (long long)t.pipes);
    family(&o, "rsp_bodies_buffered_total", "counter",
           "Request bodies read whole before a backend was chosen.");
    out_printf(&o, "rsp_bodies_buffered_total %llu\n", (unsigned long long)t.bodies_buffered);
    family(&o, "rsp_spooled_bytes_total", "counter",
           "Bytes written to temporary files: request bodies (in) and responses (out).");
    out_printf(&o, "rsp_spooled_bytes_total{direction=\"in\"} %llu\n", (unsigned long long)t.spooled_in);
    out_printf(&o, "rsp_spooled_bytes_total{direction=\"out\"} %llu\n", (unsigned long long)t.spooled_out);
    family(&o, "rsp_temp_files", "gauge", "Temporary files open.");
    out_printf(&o, "rsp_temp_files %lld\n", (long long)t.temp_files);
    family(&o, "rsp_compressed_responses_total", "counter", "Responses compressed on the way out, by encoding.");
    for (size_t e = 0; e < 3; e++)
        out_printf(&o, "rsp_compressed_responses_total{encoding=\"%s\"} %llu\n", status_encodings[e].name,
            (unsigned long long)t.compressed[status_encodings[e].index]);
    family(&o, "rsp_compression_bytes_in_total", "counter", "Body bytes of compressed responses before compression.");
    out_printf(&o, "rsp_compression_bytes_in_total %llu\n", (unsigned long long)t.compress_in);
    family(&o, "rsp_compression_bytes_out_total", "counter", "Body bytes of compressed responses after compression.");
    out_printf(&o, "rsp_compression_bytes_out_total %llu\n", (unsigned long long)t.compress_out);
    family(&o, "rsp_compression_encoders", "gauge", "Encoders compressing a response now.");
    out_printf(&o, "rsp_compression_encoders %lld\n", (long long)t.encoders);
    family(&o, "rsp_compression_memory_bytes", "gauge", "Memory the encoders hold now.");
    out_printf(&o, "rsp_compression_memory_bytes %lld\n", (long long)t.encoder_memory);
    family(&o, "rsp_timeouts_total", "counter", "Timeouts that fired, by kind.");
    for (int i = 0; i < TIMEOUT_KINDS; i++)
        out_printf(&o, "rsp_timeouts_total{kind=\"%s\"} %llu\n", status_timeout_names[i],
            (unsigned long long)counter_value(&v->stats->timeouts[i]));
    metrics_limits(&o, v);
    family(&o, "rsp_config_reloads_total", "counter", "Config reloads (SIGHUP), by result.");
    out_printf(&o, "rsp_config_reloads_total{result=\"ok\"} %llu\nrsp_config_reloads_total{result=\"failed\"} %llu\n",
        (unsigned long long)f->reloads_ok, (unsigned long long)f->reloads_failed);
    family(&o, "rsp_config_generation", "gauge", "The config generation in service.");
    out_printf(&o, "rsp_config_generation %u\n", v->config->generation);
    family(&o, "rsp_workers", "gauge", "Processes serving clients.");
    out_printf(&o, "rsp_workers %zu\n", f->workers > 1 ? f->pid_count : 1);
    family(&o, "rsp_worker_restarts_total", "counter", "Workers started again after one died.");
    out_printf(&o, "rsp_worker_restarts_total %llu\n", (unsigned long long)f->restarts);
    if (acme_client_count() > 0)
        family(&o, "rsp_certificate_expiry_seconds", "gauge",
               "When each certificate the ACME client keeps expires, in seconds since 1970.");
    for (size_t i = 0; i < acme_client_count(); i++) {
        struct acme_certificate_status c = acme_client_status(i);

        if (c.not_after == 0)
            continue;
        out_printf(&o, "rsp_certificate_expiry_seconds{names=\"");
        for (size_t j = 0; j < c.name_count; j++) {
            out_printf(&o, "%s", j == 0 ? "" : ",");
            put_label(&o, c.names[j]);
        }
        out_printf(&o, "\"} %lld\n", (long long)c.not_after);
    }
    family(&o, "rsp_start_time_seconds", "gauge", "When rsp started, in seconds since 1970.");
    out_printf(&o, "rsp_start_time_seconds %.3f\n", f->started_at);
    return o.failed ? -1 : 0;
}
