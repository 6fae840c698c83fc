/* listener.c -- the handler of the listening socket. */
#define _GNU_SOURCE /* for accept4 */
#include "listener.h"

#include "clock.h"
#include "generation.h"
#include "log.h"
#include "net.h"
#include "reactor.h"
#include "relay.h"
#include "reply.h"
#include "timer.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* How long we stop listening when not even the spare fd can be had. */
#define LISTENER_PAUSE 0.1
/* The least time between two "out of file descriptors" lines. */
#define OVERFLOW_REPORT_INTERVAL 1.0
/* A shared socket goes to the back of the line after this many accepts:
 * see take_turns(). */
#define LISTENER_TURN 16
/* Clients taken per wakeup: see listener_handle(). */
#define LISTENER_ACCEPT_BATCH 1

struct listener {
    struct epoll_event_handler handler;
    struct relay_set *relays;
    char port[6];               /* the port we listen on, for X-Forwarded-Port */
    /* An fd held in reserve for when we run out: see accept_overflow(). */
    int spare_fd;
    uint32_t events;            /* EPOLLIN, with EPOLLEXCLUSIVE when workers share the socket */
    bool tls;                   /* the HTTPS port: clients get TLS under them */
    unsigned accepted;          /* clients accepted since this worker's last turn began */
    /* Ends a pause in listening: see pause_listening(). */
    struct timer resume;
    bool paused;
    /* Clients turned away since the last report, and when that was. */
    unsigned long turned_away;
    double reported_at;
};

/* Answers a client we have no room for with a 503 and closes it. The
 * request is read (whatever of it has arrived) before the close, so that
 * the kernel ends the connection with a FIN after our answer, not with a
 * reset that could destroy the answer before the client reads it. Best
 * effort throughout: the socket is new and its buffers are empty, and if
 * the client is already gone there is no one to tell. */
static void turn_away(int fd)
{
    char response[1536], request[4096];
    size_t length = reply_format(response, sizeof response, 503, false);

    if (send(fd, response, length, MSG_DONTWAIT | MSG_NOSIGNAL) == -1 && errno != EAGAIN &&
        errno != EPIPE && errno != ECONNRESET)
        log_errno("send (503 to a client turned away)");
    if (shutdown(fd, SHUT_WR) == -1 && errno != ENOTCONN)
        log_errno("shutdown (a client turned away)");
    while (recv(fd, request, sizeof request, MSG_DONTWAIT) > 0)
        ;
    if (close(fd) == -1)
        log_errno("close (a client turned away)");
}

/* Logs how many clients were turned away, at most once a second however
 * long we stay out of descriptors; with `ended`, the last count. */
static void report_overflow(struct listener *listener, bool ended)
{
    double now;

    if (listener->turned_away == 0)
        return;
    now = clock_now();
    if (ended)
        log_msg("file descriptors free again; %lu more client(s) were answered 503",
                listener->turned_away);
    else if (now - listener->reported_at >= OVERFLOW_REPORT_INTERVAL)
        log_msg("out of file descriptors: answered %lu client(s) with 503", listener->turned_away);
    else
        return;
    listener->turned_away = 0;
    listener->reported_at = now;
}

/* Not even our spare fd can be had (the whole system is out, ENFILE): we
 * cannot take a client off the queue, and level-triggered epoll would
 * wake us for it again at once, for ever. So we stop watching the socket
 * for a moment, and a timer tells us when to try again. */
static void pause_listening(struct listener *listener)
{
    if (listener->paused)
        return;
    if (timer_arm(&listener->resume, reactor_now() + LISTENER_PAUSE) == -1) {
        log_msg("out of memory arming a timer");
        return;
    }
    /* Out of epoll rather than watching nothing: EPOLLEXCLUSIVE allows no MOD. */
    if (reactor_remove(&listener->handler) == -1) {
        log_errno("epoll_ctl(DEL) listener");
        timer_disarm(&listener->resume);
        return;
    }
    listener->paused = true;
    log_msg("out of file descriptors, even the spare one: not accepting for %g s", LISTENER_PAUSE);
}

static void resume_listening(struct timer *timer)
{
    struct listener *listener = timer->closure;

    if (reactor_add(&listener->handler, listener->events) == -1) {
        log_errno("epoll_ctl(ADD) listener");
        if (timer_arm(timer, reactor_now() + LISTENER_PAUSE) == -1)
            log_msg("out of memory arming a timer: no longer accepting clients");
        return;
    }
    listener->paused = false;
    if (listener->spare_fd == -1)
        listener->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* We are out of file descriptors (EMFILE/ENFILE) and a client may be
 * waiting. If we left it in the queue, level-triggered epoll would wake us
 * for it again at once, forever. So we free our spare fd, accept the client,
 * answer it 503 and close it (it learns at once that we are busy, rather
 * than hang), and take the spare again. Returns true if a client was turned
 * away (another may be waiting), false if the queue is empty or we had to
 * pause. */
static bool accept_overflow(struct listener *listener)
{
    int fd = -1;

    if (listener->spare_fd != -1) {
        if (close(listener->spare_fd) == -1)
            log_errno("close spare fd");
        fd = accept4(listener->handler.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd != -1 && listener->tls) {
            /* No words in plain text to a TLS client: a close is all. */
            if (close(fd) == -1)
                log_errno("close (a client turned away)");
            listener->turned_away++;
        } else if (fd != -1) {
            turn_away(fd);
            listener->turned_away++;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED &&
                   errno != EINTR) {
            log_errno("accept4 (with the spare fd freed)");
        }
        listener->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    report_overflow(listener, false);
    if (listener->spare_fd == -1) {
        pause_listening(listener);
        return false;
    }
    return fd != -1;
}

/* With EPOLLEXCLUSIVE the kernel wakes the first of the waiting epoll
 * instances in the order they were added, so under a light load the
 * worker that added the socket first takes nearly every client. Taking
 * the socket out of our epoll and adding it again puts us at the back of
 * that order: after LISTENER_TURN clients, the other workers come first.
 * (nginx does the same, and for the same reason.) */
static void take_turns(struct listener *listener)
{
    if (!(listener->events & EPOLLEXCLUSIVE) || listener->paused ||
        ++listener->accepted < LISTENER_TURN)
        return;
    listener->accepted = 0;
    if (reactor_remove(&listener->handler) == -1) {
        log_errno("epoll_ctl(DEL) listener (taking turns)");
        return; /* still watched as it was */
    }
    if (reactor_add(&listener->handler, listener->events) == -1) {
        /* Out of epoll: as if paused, until the timer puts it back. */
        log_errno("epoll_ctl(ADD) listener (taking turns)");
        listener->paused = true;
        if (timer_arm(&listener->resume, reactor_now() + LISTENER_PAUSE) == -1)
            log_msg("out of memory arming a timer: no longer accepting clients");
    }
}

/* Writes the port of the socket's own end as text: for a listening
 * socket, the port its clients connect to. Returns 0, or -1 with errno. */
static int format_server_port(int fd, char *out, size_t size)
{
    struct sockaddr_storage local;
    socklen_t length = sizeof local;
    unsigned port;

    if (getsockname(fd, (struct sockaddr *)&local, &length) == -1)
        return -1;
    if (local.ss_family == AF_INET) {
        port = ntohs(((const struct sockaddr_in *)&local)->sin_port);
    } else if (local.ss_family == AF_INET6) {
        port = ntohs(((const struct sockaddr_in6 *)&local)->sin6_port);
    } else {
        errno = EAFNOSUPPORT;
        return -1;
    }
    snprintf(out, size, "%u", port);
    return 0;
}

static void listener_handle(struct epoll_event_handler *self, uint32_t events)
{
    struct listener *listener = self->closure;

    (void)events;
    /* Take at most LISTENER_ACCEPT_BATCH clients, not every one waiting:
     * the socket stays readable, so epoll reports it again next turn, after
     * the clients already in hand have had theirs. Taking them all at once
     * made each of a burst of TLS clients wait, after its handshake, for
     * the handshakes of all the others: with a handshake per request, 32
     * wrk clients saw 3.25 ms on average from rsp and 0.80 from nginx at
     * the same requests/s, and 3-4 ms from nginx with multi_accept on
     * (bench/results/tls.md). nginx's default is one per turn, as here. */
    for (int taken = 0; taken < LISTENER_ACCEPT_BATCH; taken++) {
        struct sockaddr_storage address;
        socklen_t length = sizeof address;
        int client_fd = accept4(self->fd, (struct sockaddr *)&address, &length,
                                SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (client_fd == -1) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return; /* nobody else is waiting */
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE) {
                if (accept_overflow(listener))
                    continue;
                return;
            }
            log_errno("accept4");
            return;
        }
        report_overflow(listener, true);
        take_turns(listener);
        if (net_set_nodelay(client_fd) == -1)
            log_errno("setsockopt(TCP_NODELAY)"); /* slower, but it works */
        if (relay_start(client_fd, (struct sockaddr *)&address, length, listener->port,
                        generation_current(), listener->relays, listener->tls) == -1 &&
            close(client_fd) == -1)
            log_errno("close (a client we had no room for)");
    }
}

struct listener *listener_start(int listen_fd, struct relay_set *relays, bool shared, bool tls)
{
    struct listener *listener = calloc(1, sizeof *listener);

    if (listener == NULL) {
        log_msg("out of memory");
        return NULL;
    }
    /* Asked once, not of every client: they all connect to this port. */
    if (format_server_port(listen_fd, listener->port, sizeof listener->port) == -1) {
        log_errno("getsockname (listener)");
        free(listener);
        return NULL;
    }
    listener->handler.fd = listen_fd;
    listener->handler.handle = listener_handle;
    listener->handler.closure = listener;
    listener->relays = relays;
    listener->tls = tls;
    /* Several workers waiting on one socket: wake one of them per
     * connection, not all (the others would find nothing to accept). */
    listener->events = shared ? EPOLLIN | EPOLLEXCLUSIVE : EPOLLIN;
    timer_init(&listener->resume, resume_listening, listener);
    listener->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (listener->spare_fd == -1 || reactor_add(&listener->handler, listener->events) == -1) {
        log_errno("listener_start");
        if (listener->spare_fd != -1)
            close(listener->spare_fd);
        free(listener);
        return NULL;
    }
    return listener;
}

int listener_socket(const struct listener *listener)
{
    return listener->handler.fd;
}

void listener_stop(struct listener *listener)
{
    timer_disarm(&listener->resume);
    if (!listener->paused && reactor_remove(&listener->handler) == -1)
        log_errno("epoll_ctl(DEL) listener");
    if (close(listener->handler.fd) == -1)
        log_errno("close listener");
    if (listener->spare_fd != -1 && close(listener->spare_fd) == -1)
        log_errno("close spare fd");
    free(listener);
}
