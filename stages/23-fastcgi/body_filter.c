/* body_filter.c -- the chain between a response's producer and the
 * client (body_filter.h), and its last step: the client. */
#include "body_filter.h"

#include "log.h"
#include "relay_private.h"
#include "response_output.h"

#include <stdio.h>
#include <stdlib.h>

int body_filter_head(struct relay *relay, struct response_head *head)
{
    struct exchange *x = relay->x;

    x->chunked = false; /* a head taken back (exchange_fail_request) is not the last */
    if (response_output_filters(relay, head) == -1)
        return -1;
    for (struct body_filter *f = x->filters; f != NULL; f = f->next)
        if (f->ops->head(f, relay, head) == -1)
            return -1;
    /* The operator's header edits come last: they hold whatever the
     * filters did (they may not touch the framing fields: config_files.c). */
    if (response_output_headers(relay, head) == -1)
        return -1;
    if (head->body != RESPONSE_BODY_UNKNOWN || relay->client_ops->is_stream)
        return 0;
    if (x->minor_version == 0) {
        x->keep_client = false; /* its end is the close */
        return 0;
    }
    x->chunked = true;
    return response_head_set(head, "Transfer-Encoding", "chunked");
}

/* Appends one chunk of data (len > 0) in the chunked coding to out.
 * Returns 0, or -1 if out of memory. */
static int append_chunk(struct buffer *out, const char *data, size_t len)
{
    char size[24];
    int n = snprintf(size, sizeof size, "%zx\r\n", len);
    int rc = buffer_append(out, size, (size_t)n);

    rc |= buffer_append(out, data, len);
    rc |= buffer_append(out, "\r\n", 2);
    return rc == 0 ? 0 : -1;
}

void body_filter_data(struct relay *relay, struct body_filter *to, const char *data, size_t len)
{
    struct buffer chunk = BUFFER_INIT;

    if (to != NULL) {
        to->ops->data(to, relay, data, len);
    } else if (!relay->x->chunked) {
        exchange_to_client(relay, data, len);
    } else if (len > 0) {
        if (append_chunk(&chunk, data, len) == -1) {
            log_msg("out of memory framing a response body");
            relay->client_ops->fail(relay);
        } else {
            exchange_to_client(relay, buffer_bytes(&chunk), buffer_length(&chunk));
        }
        buffer_free(&chunk);
    }
}

void body_filter_flush(struct relay *relay, struct body_filter *to)
{
    if (to != NULL)
        to->ops->flush(to, relay);
}

void body_filter_end(struct relay *relay, struct body_filter *to)
{
    if (to != NULL)
        to->ops->end(to, relay);
    else if (relay->x->chunked)
        exchange_to_client(relay, "0\r\n\r\n", 5);
}

void body_filter_free_all(struct relay *relay)
{
    struct exchange *x = relay->x;

    while (x->filters != NULL) {
        struct body_filter *f = x->filters;

        x->filters = f->next;
        f->ops->free(f);
    }
}
