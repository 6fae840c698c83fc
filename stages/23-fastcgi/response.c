/* response.c -- reading a backend's response head. */
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
