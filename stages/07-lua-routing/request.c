/* request.c -- request semantics and the head for the backend. */
#include "request.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Headers that describe one connection, not the request: they must not
 * travel to the backend (RFC 9110, section 7.6.1). Upgrade waits for
 * chapter 09. The X-Forwarded-* and X-Real-IP headers are ours to set: a
 * client's own values would be lies a backend might believe. */
static const char *const dropped_headers[] = {
    "connection", "keep-alive", "proxy-connection", "te", "upgrade",
    "x-forwarded-proto", "x-forwarded-host", "x-real-ip",
};

/* Headers that Connection may not remove: they frame or route the request. */
static const char *const essential_headers[] = {
    "host", "content-length", "transfer-encoding",
};

static bool name_in(const char *buf, struct http_span name, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (http_span_is(buf, name, list[i]))
            return true;
    return false;
}

#define COUNT(array) (sizeof (array) / sizeof (array)[0])

/* Parses a Content-Length value: digits only, at most 18 of them. */
static int parse_length(const char *buf, struct http_span value, uint64_t *out)
{
    uint64_t n = 0;

    if (value.length == 0 || value.length > 18)
        return -1;
    for (size_t i = 0; i < value.length; i++) {
        char c = buf[value.offset + i];
        if (c < '0' || c > '9')
            return -1;
        n = n * 10 + (uint64_t)(c - '0');
    }
    *out = n;
    return 0;
}

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

/* If the target is in absolute form ("http://host:port/path"), finds the
 * host name in it. Returns 1 and sets *host if so, 0 for any other form,
 * -1 if the authority is not a plausible host. */
static int target_host(const char *buf, struct http_span target, struct http_span *host)
{
    const char *t = buf + target.offset;
    size_t skip, end;

    if (target.length > 7 && http_span_is(buf, (struct http_span){ target.offset, 7 }, "http://"))
        skip = 7;
    else if (target.length > 8 && http_span_is(buf, (struct http_span){ target.offset, 8 }, "https://"))
        skip = 8;
    else
        return 0;
    for (end = skip; end < target.length; end++)
        if (t[end] == '/' || t[end] == '?' || t[end] == '#')
            break;
    /* parse_host refuses user info ("user@host") along with anything else
     * that is not a host and port. */
    if (parse_host(buf, (struct http_span){ target.offset + skip, end - skip }, host) == -1 ||
        host->length == 0)
        return -1;
    return 1;
}

int request_check(const struct http_request *req, const char *buf, struct request_info *info)
{
    struct http_span authority;
    int absolute;
    int hosts = 0, lengths = 0, encodings = 0;
    uint64_t length = 0;

    memset(info, 0, sizeof *info);
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
            if (parse_length(buf, h->value, &n) == -1 || (lengths++ > 0 && n != length))
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
    /* A target in absolute form names its host itself, and RFC 9112
     * (section 3.2.2) says that name wins over Host. A backend might follow
     * either one, so we route by the target and insist that they agree. */
    absolute = target_host(buf, req->target, &authority);
    if (absolute == -1 ||
        (absolute == 1 && hosts > 0 && !http_span_equal(buf, authority, info->host)))
        return 400;
    if (absolute == 1)
        info->host = authority;
    if (encodings > 0)
        body_framer_init_chunked(&info->body);
    else
        body_framer_init_length(&info->body, length);
    return 0;
}

/* Trims blanks from both ends of span. */
static struct http_span trim(const char *buf, struct http_span span)
{
    while (span.length > 0 && (buf[span.offset] == ' ' || buf[span.offset] == '\t')) {
        span.offset++;
        span.length--;
    }
    while (span.length > 0 && (buf[span.offset + span.length - 1] == ' ' ||
                               buf[span.offset + span.length - 1] == '\t'))
        span.length--;
    return span;
}

/* True if header `name` is listed in one of the request's Connection
 * headers ("Connection: close, X-Custom" makes X-Custom hop-by-hop). */
static bool listed_in_connection(const struct http_request *req, const char *buf,
                                 struct http_span name)
{
    for (size_t i = 0; i < req->header_count; i++) {
        struct http_span value = req->headers[i].value;
        size_t start = 0;

        if (!http_span_is(buf, req->headers[i].name, "connection"))
            continue;
        while (start <= value.length) {
            size_t end = start;
            while (end < value.length && buf[value.offset + end] != ',')
                end++;
            struct http_span token = trim(buf, (struct http_span){ value.offset + start, end - start });
            if (http_span_equal(buf, token, name))
                return true;
            start = end + 1;
        }
    }
    return false;
}

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

int request_write_head(const struct http_request *req, const char *buf,
                       const struct request_info *info, const char *client_address,
                       struct buffer *out)
{
    bool content_length_sent = false;
    int rc = 0;

    /* The request line, as the client sent it. */
    rc |= append_span(out, buf, req->method);
    rc |= append_text(out, " ");
    rc |= append_span(out, buf, req->target);
    rc |= append_text(out, req->minor_version == 1 ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n");

    for (size_t i = 0; i < req->header_count; i++) {
        const struct http_header *h = &req->headers[i];

        if (http_span_is(buf, h->name, "x-forwarded-for") ||
            name_in(buf, h->name, dropped_headers, COUNT(dropped_headers)))
            continue;
        /* Identical duplicates of Content-Length were accepted; send one. */
        if (http_span_is(buf, h->name, "content-length")) {
            if (content_length_sent)
                continue;
            content_length_sent = true;
        }
        if (!name_in(buf, h->name, essential_headers, COUNT(essential_headers)) &&
            listed_in_connection(req, buf, h->name))
            continue;
        rc |= append_span(out, buf, h->name);
        rc |= append_text(out, ": ");
        rc |= append_span(out, buf, h->value);
        rc |= append_text(out, "\r\n");
    }

    /* X-Forwarded-For keeps the chain the client brought (it may have come
     * through other proxies), in one header, and adds the address we saw. */
    rc |= append_text(out, "X-Forwarded-For: ");
    for (size_t i = 0; i < req->header_count; i++) {
        const struct http_header *h = &req->headers[i];
        if (http_span_is(buf, h->name, "x-forwarded-for") && h->value.length > 0) {
            rc |= append_span(out, buf, h->value);
            rc |= append_text(out, ", ");
        }
    }
    rc |= append_text(out, client_address);
    rc |= append_text(out, "\r\nX-Real-IP: ");
    rc |= append_text(out, client_address);
    rc |= append_text(out, "\r\nX-Forwarded-Proto: http\r\n");
    if (info->host_header.length > 0) {
        rc |= append_text(out, "X-Forwarded-Host: ");
        rc |= append_span(out, buf, info->host_header);
        rc |= append_text(out, "\r\n");
    }
    rc |= append_text(out, "Connection: close\r\n\r\n");
    return rc == 0 ? 0 : -1;
}
