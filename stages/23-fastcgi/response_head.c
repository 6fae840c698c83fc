/* response_head.c -- a response head as a structure: building it, editing
 * its fields, writing it as HTTP/1.1. */
#include "response_head.h"

#include "reply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void response_head_init(struct response_head *head, int status)
{
    const char *reason = reply_reason(status);

    *head = (struct response_head){ .status = status, .reason = reason, .reason_length = strlen(reason) };
}

void response_head_free(struct response_head *head)
{
    for (size_t i = 0; i < head->count; i++)
        free(head->fields[i].name);
    free(head->fields);
    head->fields = NULL;
    head->count = head->capacity = 0;
}

int response_head_find(const struct response_head *head, const char *name)
{
    for (size_t i = 0; i < head->count; i++)
        if (strcasecmp(head->fields[i].name, name) == 0)
            return (int)i;
    return -1;
}

int response_head_add(struct response_head *head, const char *name, size_t name_length,
                      const char *value, size_t value_length)
{
    struct response_field *f;
    char *text;

    if (head->count == head->capacity) {
        size_t capacity = head->capacity > 0 ? head->capacity * 2 : 16;
        struct response_field *fields = realloc(head->fields, capacity * sizeof *fields);
        if (fields == NULL)
            return -1;
        head->fields = fields;
        head->capacity = capacity;
    }
    text = malloc(name_length + value_length + 2);
    if (text == NULL)
        return -1;
    memcpy(text, name, name_length);
    text[name_length] = '\0';
    memcpy(text + name_length + 1, value, value_length);
    text[name_length + 1 + value_length] = '\0';
    f = &head->fields[head->count++];
    *f = (struct response_field){ text, text + name_length + 1, name_length, value_length };
    return 0;
}

/* Removes the field at index i, keeping the others' order. */
static void remove_at(struct response_head *head, size_t i)
{
    free(head->fields[i].name);
    memmove(&head->fields[i], &head->fields[i + 1], (head->count - i - 1) * sizeof head->fields[i]);
    head->count--;
}

void response_head_remove(struct response_head *head, const char *name)
{
    int i;

    while ((i = response_head_find(head, name)) != -1)
        remove_at(head, (size_t)i);
}

int response_head_set(struct response_head *head, const char *name, const char *value)
{
    int i = response_head_find(head, name);
    size_t at = i == -1 ? head->count : (size_t)i;
    struct response_field f;

    if (response_head_add(head, name, strlen(name), value, strlen(value)) == -1)
        return -1;
    /* The new one takes the first old one's place; the old ones go. */
    f = head->fields[--head->count];
    response_head_remove(head, name);
    memmove(&head->fields[at + 1], &head->fields[at], (head->count - at) * sizeof f);
    head->fields[at] = f;
    head->count++;
    return 0;
}

/* The reason phrase of a status line "HTTP/1.x NNN[ reason]" in buf (one
 * the parser accepted): into head. */
static void take_reason(struct response_head *head, const char *buf)
{
    size_t end = 12;

    while (buf[end] != '\r' && buf[end] != '\n')
        end++;
    head->reason = end > 12 ? buf + 13 : NULL;
    head->reason_length = end > 12 ? end - 13 : 0;
}

/* True if the backend's field h is not passed on (response_head_from_backend). */
static bool dropped(const struct http_request *res, const char *buf, const struct http_header *h,
                    bool chunked, const struct response_head_options *options)
{
    if (options->upgrade && http_span_is(buf, h->name, "upgrade")) {
        /* the one hop-by-hop header a 101 passes on */
    } else if (http_is_hop_by_hop(buf, res->headers, res->header_count, h->name)) {
        return true;
    }
    if (http_span_is(buf, h->name, "content-length") && (chunked || options->dechunk))
        return true;
    if (http_span_is(buf, h->name, "transfer-encoding") && options->dechunk)
        return true;
    if (options->replace_hsts && http_span_is(buf, h->name, "strict-transport-security"))
        return true;
    return http_span_is(buf, h->name, "x-accel-buffering");
}

int response_head_from_backend(struct response_head *head, const struct http_request *res,
                               const char *buf, enum response_framing framing, uint64_t length,
                               const struct response_head_options *options)
{
    bool chunked = false;

    *head = (struct response_head){ .status = res->status };
    take_reason(head, buf);
    for (size_t i = 0; i < res->header_count; i++)
        chunked |= http_span_is(buf, res->headers[i].name, "transfer-encoding");
    for (size_t i = 0; i < res->header_count; i++) {
        const struct http_header *h = &res->headers[i];

        if (dropped(res, buf, h, chunked, options))
            continue;
        if (response_head_add(head, buf + h->name.offset, h->name.length, buf + h->value.offset,
                              h->value.length) == -1) {
            response_head_free(head);
            return -1;
        }
    }
    if (framing == FRAMING_NONE)
        head->body = RESPONSE_BODY_NONE;
    else if (framing == FRAMING_LENGTH)
        head->body = RESPONSE_BODY_LENGTH;
    else
        head->body = options->dechunk ? RESPONSE_BODY_UNKNOWN : RESPONSE_BODY_AS_SENT;
    head->length = framing == FRAMING_LENGTH ? length : 0;
    return 0;
}

int response_head_parse(struct response_head *head, const char *text, size_t length,
                        size_t *body_offset)
{
    static const struct http_limits limits = { 65536, 65536 };
    struct http_request *res = malloc(sizeof *res);
    int rc = -1;

    *head = (struct response_head){ 0 };
    if (res == NULL)
        return -1;
    http_request_init(res);
    if (http_parse_response(res, text, length, &limits) == HTTP_DONE) {
        rc = 0;
        head->status = res->status;
        take_reason(head, text);
        for (size_t i = 0; i < res->header_count && rc == 0; i++)
            rc = response_head_add(head, text + res->headers[i].name.offset, res->headers[i].name.length,
                                   text + res->headers[i].value.offset, res->headers[i].value.length);
        *body_offset = res->head_length;
        head->length = length - res->head_length;
        head->body = head->length > 0 ? RESPONSE_BODY_LENGTH : RESPONSE_BODY_NONE;
    }
    free(res);
    if (rc == -1)
        response_head_free(head);
    return rc;
}

static int append_text(struct buffer *out, const char *text)
{
    return buffer_append(out, text, strlen(text));
}

int response_head_write(const struct response_head *head, const char *extra, struct buffer *out)
{
    char line[16];
    int rc = 0;

    snprintf(line, sizeof line, "HTTP/1.1 %d", head->status);
    rc |= append_text(out, line);
    if (head->reason != NULL) {
        rc |= buffer_append(out, " ", 1);
        rc |= buffer_append(out, head->reason, head->reason_length);
    }
    rc |= append_text(out, "\r\n");
    for (size_t i = 0; i < head->count; i++) {
        const struct response_field *f = &head->fields[i];

        rc |= buffer_append(out, f->name, f->name_length);
        rc |= append_text(out, ": ");
        rc |= buffer_append(out, f->value, f->value_length);
        rc |= append_text(out, "\r\n");
    }
    rc |= append_text(out, extra);
    rc |= append_text(out, "\r\n");
    return rc == 0 ? 0 : -1;
}
