/* status.c -- the status listener: a very small HTTP server.
 *
 * Each status client sends one request (GET or HEAD, a head of at most
 * STATUS_HEAD_MAX bytes) and gets one answer with Connection: close. A
 * client gets STATUS_TIMEOUT seconds for all of it (and STATUS_LINGER more
 * to close once answered), and at most
 * STATUS_MAX_CLIENTS are served at once (a newcomer pushes out the oldest
 * client not in the middle of its answer): the page must never become a
 * way to tie rsp up.
 * Heads are read by the same strict parser as the public listener's, and
 * a client is a struct connection (connection.h) as the public
 * listener's are: its write queue, its half-close. Once a second the
 * server notes how many requests rsp has answered, for the history the
 * page draws. */
#define _GNU_SOURCE /* accept4 */
#include "status.h"

#include "clock.h"
#include "connection.h"
#include "generation.h"
#include "http.h"
#include "log.h"
#include "net.h"
#include "reactor.h"
#include "stats.h"
#include "timer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define STATUS_HEAD_MAX 8192
#define STATUS_TIMEOUT 10.0
#define STATUS_MAX_CLIENTS 64
#define STATUS_LINGER 2.0       /* seconds to read what a client sends after its answer */

struct status_client {
    struct connection conn;         /* the socket and what waits to be written to it */
    struct status_server *server;
    struct status_client *prev, *next;
    struct timer timer;
    char head[STATUS_HEAD_MAX];
    size_t head_length;
    struct http_request request;    /* the parser's state: rsp's own strict parser */
    bool answered;                  /* the answer is queued, the write side shut after it */
    bool lingering;                 /* all of it is out: STATUS_LINGER to read and drop */
};

/* The same limits for the status listener's request heads. */
static const struct http_limits status_limits = { STATUS_HEAD_MAX, STATUS_HEAD_MAX };

struct status_server {
    struct epoll_event_handler handler;
    char *host, port[6];
    const struct status_facts *facts;
    struct status_client *clients;
    size_t client_count;
    struct timer sampler;
    uint64_t last_total;            /* requests answered, at the last sample */
    uint32_t history[STATUS_HISTORY]; /* a ring: requests in each second */
    size_t history_next, history_count;
};

/* Every request rsp has answered since it started, every site together. */
static uint64_t requests_answered(void)
{
    const struct stats *st = stats_shared();
    uint64_t total = 0;

    for (size_t i = 0; i < STATS_SITES; i++) {
        const struct stats_site *site = &st->sites[i];

        if (atomic_load_explicit(&site->state, memory_order_acquire) != 2)
            continue;
        for (size_t c = 0; c < STATS_CODES; c++)
            total += atomic_load_explicit(&site->codes[c], memory_order_relaxed);
    }
    return total;
}

static void sample(struct timer *timer)
{
    struct status_server *s = timer->closure;
    uint64_t total = requests_answered();
    uint64_t delta = total - s->last_total;

    s->last_total = total;
    s->history[s->history_next] = delta > UINT32_MAX ? UINT32_MAX : (uint32_t)delta;
    s->history_next = (s->history_next + 1) % STATUS_HISTORY;
    if (s->history_count < STATUS_HISTORY)
        s->history_count++;
    if (timer_arm(timer, reactor_now() + 1) == -1)
        log_msg("out of memory: the status page's history stops");
}

static void client_close(struct status_client *c)
{
    struct status_server *s = c->server;

    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        s->clients = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    s->client_count--;
    timer_disarm(&c->timer);
    connection_close(&c->conn);
    free(c); /* connection_close voided any event for it still in this batch */
}

static void client_timed_out(struct timer *timer)
{
    client_close(timer->closure);
}

/* After anything happened to c: closes it once it is finished (its
 * socket failed, it left before asking, or it closed after its answer
 * went out), starts the linger once the answer is out, and otherwise
 * brings its epoll registration up to date. */
static void client_settle(struct status_client *c)
{
    if (c->conn.broken || (c->conn.read_done && (!c->answered || c->conn.write_done))) {
        client_close(c);
        return;
    }
    /* Closing as soon as the answer is out, with bytes the client sent
     * after its request unread (a second request it pipelined), would make
     * the kernel send a reset, which may destroy our answer before the
     * client has read it. So: a FIN after the answer, then read and drop
     * until the client closes, for STATUS_LINGER seconds at most. */
    if (c->answered && c->conn.write_done && !c->lingering) {
        c->lingering = true;
        if (timer_arm(&c->timer, reactor_now() + STATUS_LINGER) == -1) {
            client_close(c);
            return;
        }
    }
    if (connection_update(&c->conn) == -1)
        client_close(c);
}

/* After the answer: drops what the client sends, until its end of file. */
static void client_drop_input(struct status_client *c)
{
    char drop[4096];

    for (;;) {
        ssize_t n = connection_read(&c->conn, drop, sizeof drop);

        if (n > 0)
            continue;
        if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n == -1)
            connection_fail(&c->conn); /* it is gone */
        c->conn.read_done = true;
        return;
    }
}

/* Queues a whole answer: status line, head, and body unless HEAD. */
static void answer(struct status_client *c, int status, const char *reason, const char *type,
                   const struct buffer *body, bool head_only, const char *extra)
{
    char head[512];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Cache-Control: no-store\r\nConnection: close\r\n%s\r\n",
                     status, reason, type, buffer_length(body), extra);

    connection_write(&c->conn, head, (size_t)n);
    if (!head_only)
        connection_write(&c->conn, buffer_bytes(body), buffer_length(body));
    connection_shutdown_write(&c->conn);
    c->answered = true;
}

static void answer_text(struct status_client *c, int status, const char *reason, const char *text,
                        bool head_only, const char *extra)
{
    struct buffer body = BUFFER_INIT;

    if (buffer_append(&body, text, strlen(text)) == -1) {
        log_msg("out of memory answering a status request");
        connection_fail(&c->conn);
        return;
    }
    answer(c, status, reason, "text/plain; charset=utf-8", &body, head_only, extra);
    buffer_free(&body);
}

/* Methods are case-sensitive ("get" is not GET). */
static bool method_is(const char *buf, struct http_span method, const char *name)
{
    return method.length == strlen(name) && memcmp(buf + method.offset, name, method.length) == 0;
}

/* The head is in and well formed: answers GET or HEAD of /, /status.json
 * or /metrics. */
static void serve(struct status_client *c)
{
    struct status_server *s = c->server;
    const struct http_request *rq = &c->request;
    struct buffer body = BUFFER_INIT;
    struct status_view view;
    uint32_t history[STATUS_HISTORY];
    const char *type, *target = c->head + rq->target.offset;
    size_t length = rq->target.length;
    bool head_only = method_is(c->head, rq->method, "HEAD");
    int rc;

    if (!head_only && !method_is(c->head, rq->method, "GET")) {
        answer_text(c, 405, "Method Not Allowed", "405 Method Not Allowed: GET or HEAD\n", false,
                    "Allow: GET, HEAD\r\n");
        return;
    }
    if (memchr(target, '?', length) != NULL)
        length = (size_t)((const char *)memchr(target, '?', length) - target);
    for (size_t i = 0; i < s->history_count; i++)
        history[i] = s->history[(s->history_next + STATUS_HISTORY - s->history_count + i) % STATUS_HISTORY];
    view = (struct status_view){ s->facts, generation_current(), stats_shared(), clock_wall(),
                                 history, s->history_count };
    if (length == 1 && target[0] == '/') {
        rc = status_render_html(&body, &view);
        type = "text/html; charset=utf-8";
    } else if (length == 12 && memcmp(target, "/status.json", 12) == 0) {
        rc = status_render_json(&body, &view);
        type = "application/json";
    } else if (length == 8 && memcmp(target, "/metrics", 8) == 0) {
        rc = status_render_metrics(&body, &view);
        type = "text/plain; version=0.0.4; charset=utf-8";
    } else {
        answer_text(c, 404, "Not Found", "404 Not Found: try /, /status.json or /metrics\n",
                    head_only, "");
        return;
    }
    if (rc == -1) {
        buffer_free(&body);
        log_msg("out of memory rendering a status document");
        answer_text(c, 500, "Internal Server Error", "500 out of memory\n", head_only, "");
        return;
    }
    answer(c, 200, "OK", type, &body, head_only, "");
    buffer_free(&body);
}

/* A head the parser refused: its status (400, 414, 431 or 505). */
static void refuse(struct status_client *c, int status)
{
    const char *reason = status == 414   ? "URI Too Long"
                         : status == 431 ? "Request Header Fields Too Large"
                         : status == 505 ? "HTTP Version Not Supported"
                                         : "Bad Request";
    char text[64];

    snprintf(text, sizeof text, "%d %s\n", status, reason);
    answer_text(c, status, reason, text, false, "");
}

/* Reads the request head as far as it has come; answers it once it is
 * whole (or refused). */
static void client_read_head(struct status_client *c)
{
    for (;;) {
        ssize_t n = connection_read(&c->conn, c->head + c->head_length, sizeof c->head - c->head_length);
        int rc;

        if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            c->conn.read_done = true; /* gone before asking anything whole */
            return;
        }
        c->head_length += (size_t)n;
        rc = http_parse_request(&c->request, c->head, c->head_length, &status_limits);
        if (rc == HTTP_DONE) {
            serve(c);
            return;
        }
        if (rc != HTTP_INCOMPLETE) {
            refuse(c, rc);
            return;
        }
        if (c->head_length == sizeof c->head) {
            refuse(c, 431);
            return;
        }
    }
}

static void client_handle(struct epoll_event_handler *self, uint32_t events)
{
    struct status_client *c = self->closure;

    events = connection_events(&c->conn, events);
    if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
        connection_flush(&c->conn);
    if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP)) && !c->conn.read_done) {
        if (c->answered)
            client_drop_input(c);
        else
            client_read_head(c);
    }
    client_settle(c);
}

/* Makes room for one more client: the oldest one not in the middle of
 * its answer (still sending its request, or lingering after it) goes. A
 * crowd of idle connections must not lock the operator out of the page.
 * Returns false if every client is being answered. */
static bool evict_oldest(struct status_server *s)
{
    struct status_client *c, *oldest = NULL;

    for (c = s->clients; c != NULL; c = c->next)
        if (connection_queued(&c->conn) == 0) /* not in the middle of its answer */
            oldest = c; /* the list is newest first */
    if (oldest == NULL)
        return false;
    client_close(oldest);
    return true;
}

static void accept_clients(struct epoll_event_handler *self, uint32_t events)
{
    struct status_server *s = self->closure;

    (void)events;
    for (;;) {
        int fd = accept4(self->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        struct status_client *c;

        if (fd == -1) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                log_errno("accept4 (status listener)");
            return; /* EMFILE too: the next event tries again */
        }
        c = s->client_count < STATUS_MAX_CLIENTS || evict_oldest(s) ? calloc(1, sizeof *c) : NULL;
        if (c == NULL) {
            if (close(fd) == -1) /* every slot busy answering, or out of memory */
                log_errno("close status client");
            continue;
        }
        http_request_init(&c->request);
        connection_init(&c->conn, fd, false, client_handle, c);
        c->server = s;
        timer_init(&c->timer, client_timed_out, c);
        if (connection_update(&c->conn) == -1 ||
            timer_arm(&c->timer, reactor_now() + STATUS_TIMEOUT) == -1) {
            log_errno("watching a status client");
            connection_close(&c->conn);
            free(c);
            continue;
        }
        c->next = s->clients;
        if (s->clients != NULL)
            s->clients->prev = c;
        s->clients = c;
        s->client_count++;
    }
}

struct status_server *status_start(const char *host, const char *port,
                                   const struct status_facts *facts)
{
    struct status_server *s = calloc(1, sizeof *s);
    int fd;

    if (s == NULL || (s->host = strdup(host)) == NULL) {
        log_msg("out of memory starting the status listener");
        free(s);
        return NULL;
    }
    snprintf(s->port, sizeof s->port, "%s", port);
    fd = net_listen(host, port);
    if (fd == -1) {
        free(s->host);
        free(s);
        return NULL;
    }
    s->handler = (struct epoll_event_handler){ fd, accept_clients, s };
    s->facts = facts;
    s->last_total = requests_answered();
    timer_init(&s->sampler, sample, s);
    if (reactor_add(&s->handler, EPOLLIN) == -1 || timer_arm(&s->sampler, reactor_now() + 1) == -1) {
        log_errno("status listener");
        if (close(fd) == -1)
            log_errno("close status listener");
        timer_disarm(&s->sampler);
        free(s->host);
        free(s);
        return NULL;
    }
    log_msg("status page on http://%s%s%s:%s/ (status.json, metrics)", strchr(host, ':') ? "[" : "",
            host, strchr(host, ':') ? "]" : "", port);
    return s;
}

bool status_listens_on(const struct status_server *s, const char *host, const char *port)
{
    return strcmp(s->host, host) == 0 && strcmp(s->port, port) == 0;
}

void status_stop(struct status_server *s)
{
    if (s == NULL)
        return;
    while (s->clients != NULL)
        client_close(s->clients);
    timer_disarm(&s->sampler);
    if (reactor_remove(&s->handler) == -1)
        log_errno("epoll_ctl(DEL) status listener");
    if (close(s->handler.fd) == -1)
        log_errno("close status listener");
    free(s->host);
    free(s);
}

void status_forget(struct status_server *s)
{
    if (s == NULL)
        return;
    while (s->clients != NULL) {
        struct status_client *c = s->clients;

        s->clients = c->next;
        /* Its socket is in the parent's epoll, not this process's:
         * closing it here is all it takes. */
        c->conn.registered = 0;
        connection_close(&c->conn);
        free(c);
    }
    if (close(s->handler.fd) == -1)
        log_errno("close status listener");
    free(s->host);
    free(s);
}
