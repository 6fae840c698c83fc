/* health.c -- a small HTTP client that checks backends on the reactor.
 *
 * Each checked backend has one struct health_check, which goes round:
 *
 *   WAITING --timer--> CONNECTING --writable--> SENDING --sent--> READING
 *      ^                   |                       |                 |
 *      +---- pass/fail ----+-----------------------+-----------------+
 *
 * One timer serves both waits: while WAITING it is the next check, in the
 * other states the check's timeout. Everything is non-blocking, so a
 * backend that black-holes its SYNs costs one timer, not a stalled proxy. */
#include "health.h"

#include "fastcgi.h"
#include "http.h"
#include "log.h"
#include "net.h"
#include "reactor.h"
#include "stats.h"
#include "timer.h"

#include <errno.h>
#include <netdb.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

enum check_state { CHECK_WAITING, CHECK_CONNECTING, CHECK_SENDING, CHECK_READING };

struct health_check {
    struct epoll_event_handler handler;  /* fd -1 while WAITING */
    struct timer timer;
    struct backend *backend;
    struct health_settings settings;     /* a copy: generations come and go */
    enum check_state state;
    double started;                      /* when this check began */
    char request[1024];
    size_t request_length, sent;
    char answer[1024];                   /* the start of the response (FastCGI: of its STDOUT) */
    size_t answer_length;
    struct fcgi_parser fcgi;             /* FastCGI: the records read */
    unsigned passes, failures;           /* in a row */
};

static void check_handle(struct epoll_event_handler *self, uint32_t events);

/* Closes the check's socket, if open. */
static void close_socket(struct health_check *check)
{
    if (check->handler.fd == -1)
        return;
    if (reactor_remove(&check->handler) == -1)
        log_errno("epoll_ctl(DEL) health check of %s", check->backend->name);
    if (close(check->handler.fd) == -1)
        log_errno("close health check of %s", check->backend->name);
    check->handler.fd = -1;
}

/* Waits for the next check, `interval` after this one started. */
static void wait_next(struct health_check *check)
{
    double next = check->started + check->settings.interval;

    check->state = CHECK_WAITING;
    if (next < reactor_now())
        next = reactor_now();
    if (timer_arm(&check->timer, next) == -1)
        log_msg("out of memory: health checks of %s stop", check->backend->name);
}

/* One check is over. Counts it, and changes the backend's state (logging
 * it, once) when the count in a row reaches rise or fall. */
static void check_done(struct health_check *check, bool passed, const char *why)
{
    struct backend *b = check->backend;

    close_socket(check);
    if (passed) {
        check->failures = 0;
        check->passes++;
        if (backend_failing(b) && check->passes >= check->settings.rise) {
            backend_set_failing(b, false);
            log_msg("backend %s is up: health check passed %u time%s in a row", b->name,
                    check->passes, check->passes == 1 ? "" : "s");
        }
    } else {
        check->passes = 0;
        check->failures++;
        if (!backend_failing(b) && check->failures >= check->settings.fall) {
            backend_set_failing(b, true);
            log_msg("backend %s is down: health check failed %u time%s in a row (%s)", b->name,
                    check->failures, check->failures == 1 ? "" : "s", why);
        }
    }
    wait_next(check);
}

/* Sends what is left of the request; then waits for the answer. */
static void send_request(struct health_check *check)
{
    while (check->sent < check->request_length) {
        ssize_t n = write(check->handler.fd, check->request + check->sent,
                          check->request_length - check->sent);
        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return; /* still SENDING: EPOLLOUT comes back */
        if (n == -1) {
            check_done(check, false, strerror(errno));
            return;
        }
        check->sent += (size_t)n;
    }
    check->state = CHECK_READING;
    if (reactor_modify(&check->handler, EPOLLIN) == -1)
        check_done(check, false, strerror(errno));
}

/* Judges the status line. Below 500 passes: a 404 or a 401 still shows a
 * server that is up and answering. */
static void judge_answer(struct health_check *check, int status)
{
    char why[64];

    if (status == -1) {
        check_done(check, false, "not an HTTP response");
        return;
    }
    snprintf(why, sizeof why, "status %d", status);
    check_done(check, status < 500, why);
}

/* Reads the answer until its status line is complete. */
static void read_answer(struct health_check *check)
{
    int status;

    for (;;) {
        size_t room = sizeof check->answer - check->answer_length;
        ssize_t n = read(check->handler.fd, check->answer + check->answer_length, room);

        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n == -1) {
            check_done(check, false, strerror(errno));
            return;
        }
        if (n == 0) {
            check_done(check, false, check->answer_length > 0 ? "the status line was cut short"
                                                               : "closed without answering");
            return;
        }
        check->answer_length += (size_t)n;
        status = http_parse_status_line(check->answer, check->answer_length, sizeof check->answer);
        if (status != 0) {
            judge_answer(check, status);
            return;
        }
    }
}

/* FastCGI: the status the CGI head in the answer says (200 without
 * Status); 0 while it is not whole; -1 if it is not a CGI head. */
static int cgi_status(const struct health_check *check)
{
    struct buffer http = BUFFER_INIT;
    ssize_t n = fcgi_cgi_head(check->answer, check->answer_length, &http);
    int status = n > 0 ? http_parse_status_line(buffer_bytes(&http), buffer_length(&http), buffer_length(&http))
                       : (int)n;

    buffer_free(&http);
    return status;
}

/* FastCGI: reads records until the CGI head is whole (its Status judged
 * as an HTTP status line is) or the request ends. */
static void read_fastcgi_answer(struct health_check *check)
{
    char data[4096];

    for (;;) {
        ssize_t n = read(check->handler.fd, data, sizeof data);
        size_t at = 0;

        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            check_done(check, false, n == 0 ? "closed without answering" : strerror(errno));
            return;
        }
        while (at < (size_t)n) {
            struct fcgi_event ev;
            size_t used, room = sizeof check->answer - check->answer_length;
            enum fcgi_result rc = fcgi_parse(&check->fcgi, data + at, (size_t)n - at, &used, &ev);

            at += used;
            if (rc == FCGI_ERROR) {
                check_done(check, false, check->fcgi.error);
                return;
            }
            if (rc == FCGI_EVENT && ev.kind == FCGI_EVENT_STDOUT) {
                size_t take = ev.length < room ? ev.length : room;
                memcpy(check->answer + check->answer_length, ev.data, take);
                check->answer_length += take;
            }
            int status = cgi_status(check);
            if (rc == FCGI_EVENT && ev.kind == FCGI_EVENT_END && status == 0)
                status = ev.protocol_status == FCGI_REQUEST_COMPLETE ? -1 : 503;
            if (status == 0 && check->answer_length == sizeof check->answer)
                status = -1;
            if (status != 0) {
                judge_answer(check, status);
                return;
            }
        }
    }
}

static void check_handle(struct epoll_event_handler *self, uint32_t events)
{
    struct health_check *check = self->closure;
    int error;

    switch (check->state) {
    case CHECK_CONNECTING:
        error = net_connect_result(self->fd);
        if (error != 0) {
            check_done(check, false, strerror(error));
            return;
        }
        check->state = CHECK_SENDING;
        send_request(check);
        break;
    case CHECK_SENDING:
        send_request(check);
        break;
    case CHECK_READING:
        if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP)) && check->settings.fastcgi)
            read_fastcgi_answer(check);
        else if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
            read_answer(check);
        break;
    case CHECK_WAITING:
        break;
    }
}

/* Begins a check: a non-blocking connect to the backend's first address. */
static void start_check(struct health_check *check)
{
    int fd;

    check->started = reactor_now();
    check->sent = check->answer_length = 0;
    fcgi_parser_init(&check->fcgi);
    fd = net_connect_start(check->backend->addresses);
    if (fd == -1) {
        check_done(check, false, strerror(errno));
        return;
    }
    check->handler.fd = fd;
    if (reactor_add(&check->handler, EPOLLOUT) == -1) {
        log_errno("epoll_ctl(ADD) health check of %s", check->backend->name);
        if (close(fd) == -1)
            log_errno("close health check of %s", check->backend->name);
        check->handler.fd = -1;
        wait_next(check);
        return;
    }
    check->state = CHECK_CONNECTING;
    if (timer_arm(&check->timer, check->started + check->settings.timeout) == -1) {
        log_msg("out of memory: a health check of %s has no timeout", check->backend->name);
    }
}

static void check_timer_fired(struct timer *timer)
{
    struct health_check *check = timer->closure;
    char why[64];

    if (check->state == CHECK_WAITING) {
        start_check(check);
        return;
    }
    snprintf(why, sizeof why, "no answer within %g s", check->settings.timeout);
    check_done(check, false, why);
}

/* FastCGI: the records of a GET of path (BEGIN_REQUEST without KEEP_CONN,
 * PARAMS naming path as the script, no body) into out (cap bytes).
 * Returns their length, or 0 if they do not fit (or memory ran out). */
static size_t fastcgi_request(char *out, size_t cap, const char *path)
{
    struct buffer pairs = BUFFER_INIT, records = BUFFER_INIT;
    size_t n = strlen(path), length = 0;
    int rc = 0;

    rc |= fcgi_append_pair(&pairs, "REQUEST_METHOD", 14, "GET", 3);
    rc |= fcgi_append_pair(&pairs, "SCRIPT_NAME", 11, path, n);
    rc |= fcgi_append_pair(&pairs, "SCRIPT_FILENAME", 15, path, n);
    rc |= fcgi_append_pair(&pairs, "REQUEST_URI", 11, path, n);
    rc |= fcgi_append_pair(&pairs, "QUERY_STRING", 12, "", 0);
    rc |= fcgi_append_pair(&pairs, "SERVER_SOFTWARE", 15, "rsp-health-check", 16);
    rc |= fcgi_append_begin(&records, false);
    rc |= fcgi_append_stream(&records, FCGI_PARAMS, buffer_bytes(&pairs), buffer_length(&pairs));
    rc |= fcgi_append_stream(&records, FCGI_PARAMS, NULL, 0);
    rc |= fcgi_append_stream(&records, FCGI_STDIN, NULL, 0);
    if (rc == 0 && buffer_length(&records) <= cap) {
        length = buffer_length(&records);
        memcpy(out, buffer_bytes(&records), length);
    }
    buffer_free(&pairs);
    buffer_free(&records);
    return length;
}

int health_check_start(struct backend *b, const struct health_settings *settings)
{
    struct health_check *check = calloc(1, sizeof *check);
    int n;

    if (check == NULL) {
        log_msg("out of memory starting health checks of %s", b->name);
        return -1;
    }
    check->handler = (struct epoll_event_handler){ -1, check_handle, check };
    timer_init(&check->timer, check_timer_fired, check);
    check->backend = b;
    check->settings = *settings;
    if (settings->fastcgi) {
        check->request_length = fastcgi_request(check->request, sizeof check->request, settings->path);
    } else {
        /* A Unix socket's name ("unix:/run/app.sock") is no host: such a
         * backend is on this machine, so it is asked as localhost. */
        n = snprintf(check->request, sizeof check->request,
                     "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: rsp-health-check\r\n"
                     "Connection: close\r\n\r\n", settings->path,
                     b->addresses->ai_family == AF_UNIX ? "localhost" : b->name);
        check->request_length = n > 0 && (size_t)n < sizeof check->request ? (size_t)n : 0;
    }
    b->check = check;
    atomic_store(&b->stats->checked, true);
    check->started = reactor_now() - settings->interval; /* the first check: now */
    wait_next(check);
    return 0;
}

bool health_check_runs(const struct backend *b, const struct health_settings *settings)
{
    const struct health_settings *s;

    if (b->check == NULL)
        return false;
    s = &b->check->settings;
    return strcmp(s->path, settings->path) == 0 && s->fastcgi == settings->fastcgi && s->interval == settings->interval &&
           s->timeout == settings->timeout && s->rise == settings->rise && s->fall == settings->fall;
}

void health_check_stop(struct backend *b)
{
    struct health_check *check = b->check;

    if (check == NULL)
        return;
    close_socket(check);
    timer_disarm(&check->timer);
    free(check);
    b->check = NULL;
    atomic_store(&b->stats->checked, false);
}

void health_check_forget(struct backend *b)
{
    struct health_check *check = b->check;

    if (check == NULL)
        return;
    /* The epoll instance and the timers are the parent's: only the fd and
     * the memory are this process's to let go. */
    if (check->handler.fd != -1 && close(check->handler.fd) == -1)
        log_errno("close (a health check inherited from the master)");
    free(check);
    b->check = NULL;
}
