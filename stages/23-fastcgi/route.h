/* route.h -- asking the config's route() function where a request goes.
 *
 * The Lua state that ran the config stays alive for the life of rsp when
 * the config defines route(req). For every request head we build the table
 * req, call route in a coroutine with a time limit, and turn what it
 * returns into a decision: a pool, an answer that rsp sends itself, or
 * "route as chapter 06 does". */
#ifndef RSP_ROUTE_H
#define RSP_ROUTE_H

#include "buffer.h"
#include "http.h"
#include "pool.h"
#include "request.h"

#include <lua.h>
#include <stdbool.h>

struct route_hook {
    lua_State *L;         /* NULL: the config has no route function */
    int function_ref;     /* route, kept in the registry */
    int pools_ref;        /* a table: pool name -> struct pool * (light userdata) */
    int thread_ref;       /* the coroutine route runs in, reused while it ends well */
    double time_limit;    /* seconds route may run per request */
    char *scratch;        /* room to lower-case and normalize strings for req */
    size_t scratch_size;
};

/* What route decided. */
enum route_outcome {
    ROUTE_DEFAULT,        /* nil: route by Host as chapter 06 does */
    ROUTE_POOL,           /* send the request to *pool */
    ROUTE_ANSWER,         /* send the response in *answer, and nothing else */
    ROUTE_FAILED,         /* route failed (logged): answer 500 */
};

/* The request route() looks at. */
struct route_request {
    const struct request_view *request; /* its spans point into request->buf */
    const struct request_info *info;
    const char *client_address;         /* the client's IP address as text */
};

/* Makes hook call L's global function route for each request, with the
 * count pools reachable by name. Takes L over: route_hook_free
 * closes it. Switches LuaJIT's compiler off (see route.c for why). Returns
 * 0, or -1 if out of memory (L is closed then too). */
int route_hook_init(struct route_hook *hook, lua_State *L, struct named_pool *pools, size_t count,
                    double time_limit);

/* Calls route(req) for rq and says what to do. For ROUTE_POOL sets *pool;
 * for ROUTE_ANSWER writes a complete response into answer, which must be
 * empty (without its body when head_only: the request was HEAD; with the
 * `connection` header line, see reply_append); for the
 * other outcomes answer is left empty. Never raises a Lua error and never
 * runs longer than about hook->time_limit, unless a single call from Lua
 * into C does. */
enum route_outcome route_call(struct route_hook *hook, const struct route_request *rq,
                              bool head_only, const char *connection, struct pool **pool,
                              struct buffer *answer);

/* Closes the Lua state. The hook is empty afterwards (L == NULL). */
void route_hook_free(struct route_hook *hook);

#endif
