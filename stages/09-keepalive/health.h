/* health.h -- active health checks: rsp asks each backend itself.
 *
 * Passive health (backend.c) learns that a backend is down only when a
 * client's connect to it fails, and tries it again after down_time with a
 * real client's request. Active checks learn it without costing any client
 * anything: every `interval` seconds rsp sends each backend of a pool
 * `GET path HTTP/1.1` and reads the status line. `fall` failures in a row
 * (a status of 500 or more, no answer within `timeout`, a refused
 * connection) mark the backend down, and no request is sent to it until
 * `rise` checks in a row pass. */
#ifndef RSP_HEALTH_H
#define RSP_HEALTH_H

#include "backend.h"

/* Starts checking every backend of the pool, if its settings enable
 * checks; the first checks start at once. Returns 0, or -1 if out of
 * memory (after logging; nothing is left running). */
int health_start(struct pool *pool);

/* Stops the pool's checks (closing any under way) and frees them. Safe to
 * call for a pool without checks. Call before the reactor is closed. */
void health_stop(struct pool *pool);

#endif
