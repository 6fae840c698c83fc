/* status_page.c -- the status page: one self-contained HTML document (its
 * style inline, no script, no external asset), which the browser reloads
 * every five seconds, with the requests-per-second history drawn as an
 * inline SVG. Built to be read on a phone as well as on a desk. */
#include "status_private.h"

#include <stdio.h>
#include <unistd.h>

/* Writes text with &, <, >, " and ' escaped. */
static void put_html(struct out *o, const char *text)
{
    for (const char *p = text; *p != '\0'; p++) {
        switch (*p) {
        case '&': out_printf(o, "&amp;"); break;
        case '<': out_printf(o, "&lt;"); break;
        case '>': out_printf(o, "&gt;"); break;
        case '"': out_printf(o, "&quot;"); break;
        case '\'': out_printf(o, "&#39;"); break;
        default: out_printf(o, "%c", *p);
        }
    }
}

/* 1234567 -> "1.2 MB" */
static void put_bytes(struct out *o, uint64_t n)
{
    static const char *const units[] = { "B", "kB", "MB", "GB", "TB", "PB" };
    double value = (double)n;
    size_t u = 0;

    while (value >= 1000 && u + 1 < sizeof units / sizeof units[0]) {
        value /= 1000;
        u++;
    }
    out_printf(o, u == 0 ? "%.0f %s" : "%.1f %s", value, units[u]);
}

static void put_duration(struct out *o, double seconds)
{
    long s = (long)seconds;

    if (s >= 86400)
        out_printf(o, "%ldd %ldh", s / 86400, s % 86400 / 3600);
    else if (s >= 3600)
        out_printf(o, "%ldh %ldm", s / 3600, s % 3600 / 60);
    else if (s >= 60)
        out_printf(o, "%ldm %lds", s / 60, s % 60);
    else
        out_printf(o, "%lds", s);
}

/* A duration estimate: "12 ms", "1.25 s"; "-" for none (negative). */
static void put_latency(struct out *o, double seconds)
{
    if (seconds < 0)
        out_printf(o, "-");
    else if (seconds < 0.01)
        out_printf(o, "%.1f ms", seconds * 1000);
    else if (seconds < 1)
        out_printf(o, "%.0f ms", seconds * 1000);
    else
        out_printf(o, "%.2f s", seconds);
}

static void tile(struct out *o, const char *label, const char *format, unsigned long long n)
{
    out_printf(o, "<div class=\"tile\"><div class=\"n\">");
    out_printf(o, format, n);
    out_printf(o, "</div><div class=\"l\">%s</div></div>\n", label);
}

/* The history as a polyline scaled to its own highest second. */
static void put_history(struct out *o, const struct status_view *v)
{
    const double width = 600, height = 120;
    uint32_t peak = 1;

    for (size_t i = 0; i < v->history_count; i++)
        if (v->history[i] > peak)
            peak = v->history[i];
    out_printf(o, "<svg id=\"rps\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" "
                  "aria-label=\"requests per second, last %zu seconds\">\n"
                  "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" class=\"bg\"/>\n",
               width, height + 20, v->history_count, width, height);
    out_printf(o, "<polyline class=\"line\" points=\"");
    for (size_t i = 0; i < v->history_count; i++) {
        /* The newest second at the right edge, however few there are yet. */
        double x = width * (double)(i + STATUS_HISTORY - v->history_count) / (double)(STATUS_HISTORY - 1);
        double y = height - height * v->history[i] / peak;

        out_printf(o, "%.1f,%.1f ", x, y);
    }
    out_printf(o, "\"/>\n<text x=\"4\" y=\"14\">%u/s</text>\n"
                  "<text x=\"4\" y=\"%.0f\">%d min ago</text><text x=\"%.0f\" y=\"%.0f\" "
                  "text-anchor=\"end\">now</text>\n</svg>\n",
               peak, height + 16, STATUS_HISTORY / 60, width - 4, height + 16);
}

static void page_pool(struct out *o, const struct status_view *v, const char *name,
                      const struct pool *pool, bool *first)
{
    (void)v;
    (void)first;
    out_printf(o, "<section class=\"pool\"><h3>pool ");
    put_html(o, name);
    if (pool->root != NULL) { /* a pool of files: no backends to show */
        out_printf(o, " <small>files</small></h3>\n<p>files from ");
        put_html(o, pool->root);
        out_printf(o, "</p></section>\n");
        return;
    }
    out_printf(o, " <small>%s", pool_balance_name(pool));
    if (pool->balance == BALANCE_HASH) { /* and what it hashes */
        out_printf(o, " on ");
        put_html(o, pool->hash_text);
    }
    out_printf(o, "</small></h3>\n<table><tr><th>backend</th><th>state</th><th>checks</th>"
                  "<th>connects</th><th>in flight</th><th>requests</th><th>failures</th></tr>\n");
    for (size_t i = 0; i < pool->count; i++) {
        const struct backend *b = pool->backends[i];
        bool up = backend_takes_requests(b);

        out_printf(o, "<tr class=\"backend %s\" data-backend=\"", up ? "up" : "down");
        put_html(o, b->name);
        out_printf(o, "\" data-state=\"%s\"><td>", up ? "up" : "down");
        put_html(o, b->name);
        out_printf(o, "</td><td class=\"state\">%s</td><td>%s</td><td>%s</td><td>%lld</td>"
                      "<td>%llu</td><td>%llu</td></tr>\n",
                   up ? "up" : "down", backend_active_health(b), backend_down(b) ? "failing" : "ok",
                   (long long)stats_backend_in_flight(b->stats),
                   (unsigned long long)counter_value(&b->stats->requests),
                   (unsigned long long)counter_value(&b->stats->failures));
    }
    out_printf(o, "</table></section>\n");
}

static const char style[] =
    "body{font:15px/1.4 system-ui,sans-serif;margin:0;padding:12px;background:#f6f7f9;color:#222}"
    "h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:18px 0 6px}"
    "h3{font-size:15px;margin:10px 0 4px}small{color:#666;font-weight:normal}"
    ".meta{color:#555;font-size:13px}.tiles{display:flex;flex-wrap:wrap;gap:8px}"
    ".tile{background:#fff;border-radius:6px;padding:8px 12px;min-width:90px;box-shadow:0 1px 2px #0002}"
    ".n{font-size:20px;font-weight:600}.l{font-size:12px;color:#666}"
    "table{border-collapse:collapse;width:100%;background:#fff;font-size:13px}"
    "th,td{text-align:left;padding:4px 6px;border-bottom:1px solid #eee}"
    ".wrap{overflow-x:auto}tr.down td.state{color:#b00;font-weight:600}"
    "tr.up td.state{color:#070}svg{width:100%;height:auto;background:#fff;border-radius:6px}"
    ".bg{fill:#fff}.line{fill:none;stroke:#2563eb;stroke-width:2}"
    "svg text{font-size:11px;fill:#666}";

int status_render_html(struct buffer *out, const struct status_view *v)
{
    struct out o = { out, false };
    const struct status_facts *f = v->facts;
    uint32_t last = v->history_count > 0 ? v->history[v->history_count - 1] : 0;
    struct totals t;

    status_totals(v, &t);
    out_printf(&o, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
                   "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                   "<meta http-equiv=\"refresh\" content=\"5\">\n<title>rsp status</title>\n"
                   "<style>%s</style></head><body>\n", style);
    out_printf(&o, "<h1>rsp " RSP_VERSION "</h1>\n<div class=\"meta\">pid %ld, up ",
               (long)getpid());
    put_duration(&o, v->now - f->started_at);
    out_printf(&o, ", config generation %u (loaded ", v->config->generation);
    put_duration(&o, v->now - f->loaded_at);
    out_printf(&o, " ago), reloads %llu ok / %llu failed", (unsigned long long)f->reloads_ok,
               (unsigned long long)f->reloads_failed);
    if (f->workers > 1)
        out_printf(&o, ", %zu of %u workers, %llu restarted", f->pid_count, f->workers,
                   (unsigned long long)f->restarts);
    out_printf(&o, "</div>\n<h2>Traffic</h2>\n<div class=\"tiles\">\n");
    tile(&o, "requests", "%llu", (unsigned long long)t.requests);
    tile(&o, "last second", "%llu/s", last);
    tile(&o, "connections", "%llu", (unsigned long long)(t.connections > 0 ? t.connections : 0));
    tile(&o, "in flight", "%llu", (unsigned long long)(t.in_flight > 0 ? t.in_flight : 0));
    tile(&o, "over HTTP/1.x", "%llu", (unsigned long long)t.requests_http1);
    tile(&o, "over HTTP/2", "%llu", (unsigned long long)t.requests_http2);
    tile(&o, "HTTP/2 connections", "%llu", (unsigned long long)(t.h2_connections > 0 ? t.h2_connections : 0));
    tile(&o, "HTTP/2 streams", "%llu", (unsigned long long)(t.h2_streams > 0 ? t.h2_streams : 0));
    for (int i = 0; i < 5; i++) {
        char label[16];

        snprintf(label, sizeof label, "%dxx", i + 1);
        tile(&o, label, "%llu", (unsigned long long)t.classes[i]);
    }
    out_printf(&o, "<div class=\"tile\"><div class=\"n\">");
    put_bytes(&o, t.bytes_in);
    out_printf(&o, "</div><div class=\"l\">in</div></div>\n<div class=\"tile\"><div class=\"n\">");
    put_bytes(&o, t.bytes_out);
    out_printf(&o, "</div><div class=\"l\">out</div></div>\n</div>\n<p class=\"meta\">compressed:");
    for (size_t e = 0; e < 3; e++)
        out_printf(&o, " %s %llu%s", status_encodings[e].name,
                   (unsigned long long)t.compressed[status_encodings[e].index], e < 2 ? "," : "");
    out_printf(&o, " responses; ");
    put_bytes(&o, t.compress_in);
    out_printf(&o, " in, ");
    put_bytes(&o, t.compress_out);
    out_printf(&o, " out; %lld encoders holding ", (long long)(t.encoders > 0 ? t.encoders : 0));
    put_bytes(&o, (uint64_t)(t.encoder_memory > 0 ? t.encoder_memory : 0));
    out_printf(&o, "</p>\n<h2>Requests per second</h2>\n");
    put_history(&o, v);
    out_printf(&o, "<h2>Timeouts</h2>\n<div class=\"tiles\">\n");
    for (int i = 0; i < TIMEOUT_KINDS; i++)
        tile(&o, status_timeout_names[i], "%llu",
             (unsigned long long)counter_value(&v->stats->timeouts[i]));
    out_printf(&o, "</div>\n<h2>Backends</h2>\n<div class=\"wrap\">\n");
    status_for_each_pool(&o, v, page_pool);
    out_printf(&o, "</div>\n<h2>Sites</h2>\n<div class=\"wrap\"><table>\n<tr><th>site</th>"
                   "<th>requests</th><th>2xx</th><th>3xx</th><th>4xx</th><th>5xx</th><th>p50</th><th>p99</th></tr>\n");
    FOR_EACH_SITE(v, site) {
        uint64_t classes[5] = { 0 };
        struct histogram_view duration;

        for (size_t c = 0; c < STATS_CODES; c++) {
            size_t class = (c + STATS_FIRST_CODE) / 100 - 1;

            if (class < 5)
                classes[class] += counter_value(&site->codes[c]);
        }
        out_printf(&o, "<tr class=\"site\"><td>");
        put_html(&o, site->name);
        out_printf(&o, "</td><td>%llu</td><td>%llu</td><td>%llu</td><td>%llu</td><td>%llu</td>"
                       "<td class=\"p50\">",
                   (unsigned long long)site_requests(site), (unsigned long long)classes[1],
                   (unsigned long long)classes[2], (unsigned long long)classes[3],
                   (unsigned long long)classes[4]);
        histogram_read(&site->duration, &duration);
        put_latency(&o, histogram_quantile(&duration, 0.5));
        out_printf(&o, "</td><td class=\"p99\">");
        put_latency(&o, histogram_quantile(&duration, 0.99));
        out_printf(&o, "</td></tr>\n");
    }
    out_printf(&o, "</table></div>\n<p class=\"meta\">Also: <a href=\"/status.json\">status.json</a>, "
                   "<a href=\"/metrics\">metrics</a>. This page reloads every 5 seconds.</p>\n"
                   "</body></html>\n");
    return o.failed ? -1 : 0;
}
