/* filter_compress.c -- the compression filter (see filter_compress.h). */
#include "filter_compress.h"

#include "accept_encoding.h"
#include "body_filter.h"
#include "buffer.h"
#include "exchange_private.h"
#include "log.h"
#include "stats.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct compress_filter {
    struct body_filter base;                /* first: the chain holds &base */
    const struct compress_settings *settings; /* the request's, owned by its config */
    struct encoder *enc;                    /* NULL: passing the body as it is */
    enum encoding encoding;
    struct buffer out;                      /* what the encoder gave, on its way out */
    bool failed;                            /* the encoder failed: the response was cut */
};

static const struct body_filter_ops compress_ops;

enum encoding filter_compress_accepted(const struct request_view *rq, unsigned allowed)
{
    size_t i = request_find_header(rq, "accept-encoding", 0);
    struct buffer all = BUFFER_INIT;
    enum encoding chosen;

    if (i == rq->header_count)
        return ENCODING_NONE;
    if (request_find_header(rq, "accept-encoding", i + 1) == rq->header_count) {
        const struct http_span *v = &rq->headers[i].value;
        return accept_encoding_choose(rq->buf + v->offset, v->length, allowed);
    }
    /* Several fields are one comma-separated list (RFC 9110 5.3). */
    for (; i < rq->header_count; i = request_find_header(rq, "accept-encoding", i + 1)) {
        const struct http_span *v = &rq->headers[i].value;
        if (buffer_append(&all, ",", 1) == -1 || buffer_append(&all, rq->buf + v->offset, v->length) == -1) {
            buffer_free(&all);
            return ENCODING_NONE; /* out of memory: sent as it is */
        }
    }
    chosen = accept_encoding_choose(buffer_bytes(&all), buffer_length(&all), allowed);
    buffer_free(&all);
    return chosen;
}

/* Counts the elements of the comma-separated list value that are token
 * (case ignored) in *same, and the others in *other (empty ones aside). */
static void list_tally(const char *value, const char *token, size_t *same, size_t *other)
{
    size_t n = strlen(token);

    *same = *other = 0;
    for (const char *p = value; *p != '\0';) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        const char *start = p;
        while (*p != '\0' && *p != ',')
            p++;
        const char *end = p;
        while (end > start && (end[-1] == ' ' || end[-1] == '\t'))
            end--;
        if ((size_t)(end - start) == n && strncasecmp(start, token, n) == 0)
            (*same)++;
        else if (end > start)
            (*other)++;
    }
}

/* Whether the comma-separated list value holds token (case ignored). */
static bool list_has(const char *value, const char *token)
{
    size_t same, other;

    list_tally(value, token, &same, &other);
    return same > 0;
}

/* Whether the comma-separated list value holds nothing but token (case
 * ignored; empty elements aside). */
static bool list_only(const char *value, const char *token)
{
    size_t same, other;

    list_tally(value, token, &same, &other);
    return other == 0;
}

/* Whether any field called name holds token in its list. */
static bool head_list_has(const struct response_head *head, const char *name, const char *token)
{
    for (size_t i = 0; i < head->count; i++)
        if (strcasecmp(head->fields[i].name, name) == 0 && list_has(head->fields[i].value, token))
            return true;
    return false;
}

/* Whether the response whose final head is `head` is compressed under
 * settings: see filter_compress.h. */
static bool compress_applies(const struct relay *relay, const struct response_head *head,
                             const struct compress_settings *settings)
{
    int i;

    if (!settings->on || relay->x->accepted == ENCODING_NONE || exchange_is_head_request(relay) ||
        head->status != 200 || head->body == RESPONSE_BODY_NONE)
        return false;
    if (head->body == RESPONSE_BODY_LENGTH && head->length < settings->min_length)
        return false;
    i = response_head_find(head, "Content-Encoding");
    if (i >= 0 && !list_only(head->fields[i].value, "identity"))
        return false;
    if (head_list_has(head, "Cache-Control", "no-transform"))
        return false;
    i = response_head_find(head, "Content-Type");
    return i >= 0 && media_type_compressible(head->fields[i].value, head->fields[i].value_length,
                                             settings->types, settings->type_count);
}

/* Publishes this process's encoders and their memory in its stats row. */
static void publish_encoders(void)
{
    size_t count, bytes;

    encoder_totals(&count, &bytes);
    stats_set_own(&stats_row()->encoders, (int64_t)count);
    stats_set_own(&stats_row()->encoder_memory, (int64_t)bytes);
}

/* Frees the filter's encoder, if it has one. */
static void drop_encoder(struct compress_filter *c)
{
    if (c->enc == NULL)
        return;
    encoder_free(c->enc);
    c->enc = NULL;
    publish_encoders();
}

/* Vary gets Accept-Encoding, once, unless it varies on everything. Every
 * Vary field becomes one. Returns 0, or -1 if out of memory. */
static int vary_on_encoding(struct response_head *head)
{
    struct buffer value = BUFFER_INIT;
    int rc = 0;

    if (head_list_has(head, "Vary", "*") || head_list_has(head, "Vary", "accept-encoding"))
        return 0;
    for (size_t i = 0; i < head->count && rc == 0; i++)
        if (strcasecmp(head->fields[i].name, "Vary") == 0 && head->fields[i].value_length > 0)
            rc = buffer_append(&value, head->fields[i].value, head->fields[i].value_length) |
                 buffer_append(&value, ", ", 2);
    rc |= buffer_append(&value, "Accept-Encoding", sizeof "Accept-Encoding");
    if (rc == 0)
        rc = response_head_set(head, "Vary", buffer_bytes(&value));
    buffer_free(&value);
    return rc == 0 ? 0 : -1;
}

/* A strong ETag becomes weak: the encoded bytes are not the resource's
 * (RFC 9110 8.8.1). Returns 0, or -1 if out of memory. */
static int weaken_etag(struct response_head *head)
{
    int i = response_head_find(head, "ETag");
    char *weak;
    int rc;

    if (i < 0 || head->fields[i].value[0] != '"')
        return 0;
    weak = malloc(head->fields[i].value_length + 3);
    if (weak == NULL)
        return -1;
    memcpy(weak, "W/", 2);
    memcpy(weak + 2, head->fields[i].value, head->fields[i].value_length + 1);
    rc = response_head_set(head, "ETag", weak);
    free(weak);
    return rc;
}

/* The head of an encoded body. Returns 0, or -1 if out of memory. */
static int encoded_head(struct response_head *head, enum encoding encoding)
{
    if (response_head_set(head, "Content-Encoding", encoding_name(encoding)) == -1 ||
        vary_on_encoding(head) == -1 || weaken_etag(head) == -1)
        return -1;
    response_head_remove(head, "Content-Length");
    response_head_remove(head, "Transfer-Encoding");
    response_head_remove(head, "Accept-Ranges");
    head->body = RESPONSE_BODY_UNKNOWN;
    return 0;
}

/* Decides (again, for a head that replaces one taken back) and, to
 * compress, makes an encoder and edits the head. */
static int compress_head(struct body_filter *f, struct relay *relay, struct response_head *head)
{
    struct compress_filter *c = (struct compress_filter *)f;
    enum encoding encoding = relay->x->accepted;

    drop_encoder(c);
    c->failed = false;
    buffer_free(&c->out);
    if (!compress_applies(relay, head, c->settings))
        return 0;
    c->enc = encoder_new(encoding);
    if (c->enc == NULL) {
        log_msg("out of memory starting a %s encoder; the response goes out as it is",
                encoding_name(encoding));
        return 0;
    }
    c->encoding = encoding;
    publish_encoders();
    if (encoded_head(head, encoding) == -1) {
        drop_encoder(c);
        return -1;
    }
    stats_add_own(&stats_row()->compressed[encoding], 1);
    return 0;
}

/* After an encoder call that returned rc: passes on what it gave, or,
 * when it failed, cuts the response (the client cannot decode the rest). */
static void pass_on(struct compress_filter *c, struct relay *relay, int rc)
{
    size_t n = buffer_length(&c->out);

    publish_encoders();
    if (n > 0) {
        stats_add_own(&stats_row()->compress_out, n);
        body_filter_data(relay, c->base.next, buffer_bytes(&c->out), n);
        buffer_free(&c->out);
    }
    if (rc == -1) {
        log_msg("the %s encoder failed (out of memory); response cut off", encoding_name(c->encoding));
        c->failed = true;
        drop_encoder(c);
        relay->x->phase = PHASE_DRAIN;
        relay->client_ops->fail(relay);
    }
}

static void compress_data(struct body_filter *f, struct relay *relay, const char *data, size_t len)
{
    struct compress_filter *c = (struct compress_filter *)f;

    if (c->failed)
        return;
    if (c->enc == NULL) {
        body_filter_data(relay, f->next, data, len);
        return;
    }
    stats_add_own(&stats_row()->compress_in, len);
    pass_on(c, relay, encoder_write(c->enc, data, len, &c->out));
}

static void compress_flush(struct body_filter *f, struct relay *relay)
{
    struct compress_filter *c = (struct compress_filter *)f;

    if (c->failed)
        return;
    if (c->enc != NULL)
        pass_on(c, relay, encoder_flush(c->enc, &c->out));
    if (!c->failed)
        body_filter_flush(relay, f->next);
}

static void compress_end(struct body_filter *f, struct relay *relay)
{
    struct compress_filter *c = (struct compress_filter *)f;

    if (c->failed)
        return;
    if (c->enc != NULL) {
        pass_on(c, relay, encoder_finish(c->enc, &c->out));
        if (c->failed)
            return;
        drop_encoder(c); /* its memory is given back with the body's end */
    }
    body_filter_end(relay, f->next);
}

static void compress_free(struct body_filter *f)
{
    struct compress_filter *c = (struct compress_filter *)f;

    drop_encoder(c);
    buffer_free(&c->out);
    free(c);
}

static const struct body_filter_ops compress_ops = {
    .head = compress_head, .data = compress_data, .flush = compress_flush,
    .end = compress_end, .free = compress_free,
};

int filter_compress_attach(struct relay *relay, const struct response_head *head,
                           const struct compress_settings *settings)
{
    struct exchange *x = relay->x;
    struct compress_filter *c;

    for (struct body_filter *f = x->filters; f != NULL; f = f->next)
        if (f->ops == &compress_ops)
            return 0;
    if (!compress_applies(relay, head, settings))
        return 0;
    c = calloc(1, sizeof *c);
    if (c == NULL)
        return -1;
    c->base.ops = &compress_ops;
    c->settings = settings;
    c->out = (struct buffer)BUFFER_INIT;
    c->base.next = x->filters;
    x->filters = &c->base;
    return 0;
}
