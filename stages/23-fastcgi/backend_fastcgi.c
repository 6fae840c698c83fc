/* backend_fastcgi.c -- FastCGI as a backend protocol (backend_protocol.h),
 * rsp as the web server and php-fpm (or any responder) as the backend.
 *
 * The request goes as BEGIN_REQUEST (role RESPONDER, KEEP_CONN when the
 * connection is to be pooled), PARAMS -- CGI/1.1's variables for the
 * script fastcgi_script.c chose, and every header the request would carry
 * to an HTTP backend as HTTP_* -- then its body as STDIN records, ended by
 * an empty one. The body goes as its bytes alone (passes_through false:
 * a chunked body is read whole first, so CONTENT_LENGTH is known).
 *
 * What comes back is parsed by fastcgi.c: STDOUT is the script's CGI
 * output (a head whose Status and Location say the status, then the
 * body, which rsp frames for the client: chunked, or until the close, or
 * DATA frames; a script's Content-Length is kept, and what goes beyond
 * it dropped), STDERR goes to the error log (a line a second per backend
 * at most), and END_REQUEST ends the response; with KEEP_CONN and a clean
 * end the connection goes back to the idle pool. Records that make no
 * sense close the connection: 502, or a response cut off. */
#include "backend_protocol.h"
#include "exchange_private.h"
#include "fastcgi_script.h"

#include "body.h"
#include "http.h"
#include "log.h"
#include "request.h"
#include "response.h"
#include "stats.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The STDERR bytes logged of one write of a script, at most. */
#define STDERR_LOGGED 200


/* Appends the pair name=value (value of length n). Returns 0 or -1. */
static int param(struct buffer *pairs, const char *name, const char *value, size_t n)
{
    return fcgi_append_pair(pairs, name, strlen(name), value, n);
}

/* Appends name=value for a NUL-terminated value. */
static int param_text(struct buffer *pairs, const char *name, const char *value)
{
    return param(pairs, name, value, strlen(value));
}

/* The header name as its HTTP_ variable ("X-Real-IP": "HTTP_X_REAL_IP")
 * into out; false if it is not to go: Content-Length and Content-Type
 * (they go as CONTENT_*), Proxy (httpoxy: HTTP_PROXY would be taken for a
 * proxy setting by many libraries), Connection, Transfer-Encoding, and
 * any name with '_' (it would pass for one with '-'). */
static bool http_variable(const char *name, size_t n, char *out, size_t cap)
{
    static const char *const skipped[] = { "content-length", "content-type", "proxy", "connection",
                                           "transfer-encoding" };

    for (size_t i = 0; i < sizeof skipped / sizeof skipped[0]; i++)
        if (strlen(skipped[i]) == n && strncasecmp(name, skipped[i], n) == 0)
            return false;
    if (n + 6 > cap || memchr(name, '_', n) != NULL)
        return false;
    memcpy(out, "HTTP_", 5);
    for (size_t i = 0; i < n; i++)
        out[5 + i] = name[i] == '-' ? '_' : (char)toupper((unsigned char)name[i]);
    out[5 + n] = '\0';
    return true;
}

/* A field of the head request.c writes for an HTTP backend. */
struct field {
    const char *name, *value;
    size_t name_length, value_length;
};

/* The most fields that head may have: the client's, and the few rsp adds. */
#define FIELDS_MAX (HTTP_MAX_HEADERS + 16)

/* Splits the head request_write_head wrote (a request line, then lines
 * "Name: value" each ending in CRLF, then an empty line: rsp wrote it, so
 * no other shape needs reading) into fields. Returns how many, or -1 if
 * there are more than FIELDS_MAX or a line has no ':'. */
static int split_fields(const char *head, size_t n, struct field *fields)
{
    const char *end = head + n, *line = memchr(head, '\n', n);
    int count = 0;

    while (line != NULL && (line = line + 1) < end && *line != '\r') {
        const char *eol = memchr(line, '\r', (size_t)(end - line));
        const char *colon = eol == NULL ? NULL : memchr(line, ':', (size_t)(eol - line));
        if (colon == NULL || count == FIELDS_MAX)
            return -1;
        const char *value = colon + 1;
        while (value < eol && (*value == ' ' || *value == '\t'))
            value++;
        fields[count++] = (struct field){ line, value, (size_t)(colon - line), (size_t)(eol - value) };
        line = eol + 1;
    }
    return count;
}

/* The HTTP_* variables from the fields, those of one name joined by ", "
 * (by "; " for Cookie). Two fields give the same variable exactly when
 * their names are equal but for case (a name with '_' gives none), so
 * each name is turned into its variable once. */
static int http_params(struct buffer *pairs, const struct field *fields, int count)
{
    bool joined[FIELDS_MAX] = { false }; /* went with an earlier field of its name */
    int rc = 0;

    for (int i = 0; i < count && rc == 0; i++) {
        const struct field *h = &fields[i];
        char name[300];
        struct buffer value = BUFFER_INIT;

        if (joined[i] || !http_variable(h->name, h->name_length, name, sizeof name))
            continue;
        bool cookie = strcmp(name, "HTTP_COOKIE") == 0;
        rc |= buffer_append(&value, h->value, h->value_length);
        for (int j = i + 1; j < count && rc == 0; j++) {
            const struct field *o = &fields[j];
            if (o->name_length != h->name_length || strncasecmp(o->name, h->name, h->name_length) != 0)
                continue;
            joined[j] = true;
            rc |= buffer_append(&value, cookie ? "; " : ", ", 2);
            rc |= buffer_append(&value, o->value, o->value_length);
        }
        if (rc == 0)
            rc = param(pairs, name, buffer_bytes(&value), buffer_length(&value));
        buffer_free(&value);
    }
    return rc;
}

/* The forwarded fields (HTTP_*): those of the head request.c writes for
 * an HTTP backend, so that its drops and X-Forwarded-* apply alike. */
static int forwarded_params(const struct relay *relay, struct buffer *pairs)
{
    const struct exchange *x = relay->x;
    struct request_view view = relay_request_view(relay);
    struct request_origin origin = { exchange_client(relay), relay->client_address, x->chain_believed };
    struct buffer head = BUFFER_INIT;
    struct field fields[FIELDS_MAX];
    int rc = -1, count;

    if (request_write_head(&view, &x->info, &relay->config->policy, &origin, relay->server_port, relay->tls,
                           true, &head) == 0 &&
        (count = split_fields(buffer_bytes(&head), buffer_length(&head), fields)) >= 0)
        rc = http_params(pairs, fields, count);
    buffer_free(&head);
    return rc;
}

/* A request header's value (NULL if it has none). */
static const char *header(const struct request_view *view, const char *name, size_t *n)
{
    size_t i = request_find_header(view, name, 0);

    if (i == view->header_count)
        return NULL;
    *n = view->headers[i].value.length;
    return view->buf + view->headers[i].value.offset;
}

/* The body's length as CONTENT_LENGTH says it: "" without a body. */
static void content_length(const struct exchange *x, const struct request_view *view, char *out, size_t cap)
{
    size_t n;
    const char *v = header(view, "content-length", &n);

    out[0] = '\0';
    if (x->info.buffered)
        snprintf(out, cap, "%llu", (unsigned long long)x->info.buffered_length);
    else if (v != NULL && n < cap)
        snprintf(out, cap, "%.*s", (int)n, v);
}

/* CGI/1.1's variables of the request (RFC 3875, section 4.1). */
static int cgi_params(const struct relay *relay, struct buffer *pairs)
{
    const struct exchange *x = relay->x;
    const struct fastcgi_request *f = x->fastcgi;
    struct request_view view = relay_request_view(relay);
    char length[32], port[8];
    const char *type, *protocol = view.http2 ? "HTTP/2.0" : view.minor_version == 0 ? "HTTP/1.0" : "HTTP/1.1";
    size_t type_length = 0;
    int rc = 0;

    content_length(x, &view, length, sizeof length);
    type = header(&view, "content-type", &type_length);
    snprintf(port, sizeof port, "%u", relay->client_port);
    rc |= param_text(pairs, "GATEWAY_INTERFACE", "CGI/1.1");
    rc |= param_text(pairs, "SERVER_SOFTWARE", "rsp");
    rc |= param_text(pairs, "SCRIPT_FILENAME", f->script.filename);
    rc |= param_text(pairs, "SCRIPT_NAME", f->script.name);
    rc |= param_text(pairs, "PATH_INFO", "");
    rc |= param_text(pairs, "DOCUMENT_ROOT", f->root);
    rc |= param(pairs, "REQUEST_URI", view.buf + view.target.offset, view.target.length);
    rc |= param(pairs, "QUERY_STRING", x->info.has_query ? view.buf + x->info.query.offset : "",
                x->info.has_query ? x->info.query.length : 0);
    rc |= param(pairs, "REQUEST_METHOD", view.buf + view.method.offset, view.method.length);
    rc |= param(pairs, "CONTENT_TYPE", type != NULL ? type : "", type_length);
    rc |= param_text(pairs, "CONTENT_LENGTH", length);
    rc |= param(pairs, "SERVER_NAME", view.buf + x->info.host.offset, x->info.host.length);
    rc |= param_text(pairs, "SERVER_PORT", relay->server_port);
    rc |= param_text(pairs, "SERVER_PROTOCOL", protocol);
    rc |= param_text(pairs, "REMOTE_ADDR", exchange_client(relay));
    rc |= param_text(pairs, "REMOTE_PORT", port);
    rc |= param_text(pairs, "REDIRECT_STATUS", "200"); /* php's cgi.force_redirect asks for it */
    if (relay->tls)
        rc |= param_text(pairs, "HTTPS", "on");
    for (size_t i = 0; i < f->settings->param_count; i++)
        rc |= param_text(pairs, f->settings->params[2 * i], f->settings->params[2 * i + 1]);
    return rc == 0 ? 0 : -1;
}

/* BEGIN_REQUEST, then PARAMS and their end. KEEP_CONN only with the
 * site's keep_conn (config_fastcgi.c says why). */
static int fastcgi_request_head(const struct relay *relay, bool keep, struct buffer *out)
{
    struct fastcgi_request *f = relay->x->fastcgi;
    struct buffer pairs = BUFFER_INIT;
    int rc;

    keep = keep && f->settings->keep_conn;
    fcgi_parser_init(&f->parser);
    f->keep = keep;
    f->head_done = false;
    rc = cgi_params(relay, &pairs);
    if (rc == 0)
        rc = forwarded_params(relay, &pairs);
    if (rc == 0)
        rc = fcgi_append_begin(out, keep);
    if (rc == 0)
        rc = fcgi_append_stream(out, FCGI_PARAMS, buffer_bytes(&pairs), buffer_length(&pairs));
    if (rc == 0)
        rc = fcgi_append_stream(out, FCGI_PARAMS, NULL, 0);
    buffer_free(&pairs);
    return rc;
}

/* Body bytes as STDIN records. */
static int fastcgi_request_body(const char *data, size_t len, struct buffer *out)
{
    return len == 0 ? 0 : fcgi_append_stream(out, FCGI_STDIN, data, len);
}

/* The empty STDIN record: the body is over. */
static int fastcgi_request_end(struct buffer *out)
{
    return fcgi_append_stream(out, FCGI_STDIN, NULL, 0);
}

/* The script's STDERR to the error log: a line a second per backend at
 * most, cut at STDERR_LOGGED bytes, control characters made '?'. */
static void log_stderr(struct relay *relay, const char *data, size_t len)
{
    struct backend *b = relay->x->current;
    char text[STDERR_LOGGED + 1];
    size_t n = 0;
    double now = reactor_now();

    if (now < b->stderr_logged + 1.0)
        return;
    while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r'))
        len--;
    for (; n < len && n < STDERR_LOGGED; n++)
        text[n] = (unsigned char)data[n] < ' ' || data[n] == 0x7f ? '?' : data[n];
    text[n] = '\0';
    if (n == 0)
        return;
    b->stderr_logged = now;
    log_msg("fastcgi %s: stderr: %s%s", b->name, text, len > n ? "..." : "");
}

/* The response cannot go on: 502 while the client has had none of it
 * (a small response's head and body are held until the read's end:
 * exchange_refuse takes them back), else it is cut off. The connection
 * is not reused. */
static void broken(struct relay *relay, const char *what)
{
    relay->x->upstream_reusable = false;
    exchange_backend_broken(relay, what);
}

/* Bytes of the body, as the head framed it: none (HEAD, 204, 304), at
 * most its Content-Length, or all. */
static void body_bytes(struct relay *relay, const char *data, size_t len)
{
    struct exchange *x = relay->x;

    if (x->framing == FRAMING_NONE || len == 0)
        return;
    if (x->framing == FRAMING_LENGTH) {
        ssize_t n = body_frame(&x->response_body, data, len);
        if (n > 0)
            exchange_backend_body(relay, data, (size_t)n);
        return;
    }
    exchange_backend_body(relay, data, len);
}

/* The CGI head in text (its HTTP/1.1 form) is whole: parsed, framed, and
 * sent on. Returns true if the response goes on. */
static bool send_head(struct relay *relay, const char *text, size_t length)
{
    struct exchange *x = relay->x;
    static const struct http_limits limits = { FCGI_CGI_HEAD_MAX * 2, FCGI_CGI_HEAD_MAX * 2 };
    struct response_info info;

    stats_observe(&x->current->stats->response_time, reactor_now() - x->head_sent);
    x->response = malloc(sizeof *x->response);
    if (x->response == NULL) {
        broken(relay, "out of memory reading a response head");
        return false;
    }
    http_request_init(x->response);
    if (http_parse_response(x->response, text, length, &limits) != HTTP_DONE ||
        response_check(x->response, text, x->head_method, &info) != 0) {
        broken(relay, "sent a CGI head that is not a valid response head");
        return false;
    }
    /* No Content-Length: the body's end is END_REQUEST's; rsp frames it. */
    if (info.framing == FRAMING_CLOSE || info.framing == FRAMING_CHUNKED)
        info.framing = FRAMING_CHUNKED;
    else if (info.framing == FRAMING_LENGTH)
        body_framer_init_length(&x->response_body, info.length);
    info.backend_closes = !x->fastcgi->keep;
    if (exchange_backend_head(relay, text, &info) != 0) {
        broken(relay, "sent a response that cannot be passed on");
        return false;
    }
    free(x->response);
    x->response = NULL;
    return true;
}

/* STDOUT bytes: the CGI head until it is whole, then the body. Returns
 * true if the response goes on. */
static bool stdout_bytes(struct relay *relay, const char *data, size_t len)
{
    struct exchange *x = relay->x;
    struct buffer http = BUFFER_INIT;

    if (x->fastcgi->head_done) {
        body_bytes(relay, data, len);
        return true;
    }
    if (buffer_append(&x->response_head, data, len) == -1) {
        broken(relay, "out of memory reading a response head");
        return false;
    }
    ssize_t used = fcgi_cgi_head(buffer_bytes(&x->response_head), buffer_length(&x->response_head), &http);
    if (used == 0)
        return true;
    if (used < 0) {
        buffer_free(&http);
        broken(relay, "sent script output that does not begin with a CGI head");
        return false;
    }
    x->fastcgi->head_done = true;
    /* The exchange reads the head's fields in x->response_head
     * (buffering.c): the HTTP head goes there; the script's bytes after
     * its CGI head are the body's first. */
    struct buffer rest = x->response_head;
    x->response_head = http;
    bool on = send_head(relay, buffer_bytes(&x->response_head), buffer_length(&x->response_head));
    if (on) {
        buffer_free(&x->response_head);
        body_bytes(relay, buffer_bytes(&rest) + used, buffer_length(&rest) - (size_t)used);
    }
    buffer_free(&rest);
    return on;
}

/* END_REQUEST: the response is over, whole or not. left: bytes after it. */
static void end_request(struct relay *relay, const struct fcgi_event *ev, size_t left)
{
    struct exchange *x = relay->x;
    static const char *const statuses[] = { "complete", "cannot multiplex", "overloaded", "unknown role" };

    if (ev->protocol_status != FCGI_REQUEST_COMPLETE) {
        char what[96];
        snprintf(what, sizeof what, "ended the request with protocol status %d (%s)", ev->protocol_status,
                 ev->protocol_status < 4 ? statuses[ev->protocol_status] : "unknown");
        broken(relay, what);
        return;
    }
    if (!x->fastcgi->head_done) {
        broken(relay, "ended the request before the end of its CGI head");
        return;
    }
    if (x->framing == FRAMING_LENGTH && !x->response_body.done) {
        broken(relay, "ended the request before the end of its Content-Length");
        return;
    }
    /* Reusable when asked, cleanly ended, and the whole request went:
     * STDIN records still to come would reach php-fpm as the next
     * request's first bytes. */
    x->upstream_reusable = x->fastcgi->keep && left == 0 && x->request_sent > 0;
    exchange_response_finished(relay);
}

/* Bytes from the backend: records, parsed as they come. */
static void fastcgi_response_data(struct relay *relay, const char *data, size_t len)
{
    struct exchange *x = relay->x;
    struct fcgi_parser *p = &x->fastcgi->parser;

    while (len > 0) {
        struct fcgi_event ev;
        size_t used;
        enum fcgi_result rc = fcgi_parse(p, data, len, &used, &ev);

        data += used;
        len -= used;
        if (rc == FCGI_ERROR) {
            char what[128];
            snprintf(what, sizeof what, "sent malformed FastCGI records (%s)", p->error);
            broken(relay, what);
            return;
        }
        if (rc == FCGI_MORE)
            return;
        if (ev.kind == FCGI_EVENT_END) {
            end_request(relay, &ev, len);
            return;
        }
        if (ev.kind == FCGI_EVENT_STDERR)
            log_stderr(relay, ev.data, ev.length);
        else if (!stdout_bytes(relay, ev.data, ev.length))
            return;
    }
}

const struct backend_protocol backend_fastcgi = {
    .name = "FastCGI",
    .passes_through = false,
    .request_head = fastcgi_request_head,
    .request_body = fastcgi_request_body,
    .request_end = fastcgi_request_end,
    .response_data = fastcgi_response_data,
};
