/* health.h -- active health checks: rsp asks each backend itself.
 *
 * Passive health (pool.c) learns that a backend is down only when a
 * client's connect to it fails, and tries it again after down_time with a
 * real client's request. Active checks learn it without costing any client
 * anything: every `interval` seconds rsp sends each backend of a pool
 * `GET path HTTP/1.1` and reads the status line. `fall` failures in a row
 * (a status of 500 or more, no answer within `timeout`, a refused
 * connection) mark the backend down, and no request is sent to it until
 * `rise` checks in a row pass. */
#ifndef RSP_HEALTH_H
#define RSP_HEALTH_H

#include "pool.h"

/* Starts checking backend b with these settings (copied); the first
 * check starts at once. Returns 0, or -1 if out of memory (logged). */
int health_check_start(struct backend *b, const struct health_settings *settings);

/* True if b is checked, with these very settings. */
bool health_check_runs(const struct backend *b, const struct health_settings *settings);

/* Stops b's check (closing its socket, if one is open) and frees it. Safe
 * for a backend without one. Call before the reactor is closed. */
void health_check_stop(struct backend *b);

/* In a worker just forked from the master: drops b's check, which the
 * master goes on running, without touching the master's reactor. */
void health_check_forget(struct backend *b);

#endif
