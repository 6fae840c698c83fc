/* http_client.c -- HTTPS requests made by rsp itself, on the reactor.
 *
 * One request per connection, in four steps, none of which blocks:
 *
 *   resolve    a DNS name with glibc's getaddrinfo_a, whose helper thread
 *              signals the end through a pipe the reactor watches (an
 *              address in the URL skips this);
 *   connect    a non-blocking connect to each address in turn, until one
 *              answers;
 *   exchange   the TLS transport in client mode (tls_attach_client) under
 *              a connection: the request goes through its write queue,
 *              which drives the handshake, and the response is read into
 *              http_client_response.c's parser;
 *   done       the caller's function is called with the response or why
 *              there is none.
 *
 * One timer bounds the whole exchange; it also carries a failure found
 * inside http_client_start to the caller, which must hear of it later.
 * Cancelling frees everything at once, except a name resolution under
 * way: it is left to finish, and freed when it says so. */
#define _GNU_SOURCE
#include "http_client.h"

#include "connection.h"
#include "log.h"
#include "net.h"
#include "reactor.h"
#include "timer.h"
#include "tls.h"
#include "version.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <unistd.h>

#define READ_SIZE 16384             /* one TLS record's plaintext (tls_transport.c) */
#define MAX_HOST 253                /* the longest DNS name */

/* A name being resolved by getaddrinfo_a. It lives until glibc is done
 * with it: if the client is cancelled meanwhile, client becomes NULL and
 * the resolution frees itself when its completion arrives. */
struct resolution {
    struct gaicb request;       /* glibc reads and writes it until completion */
    struct addrinfo hints;      /* and these, which it points to */
    char port[6];
    struct sigevent event;
    struct http_client *client; /* NULL once orphaned */
};

struct http_client {
    http_client_done done;
    void *closure;
    char *host;                 /* a name, or an address without brackets */
    char port[6];
    bool host_is_address;
    char *ca_file;              /* or NULL */
    double timeout;
    struct buffer request;      /* the request's bytes, until handed to the connection */
    struct resolution *resolution;  /* while resolving */
    struct addrinfo *addresses; /* the host's, from getaddrinfo(_a) */
    struct addrinfo *next;      /* the next one to try */
    char peer[INET6_ADDRSTRLEN + 9];  /* the address being tried: "1.2.3.4:443", "[::1]:443" */
    struct connection conn;
    struct http_client_parser parser;
    struct timer timer;
    bool starting;              /* inside http_client_start: a failure waits for the timer */
    char error[512];            /* such a failure, or the last connect error; "" if none */
};

/* -- resolving names ---------------------------------------------------------------------- */

/* getaddrinfo_a's completions arrive through this pipe: glibc's helper
 * thread writes the resolution's address, the reactor reads it. Made at
 * the first resolution, and again in a process forked since (the pipe
 * and the threads are the parent's). */
static struct {
    pid_t pid;                  /* of the process that made it; 0: not made */
    int write_fd;               /* blocking: the thread waits rather than lose a completion */
    struct epoll_event_handler reader;
} resolver = { .write_fd = -1, .reader = { .fd = -1 } };

static void client_resolved(struct http_client *h, struct resolution *r);

/* Runs in a thread of glibc's when a resolution is over: hands it to the
 * reactor. Touches nothing but the pipe (a pointer's 8 bytes are written
 * at once: less than PIPE_BUF). */
static void resolution_over(union sigval value)
{
    void *pointer = value.sival_ptr;
    ssize_t n;

    do
        n = write(resolver.write_fd, &pointer, sizeof pointer);
    while (n == -1 && errno == EINTR);
}

static void resolution_free(struct resolution *r)
{
    if (r->request.ar_result != NULL)
        freeaddrinfo(r->request.ar_result);
    free((char *)r->request.ar_name);
    free(r);
}

/* The pipe is readable: completions to hand to their clients. */
static void resolver_ready(struct epoll_event_handler *handler, uint32_t events)
{
    struct resolution *over[64];
    ssize_t n;

    (void)events;
    for (;;) {
        n = read(handler->fd, over, sizeof over);
        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1 && errno != EAGAIN)
            log_errno("reading the resolver's pipe");
        if (n <= 0)
            return;
        /* Writes of one pointer are atomic, so reads get whole ones. */
        for (size_t i = 0; i < (size_t)n / sizeof over[0]; i++) {
            if (over[i]->client == NULL)
                resolution_free(over[i]); /* its client was cancelled */
            else
                client_resolved(over[i]->client, over[i]);
        }
    }
}

/* Makes the pipe, if this process has none yet. Returns 0, or -1 with
 * errno set. */
static int resolver_ready_to_use(void)
{
    int fds[2];

    if (resolver.pid == getpid())
        return 0;
    if (resolver.pid != 0) {
        /* Forked: the parent's pipe is not ours to read. */
        close(resolver.reader.fd);
        close(resolver.write_fd);
        resolver.pid = 0;
    }
    if (pipe2(fds, O_CLOEXEC) == -1)
        return -1;
    resolver.reader = (struct epoll_event_handler){ fds[0], resolver_ready, NULL };
    resolver.write_fd = fds[1];
    if (fcntl(fds[0], F_SETFL, O_NONBLOCK) == -1 || reactor_add(&resolver.reader, EPOLLIN) == -1) {
        int error = errno;
        close(fds[0]);
        close(fds[1]);
        errno = error;
        return -1;
    }
    resolver.pid = getpid();
    return 0;
}

/* Starts resolving h->host. Returns 0, or -1 with why in h->error. */
static int resolve(struct http_client *h)
{
    struct resolution *r = calloc(1, sizeof *r);
    struct gaicb *list[1];
    int rc;

    if (r == NULL || (r->request.ar_name = strdup(h->host)) == NULL) {
        free(r);
        snprintf(h->error, sizeof h->error, "resolve %s: out of memory", h->host);
        return -1;
    }
    if (resolver_ready_to_use() == -1) {
        snprintf(h->error, sizeof h->error, "resolve %s: %s", h->host, strerror(errno));
        resolution_free(r);
        return -1;
    }
    r->hints = (struct addrinfo){ .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
    memcpy(r->port, h->port, sizeof r->port);
    r->request.ar_service = r->port;
    r->request.ar_request = &r->hints;
    r->event.sigev_notify = SIGEV_THREAD;
    r->event.sigev_notify_function = resolution_over;
    r->event.sigev_value.sival_ptr = r;
    r->client = h;
    list[0] = &r->request;
    rc = getaddrinfo_a(GAI_NOWAIT, list, 1, &r->event);
    if (rc != 0) {
        snprintf(h->error, sizeof h->error, "resolve %s: %s", h->host, gai_strerror(rc));
        resolution_free(r);
        return -1;
    }
    h->resolution = r;
    return 0;
}

/* Lets r go on without its client: its completion frees it. Not
 * gai_cancel: glibc (2.36) frees a request's notification record only
 * when the request completes, so each request it cancels leaks one; and
 * one it cannot cancel must be waited for anyway. A lookup takes at most
 * the resolver's timeouts, in glibc's thread. */
static void resolution_orphan(struct resolution *r)
{
    r->client = NULL;
}

/* -- the request -------------------------------------------------------------------------- */

static void finish(struct http_client *h, const char *error);
static bool try_addresses(struct http_client *h);

/* Fails h with a message: at once, or, inside http_client_start, when the
 * timer fires next (the caller must not hear of it before start returns). */
static void fail(struct http_client *h, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct http_client *h, const char *format, ...)
{
    char message[sizeof h->error];
    va_list ap;

    va_start(ap, format); /* the arguments may be h->error itself */
    vsnprintf(message, sizeof message, format, ap);
    va_end(ap);
    memcpy(h->error, message, sizeof h->error);
    if (!h->starting)
        finish(h, h->error);
    else if (timer_arm(&h->timer, reactor_now()) == -1)
        log_msg("http client: out of memory moving a timer; %s waits for its timeout", h->host);
}

/* The connection failed (errno `error`): says why. */
static void connection_failed(struct http_client *h, int error)
{
    char reason[256];

    if (tls_client_error(&h->conn, reason, sizeof reason) == 0)
        fail(h, "%s (%s)", reason, h->peer);
    else
        fail(h, "connection to %s failed: %s", h->peer, strerror(error));
}

/* Reads what the socket has into the parser. Returns true if h is over
 * (and freed). */
static bool read_response(struct http_client *h)
{
    char buf[READ_SIZE];
    int rc;

    for (;;) {
        ssize_t n = connection_read(&h->conn, buf, sizeof buf);
        if (n > 0) {
            rc = http_client_parser_feed(&h->parser, buf, (size_t)n);
        } else if (n == 0) {
            rc = http_client_parser_end(&h->parser);
        } else if (errno == EAGAIN) {
            return false;
        } else {
            connection_failed(h, errno);
            return true;
        }
        if (rc == 1) {
            finish(h, NULL);
            return true;
        }
        if (rc == -1) {
            fail(h, "%s (%s)", h->parser.error, h->peer);
            return true;
        }
    }
}

/* The connect has finished: TLS goes under the connection, and the
 * request into its write queue (the first write starts the handshake). */
static void connected(struct http_client *h)
{
    int error = net_connect_result(h->conn.handler.fd);
    char reason[256];

    if (error != 0) {
        snprintf(h->error, sizeof h->error, "connect to %s: %s", h->peer, strerror(error));
        connection_close(&h->conn);
        if (try_addresses(h))
            fail(h, "%s", h->error);
        return;
    }
    h->conn.connecting = false;
    if (tls_attach_client(&h->conn, h->host, h->ca_file, reason, sizeof reason) == -1) {
        fail(h, "%s", reason);
        return;
    }
    connection_write(&h->conn, buffer_bytes(&h->request), buffer_length(&h->request));
    error = errno;
    buffer_free(&h->request);
    if (h->conn.broken) {
        connection_failed(h, error);
        return;
    }
    if (connection_update(&h->conn) == -1)
        fail(h, "epoll_ctl for %s: %s", h->peer, strerror(errno));
}

/* An event on the connection. */
static void client_event(struct epoll_event_handler *handler, uint32_t events)
{
    struct http_client *h = handler->closure;

    if (h->conn.connecting) {
        connected(h);
        return;
    }
    events = connection_events(&h->conn, events);
    if ((events & EPOLLOUT) && connection_queued(&h->conn) > 0) {
        connection_flush(&h->conn);
        if (h->conn.broken) {
            connection_failed(h, errno);
            return;
        }
    }
    if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && read_response(h))
        return;
    if (connection_update(&h->conn) == -1)
        fail(h, "epoll_ctl for %s: %s", h->peer, strerror(errno));
}

/* a as "1.2.3.4:443" or "[::1]:443", into h->peer. */
static void name_peer(struct http_client *h, const struct addrinfo *a)
{
    char host[INET6_ADDRSTRLEN];

    if (getnameinfo(a->ai_addr, a->ai_addrlen, host, sizeof host, NULL, 0, NI_NUMERICHOST) != 0)
        snprintf(host, sizeof host, "?");
    snprintf(h->peer, sizeof h->peer, a->ai_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, h->port);
}

/* Starts a connect to the next address that takes one. Returns false if
 * one is under way, true if none is left (h->error says why the last one
 * failed). */
static bool try_addresses(struct http_client *h)
{
    while (h->next != NULL) {
        struct addrinfo *a = h->next;
        int fd;

        h->next = a->ai_next;
        name_peer(h, a);
        fd = net_connect_start(a);
        if (fd == -1) {
            snprintf(h->error, sizeof h->error, "connect to %s: %s", h->peer, strerror(errno));
            continue;
        }
        connection_init(&h->conn, fd, true, client_event, h);
        h->conn.sole = true;
        if (connection_update(&h->conn) == 0) {
            h->error[0] = '\0';
            return false;
        }
        snprintf(h->error, sizeof h->error, "epoll_ctl for %s: %s", h->peer, strerror(errno));
        connection_close(&h->conn);
    }
    if (h->error[0] == '\0')
        snprintf(h->error, sizeof h->error, "%s has no address", h->host);
    return true;
}

/* A name resolution is over: connect to what it found. */
static void client_resolved(struct http_client *h, struct resolution *r)
{
    int rc = gai_error(&r->request);

    h->resolution = NULL;
    if (rc != 0) {
        resolution_free(r);
        fail(h, "resolve %s: %s", h->host, gai_strerror(rc));
        return;
    }
    h->addresses = h->next = r->request.ar_result;
    r->request.ar_result = NULL;
    resolution_free(r);
    if (try_addresses(h))
        fail(h, "%s", h->error);
}

/* The timer: the exchange took too long, or start found a failure. */
static void timer_fired(struct timer *timer)
{
    struct http_client *h = timer->closure;
    const char *stage = h->resolution != NULL ? "resolving"
                        : h->conn.handler.fd == -1 || h->conn.connecting ? "connecting to"
                        : !tls_established(&h->conn) ? "in the TLS handshake with"
                        : connection_queued(&h->conn) > 0 ? "sending the request to"
                        : "waiting for the response of";

    if (h->error[0] != '\0')
        finish(h, h->error);
    else
        fail(h, "timed out after %g s %s %s", h->timeout, stage,
             h->resolution != NULL ? h->host : h->peer);
}

/* Frees everything h holds, and h. */
static void client_free(struct http_client *h)
{
    timer_disarm(&h->timer);
    if (h->resolution != NULL)
        resolution_orphan(h->resolution);
    connection_close(&h->conn);
    if (h->addresses != NULL)
        freeaddrinfo(h->addresses);
    http_client_parser_free(&h->parser);
    buffer_free(&h->request);
    free(h->host);
    free(h->ca_file);
    free(h);
}

/* Ends h: frees it, then tells its owner (error NULL: the response is
 * complete). */
static void finish(struct http_client *h, const char *error)
{
    struct http_client_response response;
    http_client_done done = h->done;
    void *closure = h->closure;
    char message[sizeof h->error];
    bool ok = error == NULL && http_client_parser_take(&h->parser, &response) == 0;

    snprintf(message, sizeof message, "%s", error != NULL ? error : "out of memory");
    client_free(h);
    done(closure, ok ? &response : NULL, ok ? NULL : message);
    if (ok)
        http_client_response_free(&response);
}

/* -- starting ----------------------------------------------------------------------------- */

/* True if every byte of s is visible ASCII (no blank, no control). */
static bool visible(const char *s)
{
    for (; *s != '\0'; s++)
        if ((unsigned char)*s <= ' ' || (unsigned char)*s >= 0x7f)
            return false;
    return true;
}

/* True if name is a DNS name: dot-separated labels of letters, digits,
 * hyphens (and underscores, which some hosts have), not all digits. */
static bool dns_name(const char *name, size_t length)
{
    bool letters = false;
    size_t label = 0;

    if (length == 0 || length > MAX_HOST)
        return false;
    for (size_t i = 0; i < length; i++) {
        char c = name[i];
        if (c == '.') {
            if (label == 0)
                return false;
            label = 0;
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_') {
            letters = true;
            label++;
        } else if (c >= '0' && c <= '9') {
            label++;
        } else {
            return false;
        }
    }
    return label > 0 && letters; /* "1.2.3" is no name, and no address either */
}

/* Reads the URL into h (host, port) and *path (from the start of the
 * path, up to any fragment; may be empty). Returns 0, -1 if the URL is
 * not one we take, or -2 if out of memory. */
static int parse_url(struct http_client *h, const char *url, const char **path, size_t *path_length)
{
    const char *authority, *end, *host, *host_end, *port = NULL;
    unsigned char address[sizeof(struct in6_addr)];
    int number;

    if (strncasecmp(url, "https://", 8) != 0 || !visible(url))
        return -1;
    authority = url + 8;
    end = authority + strcspn(authority, "/?#");
    if (memchr(authority, '@', (size_t)(end - authority)) != NULL)
        return -1;
    if (*authority == '[') {
        host = authority + 1;
        host_end = memchr(host, ']', (size_t)(end - host));
        if (host_end == NULL || (host_end + 1 != end && host_end[1] != ':'))
            return -1;
        if (host_end + 1 != end)
            port = host_end + 2;
    } else {
        host = authority;
        host_end = memchr(host, ':', (size_t)(end - host));
        if (host_end != NULL)
            port = host_end + 1;
        else
            host_end = end;
    }
    h->host = strndup(host, (size_t)(host_end - host));
    if (h->host == NULL)
        return -2;
    if (*authority == '[')
        h->host_is_address = inet_pton(AF_INET6, h->host, address) == 1;
    else
        h->host_is_address = inet_pton(AF_INET, h->host, address) == 1;
    if (!h->host_is_address && (*authority == '[' || !dns_name(h->host, strlen(h->host))))
        return -1;
    if (port != NULL) {
        char text[8] = "";
        if (end - port >= (ptrdiff_t)sizeof text)
            return -1;
        memcpy(text, port, (size_t)(end - port));
        if ((number = net_parse_port(text)) == -1)
            return -1;
        snprintf(h->port, sizeof h->port, "%d", number);
    } else {
        snprintf(h->port, sizeof h->port, "443");
    }
    *path = end;
    *path_length = strcspn(end, "#");
    return 0;
}

/* Appends the string s to b. Returns 0, or -1 if out of memory. */
static int add(struct buffer *b, const char *s)
{
    return buffer_append(b, s, strlen(s));
}

/* Writes the request's bytes into h->request. Returns 0, or -1 (ENOMEM). */
static int build_request(struct http_client *h, const struct http_client_request *request,
                         const char *path, size_t path_length)
{
    struct buffer *b = &h->request;
    char line[64];
    bool ipv6 = strchr(h->host, ':') != NULL;

    if (add(b, request->method) || add(b, " ") || (path[0] != '/' && add(b, "/")) ||
        (path_length > 0 && buffer_append(b, path, path_length)) || add(b, " HTTP/1.1\r\nHost: ") ||
        (ipv6 && add(b, "[")) || add(b, h->host) || (ipv6 && add(b, "]")) ||
        (strcmp(h->port, "443") != 0 && (add(b, ":") || add(b, h->port))) ||
        add(b, "\r\nUser-Agent: rsp/" RSP_VERSION "\r\nAccept: */*\r\nConnection: close\r\n"))
        return -1;
    if (request->content_type != NULL &&
        (add(b, "Content-Type: ") || add(b, request->content_type) || add(b, "\r\n")))
        return -1;
    if (request->body != NULL || strcmp(request->method, "POST") == 0) {
        snprintf(line, sizeof line, "Content-Length: %zu\r\n", request->body_length);
        if (add(b, line))
            return -1;
    }
    if (add(b, "\r\n") || (request->body != NULL && buffer_append(b, request->body, request->body_length)))
        return -1;
    return 0;
}

/* True if the request's fields other than the URL are acceptable. */
static bool request_valid(const struct http_client_request *request)
{
    const char *type = request->content_type;

    if (request->method == NULL || request->url == NULL ||
        (strcmp(request->method, "GET") != 0 && strcmp(request->method, "HEAD") != 0 &&
         strcmp(request->method, "POST") != 0))
        return false;
    if (request->body == NULL && request->body_length > 0)
        return false;
    for (; type != NULL && *type != '\0'; type++)
        if ((unsigned char)*type < ' ' || *type == 0x7f)
            return false;
    return request->timeout > 0; /* false for NaN too */
}

/* The host is an address: its one addrinfo, made without a lookup.
 * Returns 0, or -1 (ENOMEM). */
static int numeric_address(struct http_client *h)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
    int rc = getaddrinfo(h->host, h->port, &hints, &h->addresses);

    if (rc != 0) {
        errno = rc == EAI_MEMORY ? ENOMEM : EINVAL;
        return -1;
    }
    h->next = h->addresses;
    return 0;
}

struct http_client *http_client_start(const struct http_client_request *request, http_client_done done,
                                      void *closure)
{
    struct http_client *h;
    const char *path;
    size_t path_length;
    int rc;

    if (!request_valid(request)) {
        errno = EINVAL;
        return NULL;
    }
    h = calloc(1, sizeof *h);
    if (h == NULL)
        return NULL;
    h->done = done;
    h->closure = closure;
    h->timeout = request->timeout;
    h->request = (struct buffer)BUFFER_INIT;
    connection_init_none(&h->conn);
    http_client_parser_init(&h->parser, strcmp(request->method, "HEAD") == 0, request->max_response);
    timer_init(&h->timer, timer_fired, h);
    if ((rc = parse_url(h, request->url, &path, &path_length)) != 0) {
        client_free(h);
        errno = rc == -1 ? EINVAL : ENOMEM;
        return NULL;
    }
    if ((request->ca_file != NULL && (h->ca_file = strdup(request->ca_file)) == NULL) ||
        build_request(h, request, path, path_length) == -1 ||
        timer_arm(&h->timer, reactor_now() + request->timeout) == -1 ||
        (h->host_is_address && numeric_address(h) == -1)) {
        int error = errno;
        client_free(h);
        errno = error;
        return NULL;
    }
    h->starting = true;
    if (h->host_is_address ? try_addresses(h) : (resolve(h) == -1))
        fail(h, "%s", h->error);
    h->starting = false;
    return h;
}

void http_client_cancel(struct http_client *client)
{
    if (client != NULL)
        client_free(client);
}

void http_client_forget(struct http_client *client)
{
    if (client == NULL)
        return;
    /* The socket is in the parent's epoll, not this process's: closing it
     * here is all it takes. A resolution under way is the parent's glibc
     * threads' (none run here): it is left orphaned, as a cancel does. */
    client->conn.registered = 0;
    client_free(client);
}
