/* https_redirect.c -- the plain HTTP port of a site that serves HTTPS. */
#include "https_redirect.h"

#include "acme.h"
#include "reply.h"

#include <stdio.h>
#include <string.h>

/* A redirect to https://HOST[:PORT]/path?query: the path in the normal
 * form rsp routes by, the port only when tls.listen's is not 443. 301 for
 * GET and HEAD; 308 for other methods, which a client must repeat as they
 * were (after a 301, browsers turn a POST into a GET and lose its body). */
static int redirect(const struct config *c, const char *buf, const struct request_info *info,
                    bool get_or_head, bool head_only, const char *connection, struct buffer *out)
{
    static const char html[] = "Content-Type: text/html; charset=utf-8\r\n";
    struct buffer headers = BUFFER_INIT;
    int status = get_or_head ? 301 : 308;
    char page[1024];
    int rc = 0;

    if (info->host.length == 0)
        return reply_error(out, 400, head_only, connection);
    rc |= buffer_append(&headers, "Location: https://", 18);
    rc |= buffer_append(&headers, buf + info->host.offset, info->host.length);
    if (strcmp(c->tls.listen_port, "443") != 0) {
        rc |= buffer_append(&headers, ":", 1);
        rc |= buffer_append(&headers, c->tls.listen_port, strlen(c->tls.listen_port));
    }
    if (info->path != NULL)
        rc |= buffer_append(&headers, info->path, info->path_length);
    else
        rc |= buffer_append(&headers, "/", 1); /* OPTIONS *: the site itself */
    if (info->has_query) {
        rc |= buffer_append(&headers, "?", 1);
        rc |= buffer_append(&headers, buf + info->query.offset, info->query.length);
    }
    rc |= buffer_append(&headers, "\r\n", 2);
    rc |= buffer_append(&headers, html, sizeof html - 1);
    if (rc == 0) {
        struct reply r = { status, buffer_bytes(&headers), buffer_length(&headers), page, 0 };
        r.body_length = reply_page(page, sizeof page, status, "This site is served over HTTPS.");
        rc = reply_append(out, &r, head_only, connection);
    }
    buffer_free(&headers);
    return rc == 0 ? 0 : -1;
}

int https_plain_answer(const struct config *c, const struct request_view *req,
                       const struct request_info *info, bool head_only, const char *connection,
                       struct buffer *out)
{
    bool get_or_head = request_method_is(req, "GET") || request_method_is(req, "HEAD");
    int rc;

    if (info->path != NULL && acme_path(info->path, info->path_length)) {
        if (c->tls.acme_webroot == NULL)
            return 0;
        rc = acme_answer(c->tls.acme_webroot, info->path, info->path_length, get_or_head, head_only,
                         connection, out);
        return rc == 0 ? 1 : -1;
    }
    if (c->tls.context == NULL || !c->tls.redirect_http)
        return 0;
    return redirect(c, req->buf, info, get_or_head, head_only, connection, out) == 0 ? 1 : -1;
}
