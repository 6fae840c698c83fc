/* relay.c -- finding a client its backend, then carrying bytes both ways.
 *
 * A client's relay starts by connecting to a backend chosen by the pool,
 * without blocking: while the connect is under way we do not read from the
 * client at all, so its request waits in the kernel and no byte of it can
 * have reached a backend that then fails; trying the next one is always
 * safe. If no backend can be reached, the client gets a 502.
 *
 * Each direction (client to backend, backend to client) runs on its own:
 *
 *   reading from a side stops when the other side's write queue rises above
 *   RELAY_HIGH_WATER (backpressure) and starts again once it has drained
 *   below RELAY_LOW_WATER, so a pair never holds much more than the high
 *   mark in memory however slow its peers are;
 *
 *   a direction is finished when its source has said all it will (EOF or an
 *   error) and its destination has been sent everything and a FIN, or when
 *   the destination can take nothing more (it went away).
 *
 * The pair is closed when both directions are finished: not before, so a
 * client that half-closes still gets its answer and no tail of a response
 * is cut off. */
#include "relay.h"

#include "backend.h"
#include "connection.h"
#include "log.h"
#include "net.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#define RELAY_READ_SIZE 16384
#define RELAY_READS_PER_EVENT 4          /* then let other connections run */
#define RELAY_HIGH_WATER (64 * 1024)
#define RELAY_LOW_WATER (16 * 1024)

#define BAD_GATEWAY_BODY \
    "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n" \
    "<body><h1>502 Bad Gateway</h1><p>rsp could not reach any backend server.</p></body></html>\n"

struct relay {
    struct connection client;
    struct connection backend;       /* no socket until a connect starts */
    struct pool *pool;
    struct backend *current;         /* the backend tried or in use, or NULL */
    const struct addrinfo *address;  /* which of its addresses */
    uint64_t tried;                  /* backends tried for this client */
};

static void relay_handle(struct epoll_event_handler *self, uint32_t events);

/* True once nothing more can travel from `from` to `to`. */
static bool direction_finished(const struct connection *from, const struct connection *to)
{
    return from->read_done && to->write_done;
}

/* Reads what `from` has and hands it to `to`, until `from` would block,
 * ends, or `to` has queued enough (then `from` is paused). */
static void pump(struct connection *from, struct connection *to)
{
    char buffer[RELAY_READ_SIZE];

    for (int i = 0; i < RELAY_READS_PER_EVENT && !from->read_done && !from->paused; i++) {
        ssize_t n;

        if (to->write_done) {
            /* The destination went away: what `from` sends has nowhere to
             * go, so stop reading it. */
            from->read_done = true;
            break;
        }
        n = connection_read(from, buffer, sizeof buffer);
        if (n > 0) {
            connection_write(to, buffer, (size_t)n);
            if (connection_queued(to) > RELAY_HIGH_WATER)
                from->paused = true;
        } else if (n == 0) {
            /* `from` finished sending: pass the half-close on, once what we
             * hold for `to` has been written. */
            from->read_done = true;
            connection_shutdown_write(to);
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            break;
        } else {
            /* ECONNRESET and friends: `from` is gone both ways. Whatever it
             * sent before is still delivered to `to`. */
            connection_fail(from);
            connection_shutdown_write(to);
        }
    }
}

/* Applies the rules that link the two directions after anything changed:
 * a source whose destination went away stops being read, and a source
 * paused by backpressure (or waiting for a connect) resumes once its
 * destination is connected and has drained. */
static void settle(struct connection *from, struct connection *to)
{
    if (to->write_done)
        from->read_done = true;
    if (from->paused && !to->connecting && connection_queued(to) < RELAY_LOW_WATER)
        from->paused = false;
}

/* Closes the backend socket, if any, and gives its slot back. */
static void release_backend(struct relay *relay)
{
    if (relay->backend.handler.fd == -1)
        return;
    connection_close(&relay->backend);
    connection_init_none(&relay->backend);
    relay->current->active--;
}

/* A connect to relay->address failed with `error`. If that is our own
 * shortage (out of file descriptors, memory or local ports), no backend is
 * to blame and any other would fail the same way: returns false. Otherwise
 * marks the backend down once every address of it has failed, and returns
 * true: trying another backend makes sense. */
static bool attempt_failed(struct relay *relay, int error)
{
    if (error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM ||
        error == EADDRNOTAVAIL) {
        errno = error;
        log_errno("cannot connect to backend %s", relay->current->name);
        return false;
    }
    if (relay->address->ai_next == NULL)
        backend_failed(relay->pool, relay->current, error);
    return true;
}

/* Starts a connect to the next address of the current backend, or else to
 * the next backend the pool offers. Returns 0 when a connect is under way,
 * -1 when nothing is left to try. */
static int connect_next(struct relay *relay)
{
    for (;;) {
        int fd;

        if (relay->address != NULL)
            relay->address = relay->address->ai_next;
        if (relay->address == NULL) {
            relay->current = backend_pick(relay->pool, relay->tried);
            if (relay->current == NULL)
                return -1;
            relay->tried |= backend_bit(relay->pool, relay->current);
            relay->address = relay->current->addresses;
        }
        fd = net_connect_start(relay->address);
        if (fd == -1) {
            if (!attempt_failed(relay, errno))
                return -1;
            continue;
        }
        connection_init(&relay->backend, fd, true, relay_handle, relay);
        relay->current->active++;
        return 0;
    }
}

/* No backend could be reached: tell the client so, then hang up. */
static void answer_bad_gateway(struct relay *relay)
{
    char response[512], discard[RELAY_READ_SIZE];
    int len;

    pool_unreachable(relay->pool);
    /* Read what the client has sent so far: closing a socket with unread
     * data makes the kernel send a reset, which can destroy our answer
     * before the client reads it. */
    for (int i = 0; i < RELAY_READS_PER_EVENT; i++)
        if (connection_read(&relay->client, discard, sizeof discard) <= 0)
            break;
    len = snprintf(response, sizeof response,
                   "HTTP/1.1 502 Bad Gateway\r\n"
                   "Content-Type: text/html; charset=utf-8\r\n"
                   "Content-Length: %zu\r\n"
                   "Connection: close\r\n"
                   "\r\n%s",
                   sizeof BAD_GATEWAY_BODY - 1, BAD_GATEWAY_BODY);
    connection_write(&relay->client, response, (size_t)len);
    connection_shutdown_write(&relay->client);
}

/* The backend socket became writable (or failed) while connecting. */
static void connect_finished(struct relay *relay)
{
    int error = net_connect_result(relay->backend.handler.fd);

    if (error == 0) {
        relay->backend.connecting = false;
        backend_succeeded(relay->pool, relay->current);
        return; /* settle() now lets the client's request flow */
    }
    bool retry = attempt_failed(relay, error);
    release_backend(relay);
    if (!retry || connect_next(relay) == -1)
        answer_bad_gateway(relay);
}

/* Frees the pair. No handler of it may be touched afterwards. */
static void relay_close(struct relay *relay)
{
    connection_close(&relay->client);
    release_backend(relay);
    free(relay);
}

/* Ends every event: links the directions, then closes the pair if both are
 * finished, or else brings both epoll registrations up to date. Returns
 * nothing; the relay may be freed when it returns. */
static void relay_settle_or_close(struct relay *relay)
{
    settle(&relay->client, &relay->backend);
    settle(&relay->backend, &relay->client);
    if (direction_finished(&relay->client, &relay->backend) &&
        direction_finished(&relay->backend, &relay->client)) {
        relay_close(relay);
        return;
    }
    if (connection_update(&relay->client) == -1 || connection_update(&relay->backend) == -1)
        relay_close(relay);
}

static void relay_handle(struct epoll_event_handler *self, uint32_t events)
{
    struct relay *relay = self->closure;
    struct connection *conn = self == &relay->client.handler ? &relay->client : &relay->backend;
    struct connection *peer = conn == &relay->client ? &relay->backend : &relay->client;

    if (conn->connecting) {
        connect_finished(relay);
    } else {
        if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
            connection_flush(conn);
        /* Read on hang-up and error too: the peer's last bytes and its EOF
         * may still be waiting in the socket, and we must not lose them. */
        if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
            pump(conn, peer);
    }
    relay_settle_or_close(relay); /* relay may be freed: touch nothing after */
}

int relay_start(int client_fd, struct pool *pool)
{
    struct relay *relay = malloc(sizeof *relay);

    if (relay == NULL) {
        log_msg("out of memory accepting a client");
        return -1;
    }
    relay->pool = pool;
    relay->current = NULL;
    relay->address = NULL;
    relay->tried = 0;
    connection_init(&relay->client, client_fd, false, relay_handle, relay);
    relay->client.paused = true; /* until the backend is connected */
    connection_init_none(&relay->backend);
    if (connect_next(relay) == -1)
        answer_bad_gateway(relay);
    relay_settle_or_close(relay);
    return 0;
}
