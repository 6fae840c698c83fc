/* config_scaling.c -- the settings of chapters 12 and 13 that have a
 * shape of their own: the status listener (status_listen, checked against
 * status_public) and the worker processes (workers). The booleans
 * (status_public, reuseport, splice) are config_settings.c's. */
#include "config_read.h"

#include "net.h"

#include <arpa/inet.h>
#include <lauxlib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_WORKERS 64

/* True if every address host resolves to is a loopback one (127.0.0.0/8,
 * ::1): the status page tells a stranger which backends are down and how
 * busy the site is, so by default only this machine may ask. */
static bool only_loopback(const char *host)
{
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *list, *a;
    bool loopback = true;

    if (getaddrinfo(host, NULL, &hints, &list) != 0)
        return false;
    for (a = list; a != NULL && loopback; a = a->ai_next) {
        if (a->ai_family == AF_INET) {
            const struct sockaddr_in *v4 = (const struct sockaddr_in *)a->ai_addr;
            loopback = (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
        } else if (a->ai_family == AF_INET6) {
            const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)a->ai_addr;
            loopback = IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
        } else {
            loopback = false;
        }
    }
    freeaddrinfo(list);
    return loopback;
}

/* status_listen = 9090 | "9090" | "HOST:PORT" | "[::1]:PORT". A port
 * alone means 127.0.0.1. */
static int read_status_listen(lua_State *L, const char *path, struct scaling *s)
{
    int rc;

    config_global(L, "status_listen");
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return 0;
    }
    rc = config_read_address(L, path, "status_listen", &s->status_host, s->status_port);
    lua_pop(L, 1);
    if (rc == -1)
        return -1;
    if (s->status_host == NULL && (s->status_host = strdup("127.0.0.1")) == NULL) {
        config_error(path, "out of memory");
        return -1;
    }
    if (!s->status_public && !only_loopback(s->status_host)) {
        config_error(path, "setting 'status_listen': %s is not a loopback address; the status "
                           "page is for this machine only, unless status_public = true", s->status_host);
        return -1;
    }
    return 0;
}

/* workers = N (1..64) | "auto" (one per CPU). */
static int read_workers(lua_State *L, const char *path, unsigned *workers)
{
    int rc = 0;

    config_global(L, "workers");
    *workers = 1;
    if (lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), "auto") == 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        *workers = cpus < 1 ? 1 : cpus > MAX_WORKERS ? MAX_WORKERS : (unsigned)cpus;
    } else if (lua_type(L, -1) == LUA_TNUMBER && lua_tonumber(L, -1) >= 1 &&
               lua_tonumber(L, -1) <= MAX_WORKERS &&
               lua_tonumber(L, -1) == (lua_Number)(int)lua_tonumber(L, -1)) {
        *workers = (unsigned)lua_tonumber(L, -1);
    } else if (!lua_isnil(L, -1)) {
        config_error(path, "setting 'workers' must be a whole number from 1 to %d, or \"auto\"",
                     MAX_WORKERS);
        rc = -1;
    }
    lua_pop(L, 1);
    return rc;
}

/* The same address and port as `listen` would be one socket for two jobs. */
static bool same_as_listen(const struct config *c)
{
    const char *listen_host = c->listen_host != NULL ? c->listen_host : "";

    return strcmp(c->scaling.status_port, c->listen_port) == 0 &&
           (c->listen_host == NULL || strcmp(listen_host, c->scaling.status_host) == 0);
}

int config_read_scaling(lua_State *L, const char *path, struct config *config)
{
    struct scaling *s = &config->scaling;

    if (read_status_listen(L, path, s) == -1 || read_workers(L, path, &s->workers) == -1)
        return -1;
    if (s->status_host != NULL && same_as_listen(config)) {
        config_error(path, "setting 'status_listen' must not be the address 'listen' serves (%s)",
                     config->listen_port);
        return -1;
    }
    return 0;
}
