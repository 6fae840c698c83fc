/* config.h -- rsp's settings, read from a Lua script. */
#ifndef RSP_CONFIG_H
#define RSP_CONFIG_H

#include "backend.h"
#include "http.h"
#include "request.h"
#include "route.h"
#include "router.h"

/* How long each wait may last, in seconds (relay.c). */
struct timeouts {
    double connect;             /* for a backend to accept the connection */
    double header;              /* for a client to send its whole request head */
    double body;                /* between two reads of a request body */
    double response;            /* for a backend to begin its response */
    double idle;                /* with no byte either way */
};

/* Keeping connections open for more requests (chapter 09). */
struct keepalive {
    double timeout;             /* a client's silence between requests, seconds; 0: close */
    unsigned requests;          /* requests per client connection */
    unsigned backend_idle;      /* idle connections kept per backend; 0: none */
    double backend_idle_timeout; /* seconds an idle backend connection is kept */
};

struct config {
    char *listen_host;          /* NULL: every local address */
    char listen_port[6];        /* "1".."65535" */
    struct pool default_pool;   /* the default site; used if router.fallback */
    struct named_pool *pools;   /* pools = { NAME = {...} }, sorted by name */
    size_t pool_count;
    struct router router;       /* the sites, and the default one */
    struct http_limits limits;  /* request line and head sizes */
    struct request_policy policy; /* underscores in header names, encoded slashes */
    double route_time_limit;    /* seconds */
    struct timeouts timeouts;
    struct keepalive keepalive;
    struct health_settings health; /* top-level health_check: every pool's default */
    struct route_hook route;    /* route.L == NULL: no route function */
};

/* Runs the Lua script at path and reads these globals from it:
 *   listen    = 8000 | "8000" | "127.0.0.1:8000" | "[::1]:8000"
 *   backends  = { "HOST:PORT", ... }   the default site (1 to 64 entries);
 *                                      optional if there are sites or route
 *   balance   = "round_robin" | "least_conn"   for the default site
 *   pools     = { NAME = { backends = {...}, balance = "..." }, ... }   optional
 *   sites     = { ["www.example.com"] = { backends = {...}, balance = "..." },
 *                 ["*.example.com"] = { pool = "NAME" } }   optional
 *   route     = function (req) ... end   optional: chooses per request
 *   route_time_limit = seconds route may run per request (default 0.1)
 *   down_time = seconds a failed backend is skipped (default 5)
 *   max_request_line = 8192, max_request_head = 32768   (bytes)
 *   allow_underscores_in_headers = false   forward header names with '_'
 *   allow_encoded_slashes = false   let %2F, %5C and '\' through in paths (else 400)
 *   connect_timeout = 5, header_timeout = 10, body_timeout = 30,
 *   response_timeout = 60, idle_timeout = 300   (seconds, fractions allowed)
 *   keepalive_timeout = 75 (seconds; 0: one request per client connection),
 *   keepalive_requests = 1000, backend_keepalive = 32 (idle connections kept
 *   per backend; 0: none), backend_idle_timeout = 30 (seconds)
 *   health_check = { path = "/", interval = 2, timeout = 1, rise = 2, fall = 3 }
 *               active checks for every pool and site (off without it); a pool
 *               or site may have its own health_check, or false
 * At least one of backends, sites and route must be there. Backend names
 * are resolved here, once. With a route function the Lua state stays
 * alive in config->route. On any problem prints one line
 * naming the file and the setting to stderr and returns -1; otherwise fills
 * *config and returns 0. */
int config_load(const char *path, struct config *config);

/* The pools of the config, one by one for i = 0, 1, ...: the default
 * site's, the named pools, and the sites' own; NULL past the last. */
struct pool *config_pool_at(struct config *config, size_t i);

/* Frees what config_load allocated. */
void config_free(struct config *config);

#endif
