/* config.h -- rsp's settings, read from a Lua script. */
#ifndef RSP_CONFIG_H
#define RSP_CONFIG_H

#include "backend.h"
#include "http.h"
#include "request.h"
#include "route.h"
#include "router.h"

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
 * At least one of backends, sites and route must be there. Backend names
 * are resolved here, once. With a route function the Lua state stays
 * alive in config->route. On any problem prints one line
 * naming the file and the setting to stderr and returns -1; otherwise fills
 * *config and returns 0. */
int config_load(const char *path, struct config *config);

/* Frees what config_load allocated. */
void config_free(struct config *config);

#endif
