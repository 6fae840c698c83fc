/* config.h -- rsp's settings, read from a Lua script. */
#ifndef RSP_CONFIG_H
#define RSP_CONFIG_H

#include "backend.h"

struct config {
    char *listen_host;      /* NULL: every local address */
    char listen_port[6];    /* "1".."65535" */
    struct pool pool;       /* the backends, resolved, and how to balance */
};

/* Runs the Lua script at path and reads these globals from it:
 *   listen    = 8000 | "8000" | "127.0.0.1:8000" | "[::1]:8000"
 *   backends  = { "HOST:PORT", ... }            (1 to 64 entries)
 *   balance   = "round_robin" | "least_conn"    (default "round_robin")
 *   down_time = seconds a failed backend is skipped (default 5)
 * Backend names are resolved here, once. On any problem prints one line
 * naming the file and the setting to stderr and returns -1; otherwise fills
 * *config and returns 0. */
int config_load(const char *path, struct config *config);

/* Frees what config_load allocated. */
void config_free(struct config *config);

#endif
