/* listener.c -- the handler of the listening socket. */
#define _GNU_SOURCE /* for accept4 */
#include "listener.h"

#include "log.h"
#include "net.h"
#include "reactor.h"
#include "relay.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

struct listener {
    struct epoll_event_handler handler;
    struct config *config;
    struct relay_set *relays;
    /* An fd held in reserve for when we run out: see accept_overflow(). */
    int spare_fd;
};

/* We are out of file descriptors (EMFILE/ENFILE) and a client may be
 * waiting. If we left it in the queue, level-triggered epoll would wake us
 * for it again at once, forever. So we free our spare fd, accept the client,
 * close it straight away (it sees its connection end at once rather than
 * hang) and take the spare again. */
static void accept_overflow(struct listener *listener)
{
    int fd;

    if (listener->spare_fd != -1)
        close(listener->spare_fd);
    fd = accept(listener->handler.fd, NULL, NULL);
    if (fd != -1) {
        close(fd);
        log_msg("out of file descriptors, turned a client away");
    }
    listener->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}


static void listener_handle(struct epoll_event_handler *self, uint32_t events)
{
    struct listener *listener = self->closure;

    (void)events;
    /* Take every client that is waiting, not just one: fewer trips
     * through epoll_wait when many arrive together. */
    for (;;) {
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
                accept_overflow(listener);
                return;
            }
            log_errno("accept4");
            return;
        }
        if (net_set_nodelay(client_fd) == -1)
            log_errno("setsockopt(TCP_NODELAY)"); /* slower, but it works */
        if (relay_start(client_fd, (struct sockaddr *)&address, length, listener->config,
                        listener->relays) == -1)
            close(client_fd);
    }
}

struct listener *listener_start(int listen_fd, struct config *config, struct relay_set *relays)
{
    struct listener *listener = malloc(sizeof *listener);

    if (listener == NULL) {
        log_msg("out of memory");
        return NULL;
    }
    listener->handler.fd = listen_fd;
    listener->handler.handle = listener_handle;
    listener->handler.closure = listener;
    listener->config = config;
    listener->relays = relays;
    listener->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (listener->spare_fd == -1 || reactor_add(&listener->handler, EPOLLIN) == -1) {
        log_errno("listener_start");
        if (listener->spare_fd != -1)
            close(listener->spare_fd);
        free(listener);
        return NULL;
    }
    return listener;
}

void listener_stop(struct listener *listener)
{
    if (reactor_remove(&listener->handler) == -1)
        log_errno("epoll_ctl(DEL) listener");
    if (close(listener->handler.fd) == -1)
        log_errno("close listener");
    if (listener->spare_fd != -1 && close(listener->spare_fd) == -1)
        log_errno("close spare fd");
    free(listener);
}
