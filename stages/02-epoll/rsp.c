/* rsp.c -- stage 02: many clients at once on one thread, with epoll.
 *
 * Usage: rsp LISTEN_PORT BACKEND_HOST BACKEND_PORT */
#include "listener.h"
#include "net.h"
#include "reactor.h"

#include <signal.h>
#include <stdio.h>

static void usage(void)
{
    fprintf(stderr, "usage: rsp LISTEN_PORT BACKEND_HOST BACKEND_PORT\n");
}

int main(int argc, char *argv[])
{
    const char *listen_port, *backend_host, *backend_port;
    int listen_fd;

    if (argc != 4) {
        usage();
        return 2;
    }
    listen_port = argv[1];
    backend_host = argv[2];
    backend_port = argv[3];
    if (net_parse_port(listen_port) == -1 || net_parse_port(backend_port) == -1) {
        fprintf(stderr, "rsp: a port must be a number from 1 to 65535\n");
        usage();
        return 2;
    }

    /* A client that disconnects while we write to it must give us EPIPE,
     * not kill the whole proxy with SIGPIPE. */
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
        perror("rsp: signal");
        return 1;
    }
    if (reactor_init() == -1)
        return 1;
    listen_fd = net_listen(listen_port);
    if (listen_fd == -1)
        return 1;
    if (listener_start(listen_fd, backend_host, backend_port) == -1)
        return 1;
    printf("Started. Listening on port %s.\n", listen_port);
    fflush(stdout);

    reactor_run();
    return 1; /* reactor_run returns only when epoll itself fails */
}
