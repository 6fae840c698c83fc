/* response.c -- reading a backend's response head, writing the client's. */
#include "response.h"

#include <string.h>

/* The framing Transfer-Encoding gives: FRAMING_CHUNKED if its last coding
 * is chunked, FRAMING_CLOSE if chunked is not there at all, -1 if chunked
 * comes before another coding (RFC 9112, 6.1: chunked must be last, once). */
static int transfer_framing(const struct http_request *res, const char *buf)
{
    bool chunked_last = false, chunked_seen = false;

    for (size_t i = 0; i < res->header_count; i++) {
        struct http_span coding;
        size_t position = 0;

        if (!http_span_is(buf, res->headers[i].name, "transfer-encoding"))
            continue;
        while (http_list_next(buf, res->headers[i].value, &position, &coding)) {
            if (chunked_seen)
                return -1;
            chunked_last = chunked_seen = http_span_is(buf, coding, "chunked");
        }
    }
    return chunked_last ? FRAMING_CHUNKED : FRAMING_CLOSE;
}

int response_check(const struct http_request *res, const char *buf, bool head_request,
                   struct response_info *info)
{
    bool has_encoding = false, has_length = false;

    info->length = 0;
    for (size_t i = 0; i < res->header_count; i++) {
        const struct http_header *h = &res->headers[i];
        uint64_t length;

        if (http_span_is(buf, h->name, "transfer-encoding")) {
            has_encoding = true;
        } else if (http_span_is(buf, h->name, "content-length")) {
            /* Several are allowed only if they agree (RFC 9110, 8.6). */
            if (http_parse_length(buf, h->value, 15, &length) == -1 || (has_length && length != info->length))
                return 502;
            has_length = true;
            info->length = length;
        }
    }

    /* Whether the connection can carry another request. */
    if (res->minor_version == 0)
        info->backend_closes = !http_list_has_word(buf, res->headers, res->header_count,
                                                   "connection", "keep-alive");
    else
        info->backend_closes = http_list_has_word(buf, res->headers, res->header_count,
                                                  "connection", "close");

    if (head_request || (res->status >= 100 && res->status < 200) || res->status == 204 ||
        res->status == 304) {
        info->framing = FRAMING_NONE;
    } else if (has_encoding) {
        int framing = transfer_framing(res, buf);
        if (framing == -1)
            return 502;
        info->framing = (enum response_framing)framing;
    } else if (has_length) {
        info->framing = info->length > 0 ? FRAMING_LENGTH : FRAMING_NONE;
    } else {
        info->framing = FRAMING_CLOSE;
    }
    /* Close-delimited, or chunked from an HTTP/1.0 backend (RFC 9112, 6.1:
     * such framing is faulty; read to the end and do not reuse). */
    if (info->framing == FRAMING_CLOSE || (has_encoding && res->minor_version == 0))
        info->backend_closes = true;
    return 0;
}

const char *response_connection_line(enum response_connection mode)
{
    switch (mode) {
    case CONNECTION_PERSIST:    return "";
    case CONNECTION_KEEP_ALIVE: return "Connection: keep-alive\r\n";
    case CONNECTION_CLOSE:      return "Connection: close\r\n";
    case CONNECTION_UPGRADE:    return "Connection: upgrade\r\n";
    }
    return "";
}

static int append_span(struct buffer *out, const char *buf, struct http_span span)
{
    return buffer_append(out, buf + span.offset, span.length);
}

static int append_text(struct buffer *out, const char *text)
{
    return buffer_append(out, text, strlen(text));
}

int response_write_head(const struct http_request *res, const char *buf,
                        enum response_connection mode, bool dechunk, const char *hsts,
                        struct buffer *out)
{
    bool chunked = false;
    int rc = 0;

    for (size_t i = 0; i < res->header_count; i++)
        chunked |= http_span_is(buf, res->headers[i].name, "transfer-encoding");

    /* "HTTP/1.x " is 9 bytes; the status and reason follow as sent. */
    rc |= append_text(out, "HTTP/1.1 ");
    for (size_t end = 9; ; end++) {
        if (buf[end] == '\r' || buf[end] == '\n') {
            rc |= buffer_append(out, buf + 9, end - 9);
            break;
        }
    }
    rc |= append_text(out, "\r\n");
    for (size_t i = 0; i < res->header_count; i++) {
        const struct http_header *h = &res->headers[i];

        if (mode == CONNECTION_UPGRADE && http_span_is(buf, h->name, "upgrade")) {
            /* the one hop-by-hop header a 101 passes on */
        } else if (http_is_hop_by_hop(buf, res->headers, res->header_count, h->name)) {
            continue;
        }
        if (http_span_is(buf, h->name, "content-length") && (chunked || dechunk))
            continue;
        if (http_span_is(buf, h->name, "transfer-encoding") && dechunk)
            continue;
        if (hsts != NULL && hsts[0] != '\0' && http_span_is(buf, h->name, "strict-transport-security"))
            continue;
        /* A backend's word to its proxy, not the client's (chapter 17). */
        if (http_span_is(buf, h->name, "x-accel-buffering"))
            continue;
        rc |= append_span(out, buf, h->name);
        rc |= append_text(out, ": ");
        rc |= append_span(out, buf, h->value);
        rc |= append_text(out, "\r\n");
    }
    if (hsts != NULL)
        rc |= append_text(out, hsts);
    rc |= append_text(out, response_connection_line(mode));
    rc |= append_text(out, "\r\n");
    return rc == 0 ? 0 : -1;
}
