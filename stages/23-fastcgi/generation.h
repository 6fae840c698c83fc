/* generation.h -- which config new requests use.
 *
 * The current generation is the config new requests start under. A relay
 * holds the generation its request began in until the request is over, so
 * installing a new one (a reload) changes nothing for requests in flight:
 * they finish on the settings, pools and Lua state they started with, and
 * an old generation is freed when its last request ends (at the end of
 * that reactor batch: generation_release). Backends that
 * stay in the new config are the same objects (backend.h), with their
 * health and idle connections. */
#ifndef RSP_GENERATION_H
#define RSP_GENERATION_H

#include <stdbool.h>

struct config;

/* The current generation (NULL before the first install). Not a new
 * reference: config_hold it to keep it. */
struct config *generation_current(void);

/* Makes c the current generation, taking over the caller's reference and
 * numbering it; the previous one is released. With check_health (rsp
 * alone, or the master; never a worker) brings the active health checks
 * in line with c: a backend is checked with the settings of the
 * first of c's pools that checks it, and backends c does not check are
 * not checked any more. Returns c's number. */
unsigned generation_install(struct config *c, bool check_health);

/* Says this process serves clients (rsp alone, or a worker): from now on
 * it keeps the ACME client's certificates of each generation it installs
 * (acme_certs.h), starting with the current one. The process that checks
 * health also runs the ACME client (acme_client.h). Returns 0, or -1. */
int generation_serve(void);

/* Drops a request's reference to c, the generation it began in. If it was
 * the last, c is freed at the end of the reactor's batch (at once if no
 * batch is being handled): an old generation's teardown (its pools, the
 * health checks and idle connections of backends no other generation
 * names, its Lua state) is not paid by the request that happens to let
 * go of it last, nor by the other events of its batch. */
void generation_release(struct config *c);

/* Releases the current generation (when rsp stops). */
void generation_clear(void);

#endif
