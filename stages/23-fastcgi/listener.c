/* listener.c -- the handler of the listening socket. */
#define _GNU_SOURCE /* for accept4 */
#include "listener.h"

#include "cidr.h"
#include "clock.h"
#include "config.h"
#include "generation.h"
#include "log.h"
#include "net.h"
#include "proxy_protocol.h"
#include "reactor.h"
#include "relay.h"
#include "reply.h"
#include "stats.h"
#include "timer.h"

#include <arpa/inet.h>
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
/* The least time between two "proxy_protocol:" lines. */
#define PROXY_REPORT_INTERVAL 1.0

struct listener;

/* A client of a listener with proxy_protocol whose header has not all
 * arrived: nothing else is read from it (no TLS, no HTTP) until it has. */
struct proxy_wait {
    struct epoll_event_handler handler;
    struct timer deadline;          /* header_timeout from the accept */
    struct listener *listener;
    struct proxy_wait *prev, *next; /* the listener's waiting clients */
    struct sockaddr_storage peer;   /* the load balancer */
    socklen_t peer_length;
};

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
    struct proxy_wait *waiting;     /* clients whose PROXY header is still coming */
};

/* PROXY protocol refusals not logged yet, and when the last line was. */
static unsigned long proxy_unreported;
static double proxy_reported_at = -PROXY_REPORT_INTERVAL;

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

/* Counts a client of a proxy_protocol listener closed (status.json's
 * refused.proxy_protocol) and logs why: one line a second at most, saying
 * how many others were since the last one. */
static void proxy_report(const struct sockaddr_storage *peer, const char *why)
{
    char text[INET6_ADDRSTRLEN];
    double now = clock_now();

    stats_count_refused(NULL, REFUSED_PROXY_PROTOCOL);
    if (now - proxy_reported_at < PROXY_REPORT_INTERVAL) {
        proxy_unreported++;
        return;
    }
    net_address_text((const struct sockaddr *)peer, text, sizeof text);
    if (proxy_unreported > 0)
        log_msg("proxy_protocol: %s: %s (and %lu more closed since the last line)", text, why,
                proxy_unreported);
    else
        log_msg("proxy_protocol: %s: %s", text, why);
    proxy_unreported = 0;
    proxy_reported_at = now;
}

/* Forgets a waiting client; closes its socket unless `keep_fd`. */
static void proxy_wait_end(struct proxy_wait *w, bool keep_fd)
{
    struct listener *listener = w->listener;

    if (reactor_remove(&w->handler) == -1)
        log_errno("epoll_ctl(DEL) (a PROXY protocol client)");
    timer_disarm(&w->deadline);
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        listener->waiting = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    if (!keep_fd && close(w->handler.fd) == -1)
        log_errno("close (a PROXY protocol client)");
    free(w);
}

/* Closes a waiting client without a word, after logging why. */
static void proxy_refuse(struct proxy_wait *w, const char *why)
{
    proxy_report(&w->peer, why);
    proxy_wait_end(w, false);
}

static void proxy_wait_expired(struct timer *timer)
{
    proxy_refuse(timer->closure, "no whole header within header_timeout");
}

/* The header has been read: takes exactly its bytes off the socket (what
 * follows is the client's TLS or HTTP) and hands the client to a relay,
 * with the address the header carries (the peer's own for LOCAL and
 * UNKNOWN). */
static void proxy_pass(struct proxy_wait *w, const struct proxy_header *h)
{
    struct listener *listener = w->listener;
    unsigned char header[PROXY_HEADER_MAX];
    struct sockaddr_storage client = h->local ? w->peer : h->source;
    socklen_t length = h->local ? w->peer_length : sizeof client;
    int fd = w->handler.fd;
    ssize_t n;

    do
        n = recv(fd, header, h->length, 0);
    while (n == -1 && errno == EINTR);
    if (n != (ssize_t)h->length) {
        /* The bytes peeked are queued: only a reset takes them away. */
        proxy_refuse(w, n == -1 ? "reset while reading the header" : "the header could not be read whole");
        return;
    }
    proxy_wait_end(w, true);
    if (relay_start(fd, (struct sockaddr *)&client, length, listener->port, generation_current(),
                    listener->relays, listener->tls) == -1 &&
        close(fd) == -1)
        log_errno("close (a client we had no room for)");
}

/* Bytes arrived: looks at what has (without taking it: MSG_PEEK, so the
 * header's bytes are taken only once whole and those after it stay for
 * the relay), and waits for more, refuses, or passes the client on.
 * Watched edge-triggered: bytes that stay queued do not wake us again. */
static void proxy_wait_handle(struct epoll_event_handler *self, uint32_t events)
{
    struct proxy_wait *w = self->closure;
    unsigned char data[PROXY_HEADER_MAX];
    struct proxy_header h;
    ssize_t n;

    (void)events;
    do
        n = recv(self->fd, data, sizeof data, MSG_PEEK);
    while (n == -1 && errno == EINTR);
    if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (n <= 0) {
        proxy_refuse(w, n == 0 ? "closed before a whole header" : "reset before a whole header");
        return;
    }
    switch (proxy_parse(data, (size_t)n, &h)) {
    case PROXY_MORE:
        return;
    case PROXY_ERROR:
        proxy_refuse(w, h.error);
        return;
    case PROXY_DONE:
        proxy_pass(w, &h);
        return;
    }
}

/* A client of a listener with proxy_protocol: waits for its header
 * (within header_timeout), unless trusted_proxies is set and the peer is
 * not among them. Takes charge of fd in every case. */
static void proxy_wait_start(struct listener *listener, int fd, const struct sockaddr_storage *peer,
                             socklen_t peer_length, const struct config *config)
{
    struct proxy_wait *w;

    if (config->trusted_proxy_count > 0 &&
        !cidr_match_any(config->trusted_proxies, config->trusted_proxy_count, peer)) {
        proxy_report(peer, "not in trusted_proxies");
        if (close(fd) == -1)
            log_errno("close (a PROXY protocol client)");
        return;
    }
    w = calloc(1, sizeof *w);
    if (w == NULL) {
        log_msg("out of memory accepting a client");
        if (close(fd) == -1)
            log_errno("close (a client we had no room for)");
        return;
    }
    w->handler = (struct epoll_event_handler){ fd, proxy_wait_handle, w };
    w->listener = listener;
    w->peer = *peer;
    w->peer_length = peer_length;
    timer_init(&w->deadline, proxy_wait_expired, w);
    if (timer_arm(&w->deadline, reactor_now() + config->timeouts.header) == -1 ||
        reactor_add(&w->handler, EPOLLIN | EPOLLRDHUP | EPOLLET) == -1) {
        log_errno("waiting for a PROXY protocol header");
        timer_disarm(&w->deadline);
        if (close(fd) == -1)
            log_errno("close (a client we had no room for)");
        free(w);
        return;
    }
    w->next = listener->waiting;
    if (w->next != NULL)
        w->next->prev = w;
    listener->waiting = w;
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
        /* Asked of the generation at each accept, so a reload that turns
         * it on or off applies to the next client. */
        struct config *config = generation_current();
        if (listener->tls ? config->tls.proxy_protocol : config->proxy_protocol) {
            proxy_wait_start(listener, client_fd, &address, length, config);
            continue;
        }
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
    while (listener->waiting != NULL)
        proxy_wait_end(listener->waiting, false);
    timer_disarm(&listener->resume);
    if (!listener->paused && reactor_remove(&listener->handler) == -1)
        log_errno("epoll_ctl(DEL) listener");
    if (close(listener->handler.fd) == -1)
        log_errno("close listener");
    if (listener->spare_fd != -1 && close(listener->spare_fd) == -1)
        log_errno("close spare fd");
    free(listener);
}
