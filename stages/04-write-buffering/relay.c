/* relay.c -- carrying bytes both ways between a client and its backend.
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

#include "connection.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>

#define RELAY_READ_SIZE 16384
#define RELAY_READS_PER_EVENT 4          /* then let other connections run */
#define RELAY_HIGH_WATER (64 * 1024)
#define RELAY_LOW_WATER (16 * 1024)

struct relay {
    struct connection client;
    struct connection backend;
};

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

/* Frees the pair. No handler of it may be touched afterwards. */
static void relay_close(struct relay *relay)
{
    connection_close(&relay->client);
    connection_close(&relay->backend);
    free(relay);
}

/* Applies the rules that link the two directions after anything changed:
 * a source whose destination went away stops being read, and a source
 * paused by backpressure resumes once its destination has drained. */
static void settle(struct connection *from, struct connection *to)
{
    if (to->write_done)
        from->read_done = true;
    if (from->paused && connection_queued(to) < RELAY_LOW_WATER)
        from->paused = false;
}

static void relay_handle(struct epoll_event_handler *self, uint32_t events)
{
    struct relay *relay = self->closure;
    struct connection *conn = self == &relay->client.handler ? &relay->client : &relay->backend;
    struct connection *peer = conn == &relay->client ? &relay->backend : &relay->client;

    if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
        connection_flush(conn);
    /* Read on hang-up and error too: the peer's last bytes and its EOF may
     * still be waiting in the socket, and we must not lose them. */
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
        pump(conn, peer);
    settle(conn, peer);
    settle(peer, conn);

    if (direction_finished(&relay->client, &relay->backend) &&
        direction_finished(&relay->backend, &relay->client)) {
        relay_close(relay);
        return; /* relay is freed: touch nothing */
    }
    if (connection_update(&relay->client) == -1 || connection_update(&relay->backend) == -1)
        relay_close(relay);
}

int relay_start(int client_fd, int backend_fd)
{
    struct relay *relay = malloc(sizeof *relay);

    if (relay == NULL) {
        fprintf(stderr, "rsp: out of memory\n");
        return -1;
    }
    if (connection_init(&relay->client, client_fd, relay_handle, relay) == -1) {
        free(relay);
        return -1;
    }
    if (connection_init(&relay->backend, backend_fd, relay_handle, relay) == -1) {
        if (reactor_remove(&relay->client.handler) == -1)
            perror("rsp: epoll_ctl(DEL)");
        free(relay);
        return -1;
    }
    return 0;
}
