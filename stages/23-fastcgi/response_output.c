/* response_output.c -- a site's output settings applied to responses
 * (see response_output.h). */
#include "response_output.h"

#include "filter_compress.h"
#include "mime.h"
#include "relay_private.h"

#include <stdio.h>
#include <string.h>

const struct site_output *response_output(const struct relay *relay)
{
    return site_output_for(relay->config, relay->x->output_site, relay->x->pool);
}

int response_output_filters(struct relay *relay, const struct response_head *head)
{
    return filter_compress_attach(relay, head, &response_output(relay)->compress);
}

int response_output_headers(const struct relay *relay, struct response_head *head)
{
    const struct site_output *o = response_output(relay);

    for (size_t i = 0; i < o->header_count; i++) {
        const struct header_edit *e = &o->headers[i];

        if (e->value == NULL)
            response_head_remove(head, e->name);
        else if (response_head_set(head, e->name, e->value) == -1)
            return -1;
    }
    return 0;
}

const struct error_page *response_output_page(const struct relay *relay, int status)
{
    return site_output_error_page(response_output(relay), status);
}

const char *error_page_content_type(const struct error_page *page)
{
    static struct mime_table *builtins;

    if (page->content_type != NULL)
        return page->content_type;
    /* No such file: the table holds the built-ins alone. */
    if (builtins == NULL)
        builtins = mime_table_load("");
    if (builtins == NULL)
        return MIME_DEFAULT_TYPE; /* out of memory */
    return mime_type_of(builtins, page->path, strlen(page->path));
}

int response_output_page_head(struct response_head *head, const struct error_page *page, bool head_only)
{
    char length[24];

    snprintf(length, sizeof length, "%zu", page->length);
    if (response_head_set(head, "Content-Type", error_page_content_type(page)) == -1 ||
        response_head_set(head, "Content-Length", length) == -1)
        return -1;
    head->body = head_only || page->length == 0 ? RESPONSE_BODY_NONE : RESPONSE_BODY_LENGTH;
    head->length = page->length;
    return 0;
}
