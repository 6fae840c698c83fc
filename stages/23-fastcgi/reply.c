/* reply.c -- small, complete responses of rsp's own. */
#include "reply.h"

#include "request.h"

#include <stdio.h>
#include <string.h>

const char *reply_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 203: return "Non-Authoritative Information";
    case 204: return "No Content";
    case 205: return "Reset Content";
    case 206: return "Partial Content";
    case 300: return "Multiple Choices";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 421: return "Misdirected Request";
    case 422: return "Unprocessable Content";
    case 426: return "Upgrade Required";
    case 428: return "Precondition Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 451: return "Unavailable For Legal Reasons";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default:  return "";
    }
}

/* Why rsp answers with one of its own error statuses. */
static const char *explanation(int status)
{
    switch (status) {
    case 400: return "rsp could not understand this request.";
    case 403: return "rsp may not read what is at this address.";
    case 404: return "There is nothing at this address.";
    case 412: return "A precondition of the request does not hold for what is at this address.";
    case 414: return "The request line is longer than rsp accepts.";
    case 416: return "The range asked for begins past the end of what is at this address.";
    case 421: return "This server does not serve that host name.";
    case 429: return "Too many requests from your address; please wait a little and try again.";
    case 431: return "The request's headers are larger than rsp accepts.";
    case 405: return "rsp forwards requests to web servers; it opens no tunnels (CONNECT).";
    case 500: return "rsp's route function failed on this request, or a file could not be read; its log says which.";
    case 502: return "rsp could not get an answer from any backend server.";
    case 503: return "The server is too busy to answer right now; please try again shortly.";
    case 505: return "rsp speaks HTTP/1.0 and HTTP/1.1 only.";
    default:  return "rsp could not handle this request.";
    }
}

size_t reply_page(char *out, size_t size, int status, const char *explanation)
{
    int n = snprintf(out, size,
                     "<!DOCTYPE html>\n<html><head><title>%d %s</title></head>\n"
                     "<body><h1>%d %s</h1>%s%s%s</body></html>\n",
                     status, reply_reason(status), status, reply_reason(status),
                     explanation ? "<p>" : "", explanation ? explanation : "",
                     explanation ? "</p>" : "");
    if (n < 0)
        return 0;
    return (size_t)n < size ? (size_t)n : size - 1;
}

size_t reply_format(char *out, size_t size, int status, bool head_only)
{
    char body[1024];
    size_t body_len = reply_page(body, sizeof body, status, explanation(status));
    int n = snprintf(out, size,
                     "HTTP/1.1 %d %s\r\n"
                     "Content-Type: text/html; charset=utf-8\r\n"
                     "Content-Length: %zu\r\n"
                     "%s"
                     "Connection: close\r\n"
                     "\r\n%s",
                     status, reply_reason(status), body_len,
                     status == 405 ? REQUEST_ALLOW_HEADER "\r\n" : "", head_only ? "" : body);
    if (n < 0)
        return 0;
    return (size_t)n < size ? (size_t)n : size - 1;
}

static int append_text(struct buffer *out, const char *text)
{
    return buffer_append(out, text, strlen(text));
}

int reply_append(struct buffer *out, const struct reply *r, bool head_only, const char *connection)
{
    char line[128];
    int rc = 0;

    snprintf(line, sizeof line, "HTTP/1.1 %d %s\r\n", r->status, reply_reason(r->status));
    rc |= append_text(out, line);
    rc |= buffer_append(out, r->headers, r->headers_length);
    if (r->body != NULL) {
        snprintf(line, sizeof line, "Content-Length: %zu\r\n", r->body_length);
        rc |= append_text(out, line);
    }
    rc |= append_text(out, connection);
    rc |= append_text(out, "\r\n");
    if (r->body != NULL && !head_only)
        rc |= buffer_append(out, r->body, r->body_length);
    return rc == 0 ? 0 : -1;
}

int reply_error(struct buffer *out, int status, bool head_only, const char *connection)
{
    return reply_error_with(out, status, head_only, NULL, connection);
}

int reply_error_with(struct buffer *out, int status, bool head_only, const char *headers,
                     const char *connection)
{
    static const char html[] = "Content-Type: text/html; charset=utf-8\r\n";
    static const char html_allow[] = "Content-Type: text/html; charset=utf-8\r\n" REQUEST_ALLOW_HEADER "\r\n";
    char page[1024], head[512];
    struct reply r = { status, status == 405 ? html_allow : html, 0, page, 0 };

    if (headers != NULL) {
        snprintf(head, sizeof head, "%s%s", r.headers, headers);
        r.headers = head;
    }
    r.headers_length = strlen(r.headers);
    r.body_length = reply_page(page, sizeof page, status, explanation(status));
    return reply_append(out, &r, head_only, connection);
}
