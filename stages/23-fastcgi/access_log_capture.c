/* access_log_capture.c -- what the access log keeps of an exchange: the
 * request's fields, copied while its head is still in the relay's buffer,
 * and the line written from them when the exchange ends (access_log.c
 * formats and writes it). */
#include "exchange_private.h"

#include "access_log.h"

#include <stdint.h>
#include <string.h>

/* Appends one field for the log to x->log_fields, recording its length
 * in slot i (data NULL: not there). Returns 0 or -1. */
static int keep_field(struct exchange *x, int i, const char *data, size_t length)
{
    x->log_lengths[i] = data == NULL ? SIZE_MAX : length;
    return data == NULL ? 0 : buffer_append(&x->log_fields, data, length);
}

/* The value of the request header `name` (lower case), or NULL. */
static const char *request_header(const struct relay *relay, const char *name, size_t *length)
{
    struct request_view rq = relay_request_view(relay);
    size_t i = request_find_header(&rq, name, 0);

    if (i == rq.header_count)
        return NULL;
    *length = rq.headers[i].value.length;
    return rq.buf + rq.headers[i].value.offset;
}

/* Copies what the access log needs of the request (its head is gone by
 * the time the response ends): the request line as far as it came (up to
 * its end of line, at most max_line bytes), and, from a whole head,
 * Referer, User-Agent and Host. Once per exchange; nothing without a log. */
void access_log_capture(struct relay *relay)
{
    struct exchange *x = relay->x;
    const char *buf = relay_bytes(relay), *referer = NULL, *agent = NULL, *host = NULL, *eol;
    size_t have = buffer_length(&relay->head), line, referer_length = 0, agent_length = 0, host_length = 0;

    if (!relay->config->operations.logging || x->log_captured || have == 0)
        return;
    /* Empty lines before a request line are allowed (and skipped). */
    while (have > 0 && (*buf == '\r' || *buf == '\n')) {
        buf++;
        have--;
    }
    if (have > relay->config->limits.max_line)
        have = relay->config->limits.max_line;
    eol = memchr(buf, '\n', have);
    line = eol != NULL ? (size_t)(eol - buf) : have;
    if (line > 0 && buf[line - 1] == '\r')
        line--;
    if (x->request != NULL && x->request->head_length > 0) {
        referer = request_header(relay, "referer", &referer_length);
        agent = request_header(relay, "user-agent", &agent_length);
        host = request_header(relay, "host", &host_length);
    }
    /* A stream's head stands for it in HTTP/1.1 (h2_relay.c): the line
     * names the protocol the client spoke. */
    bool http2 = relay->client_ops->is_stream && line > 9 && memcmp(buf + line - 9, " HTTP/1.1", 9) == 0;
    if (keep_field(x, 0, buf, http2 ? line - 3 : line) == -1 ||
        (http2 && buffer_append(&x->log_fields, "2.0", 3) == -1) ||
        keep_field(x, 1, referer, referer_length) == -1 ||
        keep_field(x, 2, agent, agent_length) == -1 || keep_field(x, 3, host, host_length) == -1) {
        buffer_free(&x->log_fields);
        return; /* out of memory: this request goes unlogged */
    }
    if (http2)
        x->log_lengths[0] += 3;
    x->log_captured = true;
}

/* The log the exchange's line goes to, in *format: the own log of the
 * site its Host names, none if that site has access_log = false, else
 * the top-level one (also for a request no site takes, or refused
 * before its Host was read). NULL: none. */
static struct access_log *exchange_log(const struct relay *relay, enum access_format *format)
{
    const struct operations *o = &relay->config->operations;
    const struct site *site = relay->x->log_site;

    *format = (enum access_format)o->access_log_format;
    if (site == NULL || (site->access_log == NULL && !site->access_log_off))
        return o->log;
    if (site->access_log_format != -1)
        *format = (enum access_format)site->access_log_format;
    return site->log;
}

/* Writes the exchange's access log line, if it had a request: with the
 * status the client got, or 499 (nginx's "client closed request") if it
 * left before any answer. */
void access_log_exchange(struct relay *relay)
{
    struct exchange *x = relay->x;
    const char *fields = buffer_bytes(&x->log_fields);
    enum access_format format;
    struct access_log *log;
    struct access_entry e;
    struct log_text text[4];

    if (!x->log_captured || (log = exchange_log(relay, &format)) == NULL)
        return;
    for (int i = 0; i < 4; i++) {
        size_t length = x->log_lengths[i];
        text[i] = (struct log_text){ length == SIZE_MAX ? NULL : fields, length == SIZE_MAX ? 0 : length };
        if (length != SIZE_MAX)
            fields += length;
    }
    e = (struct access_entry){
        .client = exchange_client(relay),
        .host = text[3],
        .port = relay->server_port,
        .request = text[0],
        .status = x->status != 0 ? x->status : 499,
        .body_bytes = x->body_bytes,
        .referer = text[1],
        .agent = text[2],
        .seconds = exchange_seconds(x),
        .backend = x->status != 0 && x->response_began && x->current != NULL ? x->current->name : NULL,
    };
    access_log_write(log, format, &e);
}
