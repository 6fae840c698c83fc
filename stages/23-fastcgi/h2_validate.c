/* h2_validate.c -- the rules an HTTP/2 request head must follow before
 * it becomes an HTTP/1.1 request to a backend.
 *
 * nghttp2 (HTTP messaging left on) checks most of them first, each a
 * stream error: pseudo-header fields unknown, repeated, after a regular
 * field, missing (:method, :scheme, :path; :authority for CONNECT) or
 * empty; :method not a token, :scheme not a scheme, :path not starting
 * with '/' (or "*" for OPTIONS) or holding blanks or control bytes,
 * :authority with such bytes; no :authority and no host; two host
 * fields; a name with an upper-case letter; connection, keep-alive,
 * proxy-connection, transfer-encoding, upgrade; te other than
 * "trailers"; content-length not a number, or two of them; DATA more or
 * less than content-length. Other bad names and values (NUL, CR, LF,
 * other control bytes, blanks around a value) it would only drop: rsp's
 * on_invalid_header callback makes those stream errors too (h2_request.c).
 *
 * What is rsp's alone: :authority and host naming different hosts, and
 * userinfo ('@') in :authority (RFC 9113, 8.3.1); CONNECT, answered 405
 * as over HTTP/1.1; and the limits (431). Everything else is checked
 * again here, and the body against content-length in h2_request.c: with
 * nghttp2's checks switched off (nghttp2_option_set_no_http_messaging),
 * fuzz/test_h2.c passes all the same. What reaches a backend does not
 * depend on a library option staying set, and a head written as HTTP/1.1
 * from these fields can never carry a second request. */
#include "h2.h"

#include "http.h"

#include <string.h>
#include <strings.h>

/* True if the text equals the lower-case string s exactly. */
static bool str_is(struct h2_str t, const char *s)
{
    return t.length == strlen(s) && memcmp(t.data, s, t.length) == 0;
}

/* True if the text equals the lower-case string s, ignoring case. */
static bool str_is_nocase(struct h2_str t, const char *s)
{
    if (t.length != strlen(s))
        return false;
    for (size_t i = 0; i < t.length; i++) {
        char c = t.data[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != s[i])
            return false;
    }
    return true;
}

/* A regular field name: tchars, none upper case (RFC 9113, 8.2.1). */
static bool name_ok(const char *name, size_t length)
{
    if (length == 0)
        return false;
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!http_is_token_char(c) || (c >= 'A' && c <= 'Z'))
            return false;
    }
    return true;
}

/* A field value: no NUL, CR, LF or other control byte but HTAB, and no
 * blank at either end (RFC 9113, 8.2.1; RFC 9110, 5.5). */
static bool value_ok(const char *value, size_t length)
{
    for (size_t i = 0; i < length; i++)
        if (!http_is_value_char((unsigned char)value[i]))
            return false;
    if (length > 0) {
        char first = value[0], last = value[length - 1];
        if (first == ' ' || first == '\t' || last == ' ' || last == '\t')
            return false;
    }
    return true;
}

/* The fields that only mean something to one HTTP/1 connection. */
static bool connection_specific(struct h2_str name)
{
    return str_is(name, "connection") || str_is(name, "keep-alive") ||
           str_is(name, "proxy-connection") || str_is(name, "transfer-encoding") ||
           str_is(name, "upgrade");
}

enum h2_field_verdict h2_field_check(const char *name, size_t name_length,
                                     const char *value, size_t value_length)
{
    struct h2_str n = { name, name_length };

    if (name_length > 0 && name[0] == ':') {
        if (!name_ok(name + 1, name_length - 1))
            return H2_FIELD_MALFORMED;
    } else if (!name_ok(name, name_length) || connection_specific(n)) {
        return H2_FIELD_MALFORMED;
    }
    if (!value_ok(value, value_length))
        return H2_FIELD_MALFORMED;
    if (str_is(n, "te") && !str_is_nocase((struct h2_str){ value, value_length }, "trailers"))
        return H2_FIELD_MALFORMED;
    return H2_FIELD_OK;
}

/* :scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) (RFC 3986, 3.1). */
static bool scheme_ok(struct h2_str s)
{
    if (s.length == 0)
        return false;
    for (size_t i = 0; i < s.length; i++) {
        unsigned char c = (unsigned char)s.data[i];
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (!alpha && (i == 0 || !((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.')))
            return false;
    }
    return true;
}

/* :path: "*", or '/' then visible ASCII (what an HTTP/1 target may hold). */
static bool path_ok(struct h2_str p, struct h2_str method)
{
    if (p.length == 1 && p.data[0] == '*')
        return str_is(method, "OPTIONS");
    if (p.length == 0 || p.data[0] != '/')
        return false;
    for (size_t i = 0; i < p.length; i++)
        if ((unsigned char)p.data[i] <= 0x20 || (unsigned char)p.data[i] >= 0x7f)
            return false;
    return true;
}

/* An authority (host[:port], no userinfo): visible ASCII without '@', or
 * anything that could end the Host line or the target early. */
static bool authority_ok(struct h2_str a)
{
    if (a.length == 0)
        return false;
    for (size_t i = 0; i < a.length; i++) {
        unsigned char c = (unsigned char)a.data[i];
        if (c <= 0x20 || c >= 0x7f || c == '@' || c == '/' || c == '?' || c == '#' || c == '\\')
            return false;
    }
    return true;
}

/* True if the method is a token (RFC 9110, 9.1). */
static bool method_ok(struct h2_str m)
{
    if (m.length == 0)
        return false;
    for (size_t i = 0; i < m.length; i++)
        if (!http_is_token_char((unsigned char)m.data[i]))
            return false;
    return true;
}

/* Records a pseudo-header field in head. Returns NULL, or why not. */
static const char *take_pseudo(const struct h2_header *f, struct h2_request_head *head,
                               unsigned *seen)
{
    static const char *const names[] = { ":method", ":scheme", ":authority", ":path" };
    struct h2_str *slots[] = { &head->method, &head->scheme, &head->authority, &head->path };

    for (unsigned i = 0; i < 4; i++) {
        if (!str_is(f->name, names[i]))
            continue;
        if (*seen & (1u << i))
            return "a repeated pseudo-header field";
        *seen |= 1u << i;
        *slots[i] = f->value;
        return NULL;
    }
    return "an unknown pseudo-header field";
}

/* Checks the regular field f against what came before. Returns NULL, or
 * why the request is malformed. */
static const char *take_regular(const struct h2_header *f, struct h2_request_head *head,
                                struct h2_str *host, bool *has_host)
{
    if (str_is(f->name, "host")) {
        if (*has_host)
            return "a repeated host field";
        *has_host = true;
        *host = f->value;
    } else if (str_is(f->name, "content-length")) {
        uint64_t n;
        if (http_parse_length(f->value.data, (struct http_span){ 0, f->value.length }, 18, &n) == -1)
            return "content-length is not a number";
        if (head->has_content_length && n != head->content_length)
            return "two content-length values";
        head->has_content_length = true;
        head->content_length = n;
    }
    return NULL;
}

const char *h2_request_check(const struct h2_header *fields, size_t count,
                             struct h2_request_head *head, bool *connect)
{
    struct h2_str host = { NULL, 0 };
    bool has_host = false, regular_seen = false;
    unsigned seen = 0;
    const char *why;

    memset(head, 0, sizeof *head);
    *connect = false;
    for (size_t i = 0; i < count; i++) {
        const struct h2_header *f = &fields[i];
        if (h2_field_check(f->name.data, f->name.length, f->value.data, f->value.length) != H2_FIELD_OK)
            return "an invalid field";
        if (f->name.length > 0 && f->name.data[0] == ':') {
            if (regular_seen)
                return "a pseudo-header field after a regular one";
            why = take_pseudo(f, head, &seen);
        } else {
            regular_seen = true;
            why = take_regular(f, head, &host, &has_host);
        }
        if (why != NULL)
            return why;
    }
    if (!(seen & 1u) || !method_ok(head->method))
        return "no valid :method";
    if (str_is(head->method, "CONNECT")) {
        *connect = true;
        return "CONNECT";
    }
    if (!(seen & 2u) || !scheme_ok(head->scheme))
        return "no valid :scheme";
    if (!(seen & 8u) || !path_ok(head->path, head->method))
        return "no valid :path";
    if (!(seen & 4u)) {
        head->authority = host;
    } else if (has_host && (host.length != head->authority.length ||
                            strncasecmp(host.data, head->authority.data, host.length) != 0)) {
        return ":authority and host disagree";
    }
    if (!authority_ok(head->authority))
        return "no valid :authority or host";
    return NULL;
}

bool h2_field_is_taken_out(struct h2_str name)
{
    return str_is(name, "host") || str_is(name, "content-length") || str_is(name, "te");
}

bool h2_response_header_dropped(struct h2_str name)
{
    return str_is_nocase(name, "connection") || str_is_nocase(name, "keep-alive") ||
           str_is_nocase(name, "proxy-connection") || str_is_nocase(name, "transfer-encoding") ||
           str_is_nocase(name, "upgrade");
}
