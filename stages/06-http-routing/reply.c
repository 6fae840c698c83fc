/* reply.c -- small, complete error responses. */
#include "reply.h"

#include "request.h"

#include <stdio.h>

static const char *reason_phrase(int status)
{
    switch (status) {
    case 400: return "Bad Request";
    case 405: return "Method Not Allowed";
    case 414: return "URI Too Long";
    case 421: return "Misdirected Request";
    case 431: return "Request Header Fields Too Large";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default:  return "Error";
    }
}

static const char *explanation(int status)
{
    switch (status) {
    case 400: return "rsp could not understand this request.";
    case 405: return "rsp forwards requests to web servers; it opens no tunnels (CONNECT).";
    case 414: return "The request line is longer than rsp accepts.";
    case 421: return "This server does not serve that host name.";
    case 431: return "The request's headers are larger than rsp accepts.";
    case 502: return "rsp could not get an answer from any backend server.";
    case 503: return "The server is too busy to answer right now; please try again shortly.";
    case 505: return "rsp speaks HTTP/1.0 and HTTP/1.1 only.";
    default:  return "rsp could not handle this request.";
    }
}

size_t reply_format(char *out, size_t size, int status, bool head_only)
{
    char body[512];
    int body_len, len;

    body_len = snprintf(body, sizeof body,
                        "<!DOCTYPE html>\n<html><head><title>%d %s</title></head>\n"
                        "<body><h1>%d %s</h1><p>%s</p></body></html>\n",
                        status, reason_phrase(status), status, reason_phrase(status),
                        explanation(status));
    len = snprintf(out, size,
                   "HTTP/1.1 %d %s\r\n"
                   "Content-Type: text/html; charset=utf-8\r\n"
                   "Content-Length: %d\r\n"
                   "%s"
                   "Connection: close\r\n"
                   "\r\n%s",
                   status, reason_phrase(status), body_len,
                   status == 405 ? REQUEST_ALLOW_HEADER "\r\n" : "", head_only ? "" : body);
    if (len < 0)
        return 0;
    return (size_t)len < size ? (size_t)len : size - 1;
}

void reply_error(struct connection *c, int status, bool head_only)
{
    char response[1024];
    size_t length = reply_format(response, sizeof response, status, head_only);

    if (length > 0)
        connection_write(c, response, length);
}
