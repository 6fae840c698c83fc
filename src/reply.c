/* reply.c -- small, complete error responses. */
#include "reply.h"

#include <stdio.h>

static const char *reason_phrase(int status)
{
    switch (status) {
    case 400: return "Bad Request";
    case 414: return "URI Too Long";
    case 421: return "Misdirected Request";
    case 431: return "Request Header Fields Too Large";
    case 502: return "Bad Gateway";
    case 505: return "HTTP Version Not Supported";
    default:  return "Error";
    }
}

static const char *explanation(int status)
{
    switch (status) {
    case 400: return "rsp could not understand this request.";
    case 414: return "The request line is longer than rsp accepts.";
    case 421: return "This server does not serve that host name.";
    case 431: return "The request's headers are larger than rsp accepts.";
    case 502: return "rsp could not get an answer from any backend server.";
    case 505: return "rsp speaks HTTP/1.0 and HTTP/1.1 only.";
    default:  return "rsp could not handle this request.";
    }
}

void reply_error(struct connection *c, int status, bool head_only)
{
    char body[512], response[1024];
    int body_len, len;

    body_len = snprintf(body, sizeof body,
                        "<!DOCTYPE html>\n<html><head><title>%d %s</title></head>\n"
                        "<body><h1>%d %s</h1><p>%s</p></body></html>\n",
                        status, reason_phrase(status), status, reason_phrase(status),
                        explanation(status));
    len = snprintf(response, sizeof response,
                   "HTTP/1.1 %d %s\r\n"
                   "Content-Type: text/html; charset=utf-8\r\n"
                   "Content-Length: %d\r\n"
                   "Connection: close\r\n"
                   "\r\n%s",
                   status, reason_phrase(status), body_len, head_only ? "" : body);
    connection_write(c, response, (size_t)len);
}
