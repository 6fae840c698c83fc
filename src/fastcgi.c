/* fastcgi.c -- the FastCGI record layer (see fastcgi.h). */
#include "fastcgi.h"

#include "http.h"

#include <string.h>
#include <strings.h>

/* Padding that brings n up to a multiple of 8. */
static size_t padding_for(size_t n)
{
    return (8 - n % 8) % 8;
}

int fcgi_append_header(struct buffer *out, enum fcgi_type type, size_t content_length, size_t padding)
{
    unsigned char h[FCGI_HEADER_LEN] = {
        FCGI_VERSION_1, (unsigned char)type, 0, FCGI_REQUEST_ID,
        (unsigned char)(content_length >> 8), (unsigned char)content_length, (unsigned char)padding, 0,
    };

    return buffer_append(out, (const char *)h, sizeof h);
}

int fcgi_append_begin(struct buffer *out, bool keep)
{
    unsigned char body[8] = { 0, FCGI_RESPONDER, keep ? FCGI_KEEP_CONN : 0, 0, 0, 0, 0, 0 };

    if (fcgi_append_header(out, FCGI_BEGIN_REQUEST, sizeof body, 0) == -1)
        return -1;
    return buffer_append(out, (const char *)body, sizeof body);
}

/* Appends a pair's length: one byte below 128, else four with the top bit set. */
static int append_length(struct buffer *out, size_t n)
{
    unsigned char b[4] = { (unsigned char)(n >> 24 | 0x80), (unsigned char)(n >> 16), (unsigned char)(n >> 8),
                           (unsigned char)n };

    if (n < 128) {
        b[0] = (unsigned char)n;
        return buffer_append(out, (const char *)b, 1);
    }
    return buffer_append(out, (const char *)b, 4);
}

int fcgi_append_pair(struct buffer *out, const char *name, size_t name_length, const char *value,
                     size_t value_length)
{
    if (name_length > 0x7fffffff || value_length > 0x7fffffff)
        return -1;
    if (append_length(out, name_length) == -1 || append_length(out, value_length) == -1 ||
        buffer_append(out, name, name_length) == -1 || buffer_append(out, value, value_length) == -1)
        return -1;
    return 0;
}

int fcgi_append_stream(struct buffer *out, enum fcgi_type type, const char *data, size_t len)
{
    static const char zeros[8];

    if (len == 0)
        return fcgi_append_header(out, type, 0, 0);
    while (len > 0) {
        size_t n = len < FCGI_MAX_CONTENT ? len : FCGI_MAX_CONTENT, pad = padding_for(n);

        if (fcgi_append_header(out, type, n, pad) == -1 || buffer_append(out, data, n) == -1 ||
            buffer_append(out, zeros, pad) == -1)
            return -1;
        data += n;
        len -= n;
    }
    return 0;
}

/* Reads a pair's length at data[*at]; -1 if the bytes end first. */
static int64_t read_length(const unsigned char *data, size_t len, size_t *at)
{
    if (*at >= len)
        return -1;
    if (data[*at] < 128)
        return data[(*at)++];
    if (len - *at < 4)
        return -1;
    int64_t n = (int64_t)(data[*at] & 0x7f) << 24 | (int64_t)data[*at + 1] << 16 | (int64_t)data[*at + 2] << 8 |
                data[*at + 3];
    *at += 4;
    return n;
}

int fcgi_pair_decode(const char *data, size_t len, size_t *used, const char **name, size_t *name_length,
                     const char **value, size_t *value_length)
{
    const unsigned char *d = (const unsigned char *)data;
    size_t at = 0;
    int64_t n = read_length(d, len, &at), v = n < 0 ? -1 : read_length(d, len, &at);

    if (v < 0 || (uint64_t)n + (uint64_t)v > len - at)
        return -1;
    *name = data + at;
    *name_length = (size_t)n;
    *value = data + at + n;
    *value_length = (size_t)v;
    *used = at + (size_t)n + (size_t)v;
    return 0;
}

void fcgi_parser_init(struct fcgi_parser *p)
{
    memset(p, 0, sizeof *p);
}

/* Refuses with why. */
static enum fcgi_result refuse(struct fcgi_parser *p, const char *why)
{
    p->error = why;
    return FCGI_ERROR;
}

/* A whole header is held: checks it and starts its record. */
static enum fcgi_result begin_record(struct fcgi_parser *p)
{
    const unsigned char *h = p->header;
    unsigned id = (unsigned)h[2] << 8 | h[3];
    size_t length = (size_t)h[4] << 8 | h[5];

    p->header_have = 0;
    if (h[0] != FCGI_VERSION_1)
        return refuse(p, "a record of a FastCGI version other than 1");
    if (id != FCGI_REQUEST_ID)
        return refuse(p, "a record for a request id other than 1");
    if (h[1] != FCGI_STDOUT && h[1] != FCGI_STDERR && h[1] != FCGI_END_REQUEST)
        return refuse(p, "a record of a type a responder does not send");
    if (h[1] == FCGI_END_REQUEST && length != sizeof p->end_body)
        return refuse(p, "an END_REQUEST record whose body is not 8 bytes");
    p->type = h[1];
    p->content_left = length;
    p->padding_left = h[6];
    p->end_have = 0;
    return FCGI_MORE;
}

/* The END_REQUEST body is held: the event. */
static void end_event(struct fcgi_parser *p, struct fcgi_event *event)
{
    const unsigned char *b = p->end_body;

    event->kind = FCGI_EVENT_END;
    event->data = NULL;
    event->length = 0;
    event->app_status = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
    event->protocol_status = b[4];
}

enum fcgi_result fcgi_parse(struct fcgi_parser *p, const char *data, size_t len, size_t *used,
                            struct fcgi_event *event)
{
    size_t at = 0;

    *used = 0;
    if (p->error != NULL)
        return FCGI_ERROR;
    while (at < len) {
        if (p->ended)
            return refuse(p, "bytes after END_REQUEST");
        if (p->type == 0) {
            size_t n = FCGI_HEADER_LEN - p->header_have;
            if (n > len - at)
                n = len - at;
            memcpy(p->header + p->header_have, data + at, n);
            p->header_have += n;
            at += n;
            *used = at;
            if (p->header_have == FCGI_HEADER_LEN && begin_record(p) == FCGI_ERROR)
                return FCGI_ERROR;
            /* An empty record with no padding is over at once. */
            if (p->type != 0 && p->content_left == 0 && p->padding_left == 0 && p->type != FCGI_END_REQUEST)
                p->type = 0;
            continue;
        }
        if (p->content_left > 0) {
            size_t n = p->content_left < len - at ? p->content_left : len - at;
            p->content_left -= n;
            if (p->type == FCGI_END_REQUEST) {
                memcpy(p->end_body + p->end_have, data + at, n);
                p->end_have += n;
                at += n;
                *used = at;
                continue;
            }
            event->kind = p->type == FCGI_STDOUT ? FCGI_EVENT_STDOUT : FCGI_EVENT_STDERR;
            event->data = data + at;
            event->length = n;
            at += n;
            *used = at;
            if (p->content_left == 0 && p->padding_left == 0)
                p->type = 0;
            return FCGI_EVENT;
        }
        if (p->padding_left > 0) {
            size_t n = p->padding_left < len - at ? p->padding_left : len - at;
            p->padding_left -= n;
            at += n;
            *used = at;
        }
        if (p->content_left == 0 && p->padding_left == 0) {
            bool end = p->type == FCGI_END_REQUEST;
            p->type = 0;
            if (end) {
                p->ended = true;
                end_event(p, event);
                return FCGI_EVENT;
            }
        }
    }
    /* An END_REQUEST whose body and padding are complete at the input's end. */
    if (p->type == FCGI_END_REQUEST && p->content_left == 0 && p->padding_left == 0) {
        p->type = 0;
        p->ended = true;
        end_event(p, event);
        return FCGI_EVENT;
    }
    return FCGI_MORE;
}

/* One CGI header line (without its line end) checked: *colon set to the
 * colon's index. Returns 0, or -1 if it is not "name: value". */
static int cgi_line(const char *line, size_t n, size_t *colon)
{
    size_t i = 0;

    while (i < n && http_is_token_char((unsigned char)line[i]))
        i++;
    if (i == 0 || i == n || line[i] != ':')
        return -1;
    *colon = i;
    return 0;
}

/* The value of a field line after its colon, blanks trimmed. */
static void cgi_value(const char *line, size_t n, size_t colon, const char **value, size_t *length)
{
    size_t b = colon + 1, e = n;

    while (b < e && (line[b] == ' ' || line[b] == '\t'))
        b++;
    while (e > b && (line[e - 1] == ' ' || line[e - 1] == '\t'))
        e--;
    *value = line + b;
    *length = e - b;
}

/* The status line for a Status value ("404 Not Found", "404"): 0, or -1
 * if it is not three digits from 200 to 599 then an optional reason. */
static int cgi_status_line(struct buffer *line, const char *v, size_t n)
{
    if (n < 3 || v[0] < '2' || v[0] > '5' || v[1] < '0' || v[1] > '9' || v[2] < '0' || v[2] > '9' ||
        (n > 3 && v[3] != ' '))
        return -1;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < ' ' && v[i] != '\t')
            return -1;
    if (buffer_append(line, "HTTP/1.1 ", 9) == -1 || buffer_append(line, v, n) == -1)
        return -1;
    return 0;
}

/* Whether the field line (its name colon-long) is called name (lower case). */
static bool named(const char *line, size_t colon, const char *name)
{
    return strlen(name) == colon && strncasecmp(line, name, colon) == 0;
}

ssize_t fcgi_cgi_head(const char *data, size_t len, struct buffer *out)
{
    struct buffer status = BUFFER_INIT, fields = BUFFER_INIT;
    bool location = false;
    ssize_t rc = 0;
    size_t at = 0;

    while (rc == 0) {
        const char *nl = memchr(data + at, '\n', len - at);
        if (nl == NULL) {
            rc = len >= FCGI_CGI_HEAD_MAX ? -1 : 0;
            break;
        }
        size_t n = (size_t)(nl - (data + at)), next = at + n + 1, colon;
        const char *line = data + at;
        if (n > 0 && line[n - 1] == '\r')
            n--;
        if (next > FCGI_CGI_HEAD_MAX) {
            rc = -1;
        } else if (n == 0) {
            rc = (ssize_t)next; /* the empty line: the head is whole */
        } else if (cgi_line(line, n, &colon) == -1) {
            rc = -1;
        } else if (named(line, colon, "status")) {
            const char *v;
            size_t vl;
            cgi_value(line, n, colon, &v, &vl);
            if (buffer_length(&status) > 0 || cgi_status_line(&status, v, vl) == -1)
                rc = -1;
        } else {
            location |= named(line, colon, "location");
            if (buffer_append(&fields, line, n) == -1 || buffer_append(&fields, "\r\n", 2) == -1)
                rc = -1;
        }
        at = next;
    }
    if (rc > 0) {
        const char *line = location ? "HTTP/1.1 302 Found" : "HTTP/1.1 200 OK";
        if ((buffer_length(&status) == 0 && buffer_append(out, line, strlen(line)) == -1) ||
            buffer_append(out, buffer_bytes(&status), buffer_length(&status)) == -1 ||
            buffer_append(out, "\r\n", 2) == -1 ||
            buffer_append(out, buffer_bytes(&fields), buffer_length(&fields)) == -1 ||
            buffer_append(out, "\r\n", 2) == -1)
            rc = -1;
    }
    buffer_free(&status);
    buffer_free(&fields);
    return rc;
}
