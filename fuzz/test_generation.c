/* test_generation.c -- tests of releasing an old config generation
 * (src/generation.c's generation_release), built with AddressSanitizer and
 * UndefinedBehaviorSanitizer (`make -C fuzz test-generation`).
 *
 * A request that began under an old generation holds it; when it lets go
 * of the last reference, the generation's teardown (its pools, the health
 * checks and idle connections of backends no other generation names, its
 * Lua state) must wait for the end of the reactor's batch, not run inside
 * the request's handler. The test loads two real generations naming two
 * real listening sockets, parks an idle connection to the old one's
 * backend, and from inside a batch (a timer) installs the new one and
 * drops the old one's last reference: during the handler the old backend
 * is still registered and its idle connection open (the listening side
 * reads nothing and no EOF); once the batch is over the backend is gone
 * and the connection closed (EOF), while the new generation's backend
 * stays. Outside a batch (rsp stopping) the release happens at once, and
 * a reference that is not the last frees nothing. A failed check prints
 * the case, the condition and what came; the program exits 1 after all
 * cases ran. */
#include "backend.h"
#include "config.h"
#include "generation.h"
#include "reactor.h"
#include "settings.h"
#include "timer.h"
#include "upstream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"

static const char *current;
static int failures;

/* A listening socket on 127.0.0.1, its port in *port; -1 on failure. */
static int listen_local(int *port)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t length = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd == -1 || bind(fd, (struct sockaddr *)&a, sizeof a) == -1 || listen(fd, 8) == -1 ||
        getsockname(fd, (struct sockaddr *)&a, &length) == -1) {
        perror("test_generation: a listening socket");
        exit(1);
    }
    *port = ntohs(a.sin_port);
    return fd;
}

/* A generation whose default site is the backend 127.0.0.1:port, with one
 * reference; the test cannot go on without it. */
static struct config *load(int port)
{
    char text[200];
    int n = snprintf(text, sizeof text, "listen = 8000\nbackends = { \"127.0.0.1:%d\" }\n", port);
    struct config *c = config_open_text("test.lua", text, (size_t)n);

    if (c == NULL) {
        fprintf(stderr, "test_generation: the config for port %d did not load\n", port);
        exit(1);
    }
    return c;
}

/* The registered backend named 127.0.0.1:port, or NULL. */
static struct backend *registered(int port)
{
    char name[32];

    snprintf(name, sizeof name, "127.0.0.1:%d", port);
    for (struct backend *b = backend_first(); b != NULL; b = b->registry_next)
        if (strcmp(b->name, name) == 0)
            return b;
    return NULL;
}

/* What the listening side's end of a connection shows: 1 if it is open
 * with nothing to read, 0 if the other end closed it (EOF), -1 otherwise. */
static int peer_state(int fd)
{
    char byte;
    ssize_t n = recv(fd, &byte, 1, MSG_DONTWAIT);

    if (n == 0)
        return 0;
    return n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK) ? 1 : -1;
}

static void unused_event(void *owner, uint32_t events)
{
    (void)owner;
    (void)events;
}

/* The case run inside a batch, and what it saw there. */
static struct {
    struct config *old, *next;
    int old_port, next_port;
    int accepted;             /* the listening side of the old backend's idle connection */
    bool registered_during;   /* the old backend, while the handler ran */
    int peer_during;          /* peer_state while the handler ran */
} batch;

/* A request's handler: a reload comes (the new generation installed), and
 * the request, which began under the old one, lets go of it last. */
static void handler(struct timer *timer)
{
    (void)timer;
    generation_install(batch.next, false);
    generation_release(batch.old);
    batch.registered_during = registered(batch.old_port) != NULL;
    batch.peer_during = peer_state(batch.accepted);
    reactor_stop();
}

static void test_in_batch(void)
{
    int old_listener = listen_local(&batch.old_port);
    int next_listener = listen_local(&batch.next_port);
    struct keepalive k = { .backend_idle = 4, .backend_idle_timeout = 30 };
    struct timer timer;

    current = "in a batch";
    batch.old = load(batch.old_port);
    batch.next = load(batch.next_port);
    generation_install(batch.old, false);
    config_hold(batch.old); /* the request's reference */
    /* An idle connection of the old backend, in its pool. */
    struct backend *b = registered(batch.old_port);
    CHECK(b != NULL, "the old backend is not registered");
    if (b == NULL)
        return;
    struct upstream *u = upstream_connect(b, b->addresses, unused_event, NULL);
    CHECK(u != NULL, "connect: %s", strerror(errno));
    if (u == NULL)
        return;
    batch.accepted = accept(old_listener, NULL, NULL);
    CHECK(batch.accepted != -1, "accept: %s", strerror(errno));
    u->conn.connecting = false; /* as its exchange does once the connect is done: accepted */
    upstream_release(u, true, &k);
    CHECK(b->idle == u, "the connection is not idle in its backend's pool");

    timer_init(&timer, handler, NULL);
    CHECK(timer_arm(&timer, reactor_now()) == 0, "timer_arm");
    CHECK(reactor_run() == 0, "reactor_run");

    CHECK(batch.registered_during, "the old backend was torn down inside the request's handler");
    CHECK(batch.peer_during == 1, "its idle connection was closed inside the handler (peer %d)",
          batch.peer_during);
    CHECK(registered(batch.old_port) == NULL, "the old backend is still registered after the batch");
    CHECK(peer_state(batch.accepted) == 0, "its idle connection is still open after the batch");
    CHECK(registered(batch.next_port) != NULL, "the new generation's backend went too");
    CHECK(generation_current() == batch.next, "the new generation is not current");
    close(batch.accepted);
    close(old_listener);
    close(next_listener);
}

/* Outside a batch (rsp stopping), and a reference that is not the last. */
static void test_outside_batch(void)
{
    int port, listener = listen_local(&port);
    struct config *c = load(port);

    current = "not the last reference";
    config_hold(c);
    generation_release(c);
    CHECK(registered(port) != NULL, "a generation still held was freed");
    current = "outside a batch";
    generation_release(c);
    CHECK(registered(port) == NULL, "the last reference outside a batch did not free it at once");
    close(listener);
}

int main(void)
{
    if (reactor_init() == -1)
        return 1;
    test_in_batch();
    test_outside_batch();
    generation_clear();
    reactor_close();
    if (failures) {
        printf("test_generation: %d checks FAILED\n", failures);
        return 1;
    }
    printf("test_generation: all checks passed\n");
    return 0;
}
