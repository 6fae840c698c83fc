/* rsp.c -- stage 04: the epoll proxy, configured by a Lua script, with
 * buffered writes and backpressure so that no byte is lost.
 *
 * Usage: rsp CONFIG.lua */
#include "config.h"
#include "listener.h"
#include "net.h"
#include "reactor.h"

#include <signal.h>
#include <stdio.h>

int main(int argc, char *argv[])
{
    struct config config;
    int listen_fd;

    if (argc != 2) {
        fprintf(stderr, "usage: rsp CONFIG.lua\n");
        return 2;
    }
    if (config_load(argv[1], &config) == -1)
        return 1;

    /* A client that disconnects while we write to it must give us EPIPE,
     * not kill the whole proxy with SIGPIPE. */
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
        perror("rsp: signal");
        return 1;
    }
    if (reactor_init() == -1)
        return 1;
    listen_fd = net_listen(config.listen_port);
    if (listen_fd == -1)
        return 1;
    if (listener_start(listen_fd, config.backend_address, config.backend_port) == -1)
        return 1;
    printf("Started. Listening on port %s.\n", config.listen_port);
    fflush(stdout);

    reactor_run();
    return 1; /* reactor_run returns only when epoll itself fails */
}
