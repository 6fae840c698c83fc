/* http.c -- the request- and response-head parser, one byte at a time.
 *
 * It follows RFC 9112 strictly where leniency could let two programs read
 * one message differently (the root of request smuggling): no white space
 * before a header's colon, no line folding, no control characters, no bare
 * CR. It is lenient where that is harmless: a line may end in a bare LF,
 * and empty lines before the request line are skipped. rsp writes a fresh
 * head for the backend, so such differences never travel further. */
#include "http.h"

#include <string.h>

enum state {
    S_START,           /* before the method, skipping empty lines */
    S_START_LF,        /* saw CR on an empty line before the method */
    S_METHOD,
    S_TARGET,
    S_VERSION,
    S_LINE_LF,         /* saw CR at the end of the request line */
    S_HEADER_START,    /* at the start of a header line, or the empty line */
    S_NAME,
    S_VALUE_START,     /* blanks after the colon */
    S_VALUE,
    S_HEADER_LF,       /* saw CR at the end of a header line */
    S_END_LF,          /* saw CR on the empty line */
};

/* A "tchar" of RFC 9110: what methods and header names are made of. */
static bool is_token_char(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Visible ASCII: what a request target is made of. */
static bool is_target_char(unsigned char c)
{
    return c > 0x20 && c < 0x7f;
}

/* A header value may hold visible ASCII, blanks, and bytes >= 0x80. */
static bool is_value_char(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

bool http_is_token_char(unsigned char c)
{
    return is_token_char(c);
}

bool http_is_value_char(unsigned char c)
{
    return is_value_char(c);
}

void http_request_init(struct http_request *req)
{
    memset(req, 0, sizeof *req);
    req->state = S_START;
}

/* Checks "HTTP/x.y" in buf[from, to). Returns 0 and sets the minor version
 * for 1.0 and 1.1, 505 for other well-formed versions, 400 otherwise. */
static int parse_version(struct http_request *req, const char *buf, size_t from, size_t to)
{
    const char *v = buf + from;

    if (to - from != 8 || memcmp(v, "HTTP/", 5) != 0 || v[6] != '.' ||
        v[5] < '0' || v[5] > '9' || v[7] < '0' || v[7] > '9')
        return 400;
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return 505;
    req->minor_version = v[7] - '0';
    return 0;
}

/* Records the header whose name and value end here. */
static int finish_header(struct http_request *req)
{
    struct http_header *h;

    if (req->header_count == HTTP_MAX_HEADERS)
        return 431;
    h = &req->headers[req->header_count++];
    h->value.offset = req->mark;
    h->value.length = req->value_end > req->mark ? req->value_end - req->mark : 0;
    return 0;
}

int http_parse_request(struct http_request *req, const char *buf, size_t len,
                       const struct http_limits *limits)
{
    size_t i;

    for (i = req->position; i < len; i++) {
        unsigned char c = (unsigned char)buf[i];
        bool in_request_line = req->state <= S_LINE_LF;
        int rc;

        /* Limits count every byte, line ends included. One line too long:
         * the request line is the URL's fault (414), a header line the
         * headers' (431). */
        if (i - req->line_start >= limits->max_line)
            return in_request_line ? 414 : 431;
        if (i >= limits->max_head)
            return 431;

        switch (req->state) {
        case S_START:
            if (c == '\r') {
                req->state = S_START_LF;
                break;
            }
            if (c == '\n') {
                req->line_start = i + 1;
                break;
            }
            if (!is_token_char(c))
                return 400;
            req->line_start = req->mark = i;
            req->state = S_METHOD;
            break;

        case S_METHOD:
            if (c == ' ') {
                req->method = (struct http_span){ req->mark, i - req->mark };
                req->mark = i + 1;
                req->state = S_TARGET;
            } else if (!is_token_char(c)) {
                return 400;
            }
            break;

        case S_TARGET:
            if (c == ' ' && i > req->mark) {
                req->target = (struct http_span){ req->mark, i - req->mark };
                req->mark = i + 1;
                req->state = S_VERSION;
            } else if (!is_target_char(c)) {
                return 400;
            }
            break;

        case S_VERSION:
            if (c == '\r' || c == '\n') {
                rc = parse_version(req, buf, req->mark, i);
                if (rc != 0)
                    return rc;
                if (c == '\n') {
                    req->line_start = i + 1;
                    req->state = S_HEADER_START;
                } else {
                    req->state = S_LINE_LF;
                }
            } else if (!is_target_char(c)) {
                return 400;
            }
            break;

        case S_START_LF:
            if (c != '\n')
                return 400; /* a bare CR */
            req->line_start = i + 1;
            req->state = S_START;
            break;

        case S_LINE_LF:
        case S_HEADER_LF:
            if (c != '\n')
                return 400; /* a bare CR */
            req->line_start = i + 1;
            req->state = S_HEADER_START;
            break;

        case S_HEADER_START:
            if (c == '\r') {
                req->state = S_END_LF;
            } else if (c == '\n') {
                req->head_length = i + 1;
                req->position = i + 1;
                return HTTP_DONE;
            } else if (is_token_char(c)) {
                if (req->header_count == HTTP_MAX_HEADERS)
                    return 431;
                req->headers[req->header_count].name.offset = i;
                req->mark = i;
                req->state = S_NAME;
            } else {
                return 400; /* includes obsolete line folding (SP, HTAB) */
            }
            break;

        case S_NAME:
            if (c == ':') {
                req->headers[req->header_count].name.length = i - req->mark;
                req->mark = req->value_end = i + 1;
                req->state = S_VALUE_START;
            } else if (!is_token_char(c)) {
                return 400; /* includes white space before the colon */
            }
            break;

        case S_VALUE_START:
            if (c == ' ' || c == '\t') {
                req->mark = req->value_end = i + 1;
                break;
            }
            req->state = S_VALUE;
            __attribute__((fallthrough)); /* this byte is the value's first */
        case S_VALUE:
            if (c == '\r' || c == '\n') {
                rc = finish_header(req);
                if (rc != 0)
                    return rc;
                if (c == '\n') {
                    req->line_start = i + 1;
                    req->state = S_HEADER_START;
                } else {
                    req->state = S_HEADER_LF;
                }
            } else if (!is_value_char(c)) {
                return 400;
            } else if (c != ' ' && c != '\t') {
                req->value_end = i + 1;
            }
            break;

        case S_END_LF:
            if (c != '\n')
                return 400;
            req->head_length = i + 1;
            req->position = i + 1;
            return HTTP_DONE;
        }
    }
    req->position = i;
    return HTTP_INCOMPLETE;
}

int http_parse_status_line(const char *buf, size_t len, size_t max)
{
    static const char prefix[] = "HTTP/1."; /* then 0 or 1, a space, three digits */
    int status = 0;

    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)buf[i];

        if (i >= max)
            return -1;
        if (i < 7) {
            if (c != (unsigned char)prefix[i])
                return -1;
        } else if (i == 7) {
            if (c != '0' && c != '1')
                return -1;
        } else if (i == 8) {
            if (c != ' ')
                return -1;
        } else if (i <= 11) {
            if (c < '0' || c > '9' || (i == 9 && (c < '1' || c > '5')))
                return -1;
            status = status * 10 + (c - '0');
        } else if (c == '\n') {
            return status; /* after the digits, a reason phrase, or a CR */
        } else if (c == '\r') {
            if (i + 1 < len && buf[i + 1] != '\n')
                return -1; /* a CR only right before the LF */
        } else if (i == 12 && c != ' ') {
            return -1;
        } else if (c != '\t' && (c < 0x20 || c == 0x7f)) {
            return -1; /* the reason phrase: visible characters, blanks, obs-text */
        }
    }
    return len >= max ? -1 : 0;
}

int http_parse_response(struct http_request *res, const char *buf, size_t len,
                        const struct http_limits *limits)
{
    int rc;

    if (res->state == S_START) {
        int status = http_parse_status_line(buf, len, limits->max_line);
        const char *end;

        if (status == 0)
            return HTTP_INCOMPLETE;
        if (status < 0)
            return 502;
        end = memchr(buf, '\n', len); /* there is one: the line is complete */
        res->status = status;
        res->minor_version = buf[7] - '0';
        res->position = res->line_start = (size_t)(end - buf) + 1;
        res->state = S_HEADER_START;
    }
    rc = http_parse_request(res, buf, len, limits);
    return rc == HTTP_INCOMPLETE || rc == HTTP_DONE ? rc : 502;
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

int http_parse_length(const char *buf, struct http_span span, size_t max_digits, uint64_t *length)
{
    uint64_t n = 0;

    if (span.length == 0 || span.length > max_digits)
        return -1;
    for (size_t i = 0; i < span.length; i++) {
        char c = buf[span.offset + i];
        if (c < '0' || c > '9')
            return -1;
        n = n * 10 + (uint64_t)(c - '0');
    }
    *length = n;
    return 0;
}

bool http_span_is(const char *buf, struct http_span span, const char *name)
{
    size_t n = strlen(name);

    if (span.length != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (lower(buf[span.offset + i]) != name[i])
            return false;
    return true;
}

bool http_span_equal(const char *buf, struct http_span a, struct http_span b)
{
    if (a.length != b.length)
        return false;
    for (size_t i = 0; i < a.length; i++)
        if (lower(buf[a.offset + i]) != lower(buf[b.offset + i]))
            return false;
    return true;
}

bool http_list_next(const char *buf, struct http_span value, size_t *position,
                    struct http_span *token)
{
    while (*position < value.length) {
        size_t start = *position, end = start;

        while (end < value.length && buf[value.offset + end] != ',')
            end++;
        *position = end + 1;
        while (start < end && (buf[value.offset + start] == ' ' || buf[value.offset + start] == '\t'))
            start++;
        while (end > start && (buf[value.offset + end - 1] == ' ' || buf[value.offset + end - 1] == '\t'))
            end--;
        if (end > start) {
            *token = (struct http_span){ value.offset + start, end - start };
            return true;
        }
    }
    return false;
}

/* The search of http_list_has and http_list_has_word: by span, or by
 * word when word is not NULL. */
static bool list_has(const char *buf, const struct http_header *headers, size_t count,
                     const char *header, struct http_span token, const char *word)
{
    for (size_t i = 0; i < count; i++) {
        struct http_span element;
        size_t position = 0;

        if (!http_span_is(buf, headers[i].name, header))
            continue;
        while (http_list_next(buf, headers[i].value, &position, &element))
            if (word != NULL ? http_span_is(buf, element, word) : http_span_equal(buf, element, token))
                return true;
    }
    return false;
}

bool http_list_has(const char *buf, const struct http_header *headers, size_t count,
                   const char *header, struct http_span token)
{
    return list_has(buf, headers, count, header, token, NULL);
}

bool http_list_has_word(const char *buf, const struct http_header *headers, size_t count,
                        const char *header, const char *word)
{
    return list_has(buf, headers, count, header, (struct http_span){ 0, 0 }, word);
}

bool http_is_hop_by_hop(const char *buf, const struct http_header *headers, size_t count,
                        struct http_span name)
{
    static const char *const always[] = {
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade",
    };

    for (size_t i = 0; i < sizeof always / sizeof always[0]; i++)
        if (http_span_is(buf, name, always[i]))
            return true;
    if (http_span_is(buf, name, "content-length") || http_span_is(buf, name, "transfer-encoding"))
        return false;
    return http_list_has(buf, headers, count, "connection", name);
}
