/* rsp.c -- stage 01: a one-shot, blocking reverse proxy.
 *
 * Usage: rsp LISTEN_PORT BACKEND_HOST BACKEND_PORT
 *
 * Accepts one client at a time, connects to the backend for it, relays
 * bytes both ways until the backend closes, then takes the next client. */
#include "net.h"
#include "relay.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

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

    listen_fd = net_listen(listen_port);
    if (listen_fd == -1)
        return 1;
    printf("Started. Listening on port %s.\n", listen_port);
    fflush(stdout);

    for (;;) {
        int client_fd, backend_fd;

        client_fd = accept(listen_fd, NULL, NULL);
        if (client_fd == -1) {
            /* Nothing here is fatal: a client that gave up before we got
             * to it (ECONNABORTED), a signal, or running out of fds. */
            if (errno != EINTR && errno != ECONNABORTED)
                perror("rsp: accept");
            if (errno == EMFILE || errno == ENFILE)
                sleep(1); /* let some fds close rather than spin */
            continue;
        }

        backend_fd = net_connect(backend_host, backend_port);
        if (backend_fd != -1) {
            relay(client_fd, backend_fd);
            close(backend_fd);
        }
        /* With no backend, closing is all we can do: the client sees the
         * connection end without an answer, and we wait for the next. */
        close(client_fd);
    }
}
