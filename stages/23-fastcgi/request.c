/* request.c -- request semantics and the head for the backend. */
#include "request.h"

#include "path.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Besides the hop-by-hop headers (http_is_hop_by_hop; an upgrade's
 * Upgrade is written again on purpose), headers that must not travel to
 * the backend: those a backend may trust because we set them, where a
 * client's own values would be lies a backend might believe; those that
 * frameworks read as the scheme, port or path prefix the client used (Rack
 * believes X-Forwarded-Ssl before X-Forwarded-Proto); and two that some
 * frameworks take as the URL to serve instead of the request line's:
 * a path no rule of ours judged. */
static const char *const dropped_headers[] = {
    "x-forwarded-proto", "x-forwarded-host", "x-real-ip", "forwarded",
    "x-forwarded-port", "x-forwarded-ssl", "x-forwarded-scheme", "x-url-scheme",
    "front-end-https", "x-forwarded-prefix",
    "x-original-url", "x-rewrite-url",
};

static bool name_in(const char *buf, struct http_span name, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (http_span_is(buf, name, list[i]))
            return true;
    return false;
}

#define COUNT(array) (sizeof (array) / sizeof (array)[0])

/* Splits a Host value into the name (port removed). Returns 0, or -1 if
 * it is not a plausible host: reg-name or IP-literal, optional :port. */
static int parse_host(const char *buf, struct http_span value, struct http_span *name)
{
    const char *h = buf + value.offset;
    size_t len = value.length, end = len;

    if (len > 0 && h[0] == '[') {
        const char *close = memchr(h, ']', len);
        if (close == NULL)
            return -1;
        end = (size_t)(close - h) + 1;
    } else {
        const char *colon = memchr(h, ':', len);
        if (colon != NULL)
            end = (size_t)(colon - h);
    }
    for (size_t i = 0; i < end; i++) {
        char c = h[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.' || c == '_' || c == '~' ||
              (h[0] == '[' && (c == '[' || c == ']' || c == ':'))))
            return -1;
    }
    if (end < len) {
        if (h[end] != ':')
            return -1;
        for (size_t i = end + 1; i < len; i++)
            if (h[i] < '0' || h[i] > '9')
                return -1;
    }
    *name = (struct http_span){ value.offset, end };
    return 0;
}

/* Where the pieces of a request target are: the authority of an absolute
 * target, then its path, then its query. */
struct target {
    enum target_form form;
    struct http_span authority;   /* absolute form only */
    struct http_span path;        /* may be empty in absolute form */
    struct http_span query;       /* after the '?', if has_query */
    bool has_query;
};

struct request_view request_view_of(const struct http_request *req, const char *buf)
{
    return (struct request_view){ buf, req->method, req->target, req->headers, req->header_count,
                                  req->minor_version, false };
}

size_t request_find_header(const struct request_view *rq, const char *name, size_t from)
{
    size_t i = from;

    while (i < rq->header_count && !http_span_is(rq->buf, rq->headers[i].name, name))
        i++;
    return i;
}

/* True if the method is `name`: methods are case-sensitive. */
static bool method_is(const struct request_view *req, const char *name)
{
    size_t length = strlen(name);

    return req->method.length == length && memcmp(req->buf + req->method.offset, name, length) == 0;
}

bool request_method_is(const struct request_view *req, const char *name)
{
    return method_is(req, name);
}

/* Length of the scheme prefix ("http://", "https://") the target begins
 * with, or 0 if it begins with neither. */
static size_t scheme_length(const char *buf, struct http_span target)
{
    if (target.length >= 7 && http_span_is(buf, (struct http_span){ target.offset, 7 }, "http://"))
        return 7;
    if (target.length >= 8 && http_span_is(buf, (struct http_span){ target.offset, 8 }, "https://"))
        return 8;
    return 0;
}

/* Finds the form of the target and its pieces (RFC 9112, section 3.2).
 * Returns 0, or 400 for a form rsp does not route: another scheme
 * ("ftp://", "ws://") that a backend might act on while we route by Host,
 * "//host/path", which some read as a host, a bare word, or "*" with a
 * method other than OPTIONS. */
static int parse_target(const struct request_view *req, struct target *t)
{
    const char *buf = req->buf;
    struct http_span target = req->target;
    const char *text = buf + target.offset;
    size_t start, end;

    memset(t, 0, sizeof *t);
    if (target.length == 1 && text[0] == '*') {
        t->form = TARGET_ASTERISK;
        return method_is(req, "OPTIONS") ? 0 : 400;
    }
    if (text[0] == '/') {
        if (target.length > 1 && text[1] == '/')
            return 400;
        t->form = TARGET_ORIGIN;
        start = 0;
    } else {
        size_t skip = scheme_length(buf, target);
        struct http_span name;

        if (skip == 0)
            return 400;
        for (end = skip; end < target.length; end++)
            if (text[end] == '/' || text[end] == '?')
                break;
        t->form = TARGET_ABSOLUTE;
        t->authority = (struct http_span){ target.offset + skip, end - skip };
        /* parse_host refuses user info ("user@host") along with anything
         * else that is not a host and port. */
        if (parse_host(buf, t->authority, &name) == -1 || name.length == 0)
            return 400;
        start = end;
    }
    for (end = start; end < target.length && text[end] != '?'; end++)
        ;
    t->path = (struct http_span){ target.offset + start, end - start };
    if (end < target.length) {
        t->has_query = true;
        t->query = (struct http_span){ target.offset + end + 1, target.length - end - 1 };
    }
    return 0;
}

/* True if the normal path holds an escaped '/' or '\', or a bare '\'.
 * Backends such as nginx decode the escapes and then resolve "..", so
 * "/x/..%2Fadmin" would reach "/admin" while we judged a path below "/x";
 * Node's URL parser and IIS read a bare '\' as '/', so "/x/..\admin"
 * would too. */
static bool has_encoded_slash(const char *path, size_t length)
{
    for (size_t i = 0; i < length; i++) {
        if (path[i] == '\\')
            return true;
        if (path[i] == '%' && i + 2 < length &&
            ((path[i + 1] == '2' && path[i + 2] == 'F') || (path[i + 1] == '5' && path[i + 2] == 'C')))
            return true;
    }
    return false;
}

/* Sets info->path to the normal form of the target's path ("/" if it has
 * none). Returns 0, or 500 if out of memory. */
static int normalize_path(const char *buf, const struct target *t, struct request_info *info)
{
    /* Escapes may grow: a lone '%' becomes "%25" (path.h). */
    info->path = malloc(3 * t->path.length + 1);
    if (info->path == NULL)
        return 500;
    if (t->path.length == 0) {
        info->path[0] = '/'; /* "http://host" and "http://host?q" ask for "/" */
        info->path_length = 1;
    } else {
        info->path_length = path_normalize(buf + t->path.offset, t->path.length, info->path);
    }
    return 0;
}

int request_check(const struct request_view *req, const struct request_policy *policy,
                  struct request_info *info)
{
    const char *buf = req->buf;
    struct http_span authority_host = { 0, 0 };
    struct target target;
    int hosts = 0, lengths = 0, encodings = 0, status;
    uint64_t length = 0;

    memset(info, 0, sizeof *info);
    /* rsp forwards requests; it does not open tunnels. */
    if (method_is(req, "CONNECT"))
        return 405;
    for (size_t i = 0; i < req->header_count; i++) {
        const struct http_header *h = &req->headers[i];

        if (http_span_is(buf, h->name, "host")) {
            if (++hosts > 1 || parse_host(buf, h->value, &info->host) == -1)
                return 400;
            info->host_header = h->value;
        } else if (http_span_is(buf, h->name, "content-length")) {
            uint64_t n;
            /* Several Content-Length headers are only harmless if they
             * agree; if they differ, which one the backend believes is
             * anybody's guess. */
            if (http_parse_length(buf, h->value, 18, &n) == -1 || (lengths++ > 0 && n != length))
                return 400;
            length = n;
        } else if (http_span_is(buf, h->name, "transfer-encoding")) {
            /* The only coding a request may use with us: chunked, alone. */
            if (++encodings > 1 || !http_span_is(buf, h->value, "chunked"))
                return 400;
        }
    }
    /* HTTP/1.1 requires Host. Both framings at once is the classic
     * request-smuggling setup: refuse it. Transfer-Encoding is not HTTP/1.0. */
    if ((req->minor_version == 1 && hosts == 0) || (lengths > 0 && encodings > 0) ||
        (encodings > 0 && req->minor_version == 0))
        return 400;
    /* A fragment ("#...") stays with the client: it is never part of a
     * request target (RFC 9112, section 3.2). Backends disagree on what a
     * '#' there means (some cut the path at it), and route() would judge
     * one path while the backend serves another. */
    if (memchr(buf + req->target.offset, '#', req->target.length) != NULL)
        return 400;
    if ((status = parse_target(req, &target)) != 0)
        return status;
    /* A target in absolute form names its host itself, and RFC 9112
     * (section 3.2.2) says that name wins over Host. A backend might follow
     * either one, so we route by the target, insist that they agree, and
     * send the backend the target's authority as its Host. */
    if (target.form == TARGET_ABSOLUTE) {
        parse_host(buf, target.authority, &authority_host);
        if (hosts > 0 && !http_span_equal(buf, authority_host, info->host))
            return 400;
        info->host = authority_host;
        info->host_header = target.authority;
    }
    info->form = target.form;
    /* "OPTIONS http://host" asks about the whole server, as "OPTIONS *"
     * does, and goes on as that (RFC 9112, section 3.2.4). */
    info->whole_server = target.form == TARGET_ASTERISK ||
                         (target.form == TARGET_ABSOLUTE && method_is(req, "OPTIONS") &&
                          target.path.length == 0 && !target.has_query);
    info->query = target.query;
    info->has_query = target.has_query;
    if (target.form != TARGET_ASTERISK) {
        if ((status = normalize_path(buf, &target, info)) != 0)
            return status;
        if (!policy->allow_encoded_slashes && has_encoded_slash(info->path, info->path_length))
            return 400;
    }
    if (encodings > 0)
        body_framer_init_chunked(&info->body);
    else
        body_framer_init_length(&info->body, length);

    if (req->minor_version == 1)
        info->keep_alive = !http_list_has_word(buf, req->headers, req->header_count, "connection", "close");
    else
        info->keep_alive = http_list_has_word(buf, req->headers, req->header_count, "connection",
                                              "keep-alive");
    info->idempotent = method_is(req, "GET") || method_is(req, "HEAD") ||
                       method_is(req, "OPTIONS") || method_is(req, "TRACE") ||
                       method_is(req, "PUT") || method_is(req, "DELETE");
    if (req->minor_version == 1 &&
        http_list_has_word(buf, req->headers, req->header_count, "connection", "upgrade")) {
        /* The last Upgrade line, if there are several. */
        for (size_t i = request_find_header(req, "upgrade", 0); i < req->header_count;
             i = request_find_header(req, "upgrade", i + 1))
            info->upgrade = req->headers[i].value;
    }
    return 0;
}

void request_info_free(struct request_info *info)
{
    free(info->path);
    info->path = NULL;
    info->path_length = 0;
}

/* True if header `name` is listed in one of the request's Connection
 * headers ("Connection: close, X-Custom" makes X-Custom hop-by-hop). */
static int append(struct buffer *out, const char *data, size_t len)
{
    return buffer_append(out, data, len);
}

static int append_span(struct buffer *out, const char *buf, struct http_span span)
{
    return append(out, buf + span.offset, span.length);
}

static int append_text(struct buffer *out, const char *text)
{
    return append(out, text, strlen(text));
}

/* True if a header name has a '_'. CGI, WSGI and Rack hand headers to
 * applications as HTTP_X_REAL_IP and the like, where "X-Real-IP" and
 * "X_Real_IP" become one name: the client's could pass for ours. */
static bool has_underscore(const char *buf, struct http_span name)
{
    return memchr(buf + name.offset, '_', name.length) != NULL;
}

/* True if the header is not for the backend. */
static bool dropped(const struct request_view *req, const char *buf, const struct request_info *info,
                    const struct request_policy *policy, struct http_span name)
{
    if (http_span_is(buf, name, "x-forwarded-for") ||
        name_in(buf, name, dropped_headers, COUNT(dropped_headers)))
        return true;
    if (!policy->allow_underscores_in_headers && has_underscore(buf, name))
        return true;
    /* An absolute target's authority is the Host we send (written first). */
    if (info->form == TARGET_ABSOLUTE && http_span_is(buf, name, "host"))
        return true;
    /* Host routes the request: a Connection list cannot take it away. */
    return !http_span_is(buf, name, "host") &&
           http_is_hop_by_hop(buf, req->headers, req->header_count, name);
}

/* The request line in origin form: the path we judged (normal form), then
 * the query as sent; or "*" for OPTIONS asking about the whole server. */
static int append_request_line(const struct request_view *req, const char *buf,
                               const struct request_info *info, struct buffer *out)
{
    int rc = 0;

    rc |= append_span(out, buf, req->method);
    if (info->whole_server) {
        rc |= append_text(out, " *");
    } else {
        rc |= append_text(out, " ");
        rc |= append(out, info->path, info->path_length);
        if (info->has_query) {
            rc |= append_text(out, "?");
            rc |= append_span(out, buf, info->query);
        }
    }
    rc |= append_text(out, " HTTP/1.1\r\n"); /* whatever the client speaks: see exchange.c */
    return rc;
}

/* Appends the Forwarded header of RFC 7239: who asked (an IPv6 address
 * in brackets and quotes), over what, and for which host (quoted when it
 * holds a ':' or brackets, which a token may not). */
static int append_forwarded(const struct request_info *info, const char *buf,
                            const char *client_address, bool https, struct buffer *out)
{
    bool ipv6 = strchr(client_address, ':') != NULL;
    struct http_span host = info->host_header;
    bool quote_host = memchr(buf + host.offset, ':', host.length) != NULL ||
                      memchr(buf + host.offset, '[', host.length) != NULL;
    int rc = 0;

    rc |= append_text(out, ipv6 ? "Forwarded: for=\"[" : "Forwarded: for=");
    rc |= append_text(out, client_address);
    rc |= append_text(out, ipv6 ? "]\";proto=" : ";proto=");
    rc |= append_text(out, https ? "https" : "http");
    if (host.length > 0) {
        rc |= append_text(out, quote_host ? ";host=\"" : ";host=");
        rc |= append_span(out, buf, host);
        rc |= append_text(out, quote_host ? "\"" : "");
    }
    rc |= append_text(out, "\r\n");
    return rc;
}

int request_write_head(const struct request_view *req, const struct request_info *info,
                       const struct request_policy *policy, const struct request_origin *origin,
                       const char *server_port, bool https, bool keep_backend,
                       struct buffer *out)
{
    const char *buf = req->buf;
    bool content_length_sent = false;
    int rc = append_request_line(req, buf, info, out);

    if (info->form == TARGET_ABSOLUTE) {
        rc |= append_text(out, "Host: ");
        rc |= append_span(out, buf, info->host_header);
        rc |= append_text(out, "\r\n");
    } else if (request_find_header(req, "host", 0) == req->header_count) {
        /* An HTTP/1.0 client may leave Host out; HTTP/1.1, which we speak
         * to the backend, requires one, empty if there is no name. */
        rc |= append_text(out, "Host: \r\n");
    }
    for (size_t i = 0; i < req->header_count; i++) {
        const struct http_header *h = &req->headers[i];

        if (dropped(req, buf, info, policy, h->name))
            continue;
        if (info->drop_authorization && http_span_is(buf, h->name, "authorization"))
            continue;
        /* A buffered body's length is known: it takes the place of the
         * framing the client chose, and nothing is left to expect
         * (chapter 17). */
        if (info->buffered && (http_span_is(buf, h->name, "content-length") ||
                               http_span_is(buf, h->name, "transfer-encoding"))) {
            char line[48];
            snprintf(line, sizeof line, "Content-Length: %llu\r\n",
                     (unsigned long long)info->buffered_length);
            if (!content_length_sent)
                rc |= append_text(out, line);
            content_length_sent = true;
            continue;
        }
        if (info->buffered && http_span_is(buf, h->name, "expect"))
            continue;
        /* Identical duplicates of Content-Length were accepted; send one. */
        if (http_span_is(buf, h->name, "content-length")) {
            if (content_length_sent)
                continue;
            content_length_sent = true;
        }
        rc |= append_span(out, buf, h->name);
        rc |= append_text(out, ": ");
        rc |= append_span(out, buf, h->value);
        rc |= append_text(out, "\r\n");
    }

    /* X-Forwarded-For keeps the chain the client brought (it may have come
     * through other proxies), in one header, and adds the address we saw;
     * a chain from a peer trusted_proxies does not name is dropped. */
    rc |= append_text(out, "X-Forwarded-For: ");
    for (size_t i = request_find_header(req, "x-forwarded-for", 0);
         origin->keep_chain && i < req->header_count;
         i = request_find_header(req, "x-forwarded-for", i + 1)) {
        const struct http_header *h = &req->headers[i];
        if (h->value.length > 0) {
            rc |= append_span(out, buf, h->value);
            rc |= append_text(out, ", ");
        }
    }
    rc |= append_text(out, origin->peer);
    rc |= append_text(out, "\r\nX-Real-IP: ");
    rc |= append_text(out, origin->client);
    rc |= append_text(out, https ? "\r\nX-Forwarded-Proto: https\r\n" : "\r\nX-Forwarded-Proto: http\r\n");
    rc |= append_text(out, "X-Forwarded-Port: ");
    rc |= append_text(out, server_port);
    rc |= append_text(out, "\r\n");
    if (info->host_header.length > 0) {
        rc |= append_text(out, "X-Forwarded-Host: ");
        rc |= append_span(out, buf, info->host_header);
        rc |= append_text(out, "\r\n");
    }
    rc |= append_forwarded(info, buf, origin->client, https, out);
    if (info->upgrade.length > 0) {
        rc |= append_text(out, "Upgrade: ");
        rc |= append_span(out, buf, info->upgrade);
        rc |= append_text(out, "\r\nConnection: upgrade\r\n");
    } else if (!keep_backend) {
        rc |= append_text(out, "Connection: close\r\n");
    }
    rc |= append_text(out, "\r\n");
    return rc == 0 ? 0 : -1;
}
