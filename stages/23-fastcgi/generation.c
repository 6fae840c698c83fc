/* generation.c -- the current config generation. */
#include "generation.h"

#include "acme_certs.h"
#include "acme_client.h"
#include "backend.h"
#include "config.h"
#include "health.h"
#include "log.h"
#include "reactor.h"
#include "ticket_keys.h"

#include <stddef.h>
#include <stdlib.h>

static struct config *current;
static unsigned installed; /* generations installed so far */
static bool serving;          /* this process serves clients (generation_serve) */

struct config *generation_current(void)
{
    return current;
}

/* Starts, stops or restarts health checks so that they are what c says. */
static void sync_health_checks(struct config *c)
{
    struct pool *pool;
    struct backend *b;

    for (b = backend_first(); b != NULL; b = b->registry_next)
        b->check_wanted = NULL;
    for (size_t i = 0; (pool = config_pool_at(c, i)) != NULL; i++) {
        if (!pool->health.enabled || pool->root != NULL)
            continue; /* a pool of files has no backends to check */
        for (size_t j = 0; j < pool->count; j++)
            if (pool->backends[j]->check_wanted == NULL)
                pool->backends[j]->check_wanted = &pool->health;
        log_msg("health checks: GET %s every %g s (timeout %g s, rise %u, fall %u) for %zu backend%s",
                pool->health.path, pool->health.interval, pool->health.timeout, pool->health.rise,
                pool->health.fall, pool->count, pool->count == 1 ? "" : "s");
    }
    for (b = backend_first(); b != NULL; b = b->registry_next) {
        const struct health_settings *wanted = b->check_wanted;

        b->check_wanted = NULL;
        if (wanted != NULL && health_check_runs(b, wanted))
            continue; /* unchanged: it keeps its counts */
        health_check_stop(b);
        if (wanted == NULL)
            backend_set_failing(b, false); /* nobody checks it: passive health alone judges it */
        else if (health_check_start(b, wanted) == -1)
            log_msg("health checks of %s do not run", b->name);
    }
}

unsigned generation_install(struct config *c, bool check_health)
{
    struct config *previous = current;

    c->generation = ++installed;
    current = c;
    if (check_health) {
        sync_health_checks(c);
        acme_client_apply(c->tls.acme);
        ticket_keys_set_lifetime(c->operations.ticket_key_lifetime);
    }
    if (serving)
        acme_certs_apply(c->tls.acme);
    if (previous != NULL)
        config_release(previous);
    return c->generation;
}

int generation_serve(void)
{
    serving = true;
    return current != NULL ? acme_certs_apply(current->tls.acme) : 0;
}

/* The end of the batch in which generation_release let go of c's last
 * reference. */
static void free_released(struct reactor_deferred *d)
{
    struct config *c = (struct config *)((char *)d - offsetof(struct config, released));

    config_free(c);
    free(c);
}

void generation_release(struct config *c)
{
    if (--c->refs > 0)
        return;
    c->released.release = free_released;
    reactor_defer(&c->released);
}

void generation_clear(void)
{
    acme_client_stop();
    acme_certs_close();
    if (current != NULL)
        config_release(current);
    current = NULL;
}
