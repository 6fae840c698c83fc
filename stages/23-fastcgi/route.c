/* route.c -- calling route(req) safely, once per request.
 *
 * Three promises make it safe to call operator code in the middle of the
 * event loop:
 *
 *   1. No Lua error escapes. Everything that touches Lua per request runs
 *      inside lua_cpcall, so even an allocation failure while we build req
 *      turns into a 500 for that one request, not an abort.
 *   2. route cannot run for ever. It runs in a coroutine, and a count hook
 *      looks at the clock every ROUTE_CHECK_INSTRUCTIONS virtual-machine
 *      instructions. Past the time limit the hook yields the coroutine: a
 *      yield cannot be caught by pcall the way an error can, so route is
 *      left for good, and we simply drop that coroutine.
 *   3. The hook really runs. LuaJIT does not call hooks inside machine code
 *      it has compiled, so a hot `while true do end`, once compiled, would
 *      never be interrupted. We switch the compiler off for this Lua state:
 *      route runs in LuaJIT's interpreter, which checks the hook. That is
 *      the price of promise 2 (chapter 07 measures it).
 *
 * A Lua hook gets no pointer of ours, so the call under way is described by
 * the file-level `call_clock` below; rsp is single-threaded. */
#include "route.h"

#include "clock.h"
#include "log.h"
#include "route_answer.h"

#include <lauxlib.h>
#include <luajit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How often the hook looks at the clock: about a microsecond of work for
 * the interpreter, so checking costs little and the limit is kept closely. */
#define ROUTE_CHECK_INSTRUCTIONS 1000

static struct {
    bool running;        /* route is being called */
    bool expired;        /* ...and has run past its deadline */
    double deadline;     /* monotonic seconds */
} call_clock;

/* The count hook. Once the deadline has passed it fires on every
 * instruction and yields. Inside a call from C (a table.sort comparator, a
 * string.gsub callback) LuaJIT cannot yield and raises an error instead;
 * should the script catch that error, the very next instruction outside the
 * C call yields. */
static void time_limit_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    if (!call_clock.running)
        return;
    if (!call_clock.expired) {
        if (clock_now() < call_clock.deadline)
            return;
        call_clock.expired = true;
        lua_sethook(L, time_limit_hook, LUA_MASKCOUNT, 1);
    }
    lua_yield(L, 0);
}

/* A byte buffer of at least size bytes, kept between calls. Raises a Lua
 * error if out of memory (we are inside lua_cpcall). */
static char *scratch(lua_State *L, struct route_hook *hook, size_t size)
{
    if (size > hook->scratch_size) {
        char *bigger = realloc(hook->scratch, size);
        if (bigger == NULL)
            luaL_error(L, "out of memory");
        hook->scratch = bigger;
        hook->scratch_size = size;
    }
    return hook->scratch;
}

/* Sets field name of the table on top of the stack to buf[span]. */
static void set_span(lua_State *L, const char *name, const char *buf, struct http_span span)
{
    lua_pushlstring(L, buf + span.offset, span.length);
    lua_setfield(L, -2, name);
}

/* Pushes length bytes of text, lower-cased. */
static void push_lower(lua_State *L, struct route_hook *hook, const char *text, size_t length)
{
    char *out = scratch(L, hook, length + 1);

    for (size_t i = 0; i < length; i++)
        out[i] = (text[i] >= 'A' && text[i] <= 'Z') ? (char)(text[i] - 'A' + 'a') : text[i];
    lua_pushlstring(L, out, length);
}

/* req.headers: lower-case name -> value; repeated headers joined by ", ",
 * except Cookie, whose pairs are joined by "; " (RFC 6265, section 5.4). */
static void push_headers(lua_State *L, struct route_hook *hook, const struct route_request *rq)
{
    const struct request_view *req = rq->request;

    lua_createtable(L, 0, (int)req->header_count);
    for (size_t i = 0; i < req->header_count; i++) {
        const struct http_header *h = &req->headers[i];

        push_lower(L, hook, req->buf + h->name.offset, h->name.length);
        lua_pushvalue(L, -1);
        lua_rawget(L, -3);
        if (lua_isnil(L, -1)) {
            lua_pop(L, 1);
            lua_pushlstring(L, req->buf + h->value.offset, h->value.length);
        } else {
            if (http_span_is(req->buf, h->name, "cookie"))
                lua_pushliteral(L, "; ");
            else
                lua_pushliteral(L, ", ");
            lua_pushlstring(L, req->buf + h->value.offset, h->value.length);
            lua_concat(L, 3);
        }
        lua_rawset(L, -3);
    }
}

/* Pushes the table req for rq. req.path is the normal form of the path,
 * the very path the backend will receive (request.c). */
static void push_request(lua_State *L, struct route_hook *hook, const struct route_request *rq)
{
    const struct request_view *req = rq->request;
    const struct request_info *info = rq->info;
    const char *buf = req->buf;
    struct http_span host = info->host;

    lua_createtable(L, 0, 8);
    set_span(L, "method", buf, req->method);
    set_span(L, "target", buf, req->target);
    lua_pushstring(L, req->http2 ? "2.0" : req->minor_version == 1 ? "1.1" : "1.0");
    lua_setfield(L, -2, "version");
    lua_pushstring(L, rq->client_address);
    lua_setfield(L, -2, "client");
    if (info->path != NULL)
        lua_pushlstring(L, info->path, info->path_length);
    else
        lua_pushliteral(L, "*");
    lua_setfield(L, -2, "path");
    set_span(L, "query", buf, info->query); /* empty without a '?' */

    /* The name without a trailing dot: "example.com." is "example.com". */
    if (host.length > 0 && buf[host.offset + host.length - 1] == '.')
        host.length--;
    push_lower(L, hook, buf + host.offset, host.length);
    lua_setfield(L, -2, "host");

    push_headers(L, hook, rq);
    lua_setfield(L, -2, "headers");
}

/* Replaces the coroutine after route failed in it or was stopped: a dead
 * or suspended coroutine cannot be called again. */
static void new_thread(lua_State *L, struct route_hook *hook)
{
    lua_newthread(L);
    lua_rawseti(L, LUA_REGISTRYINDEX, hook->thread_ref);
}

/* Turns the value route returned (at index) into the decision. */
static void decide(lua_State *L, int index, struct route_hook *hook, bool head_only,
                   const char *connection, struct pool **pool, struct buffer *answer,
                   enum route_outcome *outcome)
{
    switch (lua_type(L, index)) {
    case LUA_TNIL:
        *outcome = ROUTE_DEFAULT;
        return;
    case LUA_TSTRING:
        lua_rawgeti(L, LUA_REGISTRYINDEX, hook->pools_ref);
        lua_pushvalue(L, index);
        lua_rawget(L, -2);
        if (!lua_islightuserdata(L, -1))
            luaL_error(L, "route returned \"%s\", which is not the name of a pool",
                       lua_tostring(L, index));
        *pool = lua_touserdata(L, -1);
        *outcome = ROUTE_POOL;
        return;
    case LUA_TTABLE:
        route_answer_write(L, index, head_only, connection, answer);
        *outcome = ROUTE_ANSWER;
        return;
    default:
        luaL_error(L, "route returned a %s; it must return nil, a pool name or a response table",
                   luaL_typename(L, index));
    }
}

/* What route_call hands to call_route through lua_cpcall. */
struct call {
    struct route_hook *hook;
    const struct route_request *rq;
    bool head_only;
    const char *connection;
    struct pool *pool;
    struct buffer *answer;
    enum route_outcome outcome;
};

/* Runs inside lua_cpcall: builds req, resumes route with it in the
 * coroutine, and decides. A failure of route itself is logged here, with
 * a traceback of the coroutine; a Lua error raised here (a bad return
 * value) is logged by route_call. */
static int call_route(lua_State *L)
{
    struct call *call = lua_touserdata(L, 1);
    struct route_hook *hook = call->hook;
    lua_State *thread;
    double started, took;
    char limit[128];
    int status;

    push_request(L, hook, call->rq);                     /* 2: req */
    lua_rawgeti(L, LUA_REGISTRYINDEX, hook->thread_ref); /* 3: the coroutine */
    thread = lua_tothread(L, 3);
    lua_rawgeti(L, LUA_REGISTRYINDEX, hook->function_ref);
    lua_xmove(L, thread, 1);
    lua_pushvalue(L, 2);
    lua_xmove(L, thread, 1);

    /* Setting the hook again restarts its count: every call gets the same
     * ROUTE_CHECK_INSTRUCTIONS before the first look at the clock. */
    lua_sethook(L, time_limit_hook, LUA_MASKCOUNT, ROUTE_CHECK_INSTRUCTIONS);
    call_clock.running = true;
    call_clock.expired = false;
    started = clock_now();
    call_clock.deadline = started + hook->time_limit;
    status = lua_resume(thread, 1);
    call_clock.running = false;
    took = clock_now() - started;

    if (status == 0) {
        /* The hook runs between instructions: one long call into C (a
         * backtracking string.match over a long path) cannot be stopped,
         * and every other client waited meanwhile. Say so. */
        if (took > hook->time_limit)
            log_msg("route: took %.3f s, over its time limit of %g s (a single long call "
                    "such as string.match cannot be interrupted)", took, hook->time_limit);
        /* Only the first result counts; the coroutine is ready for reuse. */
        lua_settop(thread, 1);
        lua_xmove(thread, L, 1);                         /* 4: the result */
        decide(L, 4, hook, call->head_only, call->connection, &call->pool, call->answer,
               &call->outcome);
        return 0;
    }
    snprintf(limit, sizeof limit, "route ran past its time limit (%g s; stopped after %.3f s)",
             hook->time_limit, took);
    if (status == LUA_YIELD && call_clock.expired) {
        lua_pushstring(L, limit);
    } else if (status == LUA_YIELD) {
        lua_pushliteral(L, "route yielded (it must return instead)");
    } else {
        lua_xmove(thread, L, 1);
        if (!lua_isstring(L, -1))
            lua_pushfstring(L, "route raised an error object of type %s", luaL_typename(L, -1));
        if (call_clock.expired) /* the hook's yield, refused inside a call from C */
            lua_pushfstring(L, "%s: %s", limit, lua_tostring(L, -1));
    }
    luaL_traceback(L, thread, lua_tostring(L, -1), 0);
    log_msg("route: %s", lua_tostring(L, -1));
    new_thread(L, hook);
    call->outcome = ROUTE_FAILED;
    return 0;
}

enum route_outcome route_call(struct route_hook *hook, const struct route_request *rq,
                              bool head_only, const char *connection, struct pool **pool,
                              struct buffer *answer)
{
    struct call call = { hook, rq, head_only, connection, NULL, answer, ROUTE_FAILED };

    if (lua_cpcall(hook->L, call_route, &call) != 0) {
        const char *message = lua_tostring(hook->L, -1);
        log_msg("route: %s", message != NULL ? message : "(an error without a message)");
        lua_pop(hook->L, 1);
        call.outcome = ROUTE_FAILED;
    }
    if (call.outcome != ROUTE_ANSWER)
        buffer_free(answer); /* a half-written answer, if any */
    *pool = call.pool;
    return call.outcome;
}

/* What route_hook_init hands to setup through lua_cpcall. */
struct setup_args {
    struct route_hook *hook;
    struct named_pool *pools;
    size_t count;
};

/* Runs inside lua_cpcall: keeps route, the pool names and a coroutine in
 * the registry, where a request finds them by number, not by name. */
static int setup(lua_State *L)
{
    struct setup_args *args = lua_touserdata(L, 1);
    struct route_hook *hook = args->hook;

    lua_pushliteral(L, "route");
    lua_rawget(L, LUA_GLOBALSINDEX);
    hook->function_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_createtable(L, 0, (int)args->count);
    for (size_t i = 0; i < args->count; i++) {
        lua_pushlightuserdata(L, &args->pools[i].pool);
        lua_setfield(L, -2, args->pools[i].name);
    }
    hook->pools_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_newthread(L);
    hook->thread_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 0;
}

int route_hook_init(struct route_hook *hook, lua_State *L, struct named_pool *pools, size_t count,
                    double time_limit)
{
    struct setup_args args = { hook, pools, count };

    memset(hook, 0, sizeof *hook);
    hook->L = L;
    hook->time_limit = time_limit;
    if (lua_cpcall(L, setup, &args) != 0) {
        route_hook_free(hook);
        return -1;
    }
    /* Promise 3: no compiled code, so the hook always runs. The config may
     * have switched the compiler on again while it ran: switch it off and
     * throw away whatever it compiled. */
    luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_FLUSH);
    luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
    lua_sethook(L, time_limit_hook, LUA_MASKCOUNT, ROUTE_CHECK_INSTRUCTIONS);
    return 0;
}

void route_hook_free(struct route_hook *hook)
{
    if (hook->L != NULL)
        lua_close(hook->L);
    free(hook->scratch);
    memset(hook, 0, sizeof *hook);
}
