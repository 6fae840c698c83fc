/* fuzz_config.c -- libFuzzer harness for loading the Lua config (config.c,
 * router.c) from arbitrary Lua source.
 *
 * A config is a program, and an arbitrary program could exit the process,
 * loop forever, eat all memory, write files or look names up in the DNS.
 * The harness makes that safe without changing rsp, by interposing on
 * functions config.c calls (a definition in the executable wins over the
 * shared library's, for config.o's calls as for everyone's; the real ones
 * are found with dlsym(RTLD_NEXT)):
 *
 *  - luaL_newstate: the state gets a hook that raises an error after
 *    INSTRUCTION_BUDGET instructions (config.c turns the JIT off, so the
 *    count hook sees every instruction), and an allocator that refuses to
 *    let Lua's heap grow past MEMORY_BUDGET bytes. Lua reports both as
 *    ordinary errors, which config_load turns into its one-line message.
 *  - the luaopen_* functions config.c opens the libraries with: io, os,
 *    package and debug become empty tables (no exit, no files, no C
 *    calls); base loses dofile, loadfile, print and newproxy, string
 *    loses rep.
 *    (Until this harness hooked these, it hooked luaL_openlibs, which
 *    config.c stopped calling in chapter 07: the budgets were off, and a
 *    long loop hung the fuzzer at last.)
 *  - lua_close: puts LuaJIT's own allocator back first (else LuaJIT does
 *    not release its arena, and every input would leak one).
 *  - getaddrinfo: only numeric addresses and "localhost" are resolved (by
 *    libc, without the DNS); any other name fails like an unknown host.
 *  - The input is written to a memfd and loaded as /proc/self/fd/N.
 *
 * What stays different from rsp: configs that use os.getenv, io, require,
 * newproxy or string.rep fail here with an error. Everything config.c itself does
 * runs as in rsp.
 *
 * Checked: config_load returns 0 or -1; on -1 it printed a message
 * beginning "rsp: " and the path, and left nothing allocated; on 0 the
 * config is sane (a port of 1..65535, limits in range, every pool with 1 to
 * POOL_MAX_BACKENDS resolved backends, sites named in lower case, each
 * routed to itself by router_route), and config_free releases everything
 * (LeakSanitizer checks after each input). With a route function, route is
 * called for three fixed requests (each with a Connection line, varied by
 * the input's length): whatever it does, route_call returns one
 * of its outcomes, a pool only from `pools`, and an answer only as one
 * complete, well-formed response (see check_answer); loops are cut by
 * route's own time limit, set to 5 ms here. */
#define _GNU_SOURCE
#include "config.h"
#include "http.h"
#include "request.h"
#include "response.h"
#include "route.h"
#include "router.h"

#include <dlfcn.h>
#include <lauxlib.h>
#include <lua.h>
#include <luajit.h>
#include <lualib.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#define INSTRUCTION_BUDGET 200000
#define MEMORY_BUDGET (64 << 20)

static FILE *report;       /* the real stderr, for our own messages */
static char *messages;     /* what config.c printed for this input */
static size_t messages_length;
static int input_fd = -1;
static char input_path[64];
static long instructions;  /* used up, in units of HOOK_EVERY */
static long long lua_bytes; /* Lua heap growth since the sandbox was set up */
static lua_Alloc real_alloc;
static void *real_alloc_ud;

#define HOOK_EVERY 1000

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(report, "fuzz_config: property violated: %s\n  ", #cond); \
            fprintf(report, __VA_ARGS__);                                    \
            fprintf(report, "\nconfig.c printed: %.*s\n", (int)messages_length, \
                    messages ? messages : "");                               \
            abort();                                                         \
        }                                                                    \
    } while (0)

/* -- the sandbox ------------------------------------------------------------ */

static void count_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    if (++instructions > INSTRUCTION_BUDGET / HOOK_EVERY)
        luaL_error(L, "fuzz: instruction budget exhausted");
}

static void *budget_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    (void)ud;
    long long old = ptr != NULL ? (long long)osize : 0;

    if ((long long)nsize > old && lua_bytes + ((long long)nsize - old) > MEMORY_BUDGET)
        return NULL; /* Lua raises "not enough memory" */
    void *p = real_alloc(real_alloc_ud, ptr, osize, nsize);
    if (p != NULL || nsize == 0)
        lua_bytes += (long long)nsize - old;
    return p;
}

/* The real function `name` of the shared library, which a definition of
 * the same name in this executable hides from config.o. */
static void *real_function(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);

    CHECK(f != NULL, "no %s to call", name);
    return f;
}

/* Every state config.c makes starts inside the budgets: its allocator
 * counts, and a count hook (the JIT is off in config.c, so the hook sees
 * every instruction) stops a script after INSTRUCTION_BUDGET. */
lua_State *luaL_newstate(void)
{
    static lua_State *(*real)(void);
    lua_State *L;

    if (real == NULL)
        real = (lua_State *(*)(void))real_function("luaL_newstate");
    L = real();
    if (L == NULL)
        return NULL;
    luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
    instructions = 0;
    lua_sethook(L, count_hook, LUA_MASKCOUNT, HOOK_EVERY);
    real_alloc = lua_getallocf(L, &real_alloc_ud);
    lua_bytes = 0;
    lua_setallocf(L, budget_alloc, NULL);
    return L;
}

/* The libraries config.c opens, one by one (config.c's open_libraries).
 * Those that reach outside the process (io, os, package, debug) become
 * empty tables under their names, so that what config.c does with them
 * (clearing debug.sethook, package.loadlib) works and a script that calls
 * them fails with an error; base loses dofile, loadfile and print, and
 * newproxy (userdata whose __gc raises an error: LuaJIT's lua_close runs
 * the finalizers again from the top after each error, so 100,000 of them
 * take minutes and gigabytes, outside any budget), and string loses rep
 * (a string of gigabytes in one call). */
static int empty_library(lua_State *L, const char *name)
{
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_GLOBALSINDEX, name);
    return 1;
}

int luaopen_io(lua_State *L) { return empty_library(L, LUA_IOLIBNAME); }
int luaopen_os(lua_State *L) { return empty_library(L, LUA_OSLIBNAME); }
int luaopen_package(lua_State *L) { return empty_library(L, LUA_LOADLIBNAME); }
int luaopen_debug(lua_State *L) { return empty_library(L, LUA_DBLIBNAME); }

int luaopen_base(lua_State *L)
{
    static lua_CFunction real;
    static const char *const dropped[] = { "dofile", "loadfile", "print", "newproxy" };
    int n;

    if (real == NULL)
        real = (lua_CFunction)real_function("luaopen_base");
    n = real(L);
    for (size_t i = 0; i < sizeof dropped / sizeof dropped[0]; i++) {
        lua_pushnil(L);
        lua_setfield(L, LUA_GLOBALSINDEX, dropped[i]);
    }
    return n;
}

int luaopen_string(lua_State *L)
{
    static lua_CFunction real;
    int n;

    if (real == NULL)
        real = (lua_CFunction)real_function("luaopen_string");
    n = real(L);
    lua_getfield(L, LUA_GLOBALSINDEX, LUA_STRLIBNAME);
    lua_pushnil(L);
    lua_setfield(L, -2, "rep");
    lua_pop(L, 1);
    return n;
}

/* LuaJIT's lua_close releases its allocator's arena only if the state
 * still uses that allocator: put it back first. */
void lua_close(lua_State *L)
{
    static void (*real)(lua_State *);

    if (real == NULL)
        real = (void (*)(lua_State *))dlsym(RTLD_NEXT, "lua_close");
    CHECK(real != NULL, "no lua_close to call");
    if (lua_getallocf(L, NULL) == budget_alloc)
        lua_setallocf(L, real_alloc, real_alloc_ud);
    real(L);
}

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res)
{
    static int (*real)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
    struct addrinfo h = hints != NULL ? *hints : (struct addrinfo){ 0 };

    if (real == NULL)
        real = (int (*)(const char *, const char *, const struct addrinfo *, struct addrinfo **))
            dlsym(RTLD_NEXT, "getaddrinfo");
    CHECK(real != NULL, "no getaddrinfo to call");
    if (node != NULL && strcmp(node, "localhost") == 0)
        node = "127.0.0.1";
    h.ai_flags |= AI_NUMERICHOST;
    return real(node, service, &h, res);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    report = stderr;
    input_fd = memfd_create("rsp-fuzz-config.lua", 0);
    if (input_fd == -1) {
        perror("fuzz_config: memfd_create");
        exit(1);
    }
    snprintf(input_path, sizeof input_path, "/proc/self/fd/%d", input_fd);
    return 0;
}

/* -- the checks --------------------------------------------------------------- */

static void check_pool(const struct pool *pool, const char *what)
{
    CHECK(pool->count >= 1 && pool->count <= POOL_MAX_BACKENDS && pool->backends != NULL,
          "%s: %zu backends", what, pool->count);
    CHECK(pool->balance == BALANCE_ROUND_ROBIN || pool->balance == BALANCE_LEAST_CONN,
          "%s: balance %d", what, pool->balance);
    CHECK(pool->down_time >= 0.001 && pool->down_time <= 86400, "%s: down_time %g", what,
          pool->down_time);
    for (size_t i = 0; i < pool->count; i++) {
        const struct backend *b = pool->backends[i];
        CHECK(b->name != NULL && b->addresses != NULL, "%s: backend %zu not resolved", what, i);
        CHECK(strchr(b->name, ':') != NULL, "%s: backend name \"%s\"", what, b->name);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(pool->backends[j]->name, b->name) != 0, "%s: \"%s\" twice", what, b->name);
    }
}

/* The index of pool among the config's named pools, or -1. */
static int named_pool_index(const struct config *config, const struct pool *pool)
{
    for (size_t i = 0; i < config->pool_count; i++)
        if (pool == &config->pools[i].pool)
            return (int)i;
    return -1;
}

static void check_config(struct config *config)
{
    char *end;
    long port = strtol(config->listen_port, &end, 10);

    CHECK(*end == '\0' && port >= 1 && port <= 65535 && config->listen_port[0] != '0',
          "listen port \"%s\"", config->listen_port);
    CHECK(config->limits.max_line >= 256 && config->limits.max_line <= config->limits.max_head &&
              config->limits.max_head <= 1048576,
          "limits %zu, %zu", config->limits.max_line, config->limits.max_head);
    CHECK(config->router.fallback != NULL || config->router.count > 0 || config->route.L != NULL,
          "no site and no route");
    for (size_t i = 0; i < config->pool_count; i++) {
        const char *name = config->pools[i].name;
        CHECK(name != NULL && strlen(name) >= 1 && strlen(name) <= 64, "pool %zu's name", i);
        CHECK(i == 0 || strcmp(config->pools[i - 1].name, name) < 0, "pools not sorted by name");
        check_pool(&config->pools[i].pool, name);
    }
    CHECK(config->route.L == NULL ||
              (config->route_time_limit >= 0.001 && config->route_time_limit <= 10),
          "route_time_limit %g", config->route_time_limit);
    if (config->router.fallback != NULL) {
        CHECK(config->router.fallback == &config->default_pool, "the default site");
        check_pool(&config->default_pool, "default site");
    }
    for (size_t i = 0; i < config->router.count; i++) {
        struct site *site = &config->router.sites[i];
        const char *name = site->name;
        size_t length = strlen(name);

        CHECK(length > 0 && length < 256, "site %zu name length %zu", i, length);
        for (size_t k = 0; k < length; k++)
            CHECK(!(name[k] >= 'A' && name[k] <= 'Z'), "site name \"%s\" not in lower case", name);
        CHECK(!site->wildcard || name[0] == '.', "wildcard site \"%s\"", name);
        check_pool(site->pool, name);
        CHECK(site->pool == &site->own || named_pool_index(config, site->pool) >= 0,
              "site \"%s\": a pool that is neither its own nor a named one", name);
        for (size_t j = 0; j < i; j++)
            CHECK(config->router.sites[j].wildcard != site->wildcard ||
                      strcmp(config->router.sites[j].name, name) != 0,
                  "site \"%s\" twice", name);
        if (!site->wildcard) {
            /* An exact name is routed to its own site, whatever the case. */
            char upper[256];
            for (size_t k = 0; k <= length; k++)
                upper[k] = (name[k] >= 'a' && name[k] <= 'z') ? (char)(name[k] - 32) : name[k];
            CHECK(router_route(&config->router, name, length) == site->pool, "route \"%s\"", name);
            CHECK(router_route(&config->router, upper, length) == site->pool, "route \"%s\"", upper);
        } else {
            /* "x" + ".example.com" goes to the wildcard site, unless an
             * exact site or a longer wildcard claims it. */
            char host[260];
            snprintf(host, sizeof host, "x%s", name);
            CHECK(router_route(&config->router, host, strlen(host)) != NULL, "route \"%s\"", host);
        }
    }
}

/* -- route ---------------------------------------------------------------- */

/* The requests route is asked about. */
static const char *const requests[] = {
    ("GET /a/../b/%61?x=1&y HTTP/1.1\r\nHost: WWW.Example.COM.:8080\r\nX-A: 1\r\nx-a: 2\r\n"
     "User-Agent: fuzz\r\n\r\n"),
    "HEAD / HTTP/1.0\r\n\r\n",
    "POST http://h.example/p HTTP/1.1\r\nHost: h.example\r\nContent-Length: 3\r\n\r\nabc",
};

/* Checks that answer[0..length) is one complete, well-formed response: a
 * status line with a status from 200 to 599, header lines of a token, a
 * colon and a value without control characters, exactly the Connection
 * line asked for (none for ""), a
 * Content-Length that matches the body (none for 204 and 304), and for a
 * HEAD request no body at all. */
static void check_answer(const char *answer, size_t length, bool head_only, const char *connection)
{
    const char *end = answer + length, *line = answer, *eol;
    long content_length = -1;
    size_t connections = 0, connection_length = strlen(connection);
    bool connection_seen = false;
    int status;

    CHECK(length > 17 && memcmp(answer, "HTTP/1.1 ", 9) == 0, "status line: %.*s", (int)length, answer);
    status = atoi(answer + 9);
    CHECK(status >= 200 && status <= 599, "status %d", status);
    eol = memmem(line, (size_t)(end - line), "\r\n", 2);
    CHECK(eol != NULL, "no end to the status line");
    for (line = eol + 2; line < end; line = eol + 2) {
        const char *colon;

        eol = memmem(line, (size_t)(end - line), "\r\n", 2);
        CHECK(eol != NULL, "a header line without CRLF");
        if (eol == line)
            break; /* the empty line */
        colon = memchr(line, ':', (size_t)(eol - line));
        CHECK(colon != NULL && colon > line && colon[1] == ' ', "header line \"%.*s\"",
              (int)(eol - line), line);
        for (const char *c = line; c < colon; c++)
            CHECK(*c > 32 && *c < 127 && strchr("\"(),/:;<=>?@[\\]{}", *c) == NULL,
                  "header name \"%.*s\"", (int)(colon - line), line);
        for (const char *c = colon + 2; c < eol; c++)
            CHECK(((unsigned char)*c >= 32 || *c == '\t') && *c != 127, "a control character in \"%.*s\"",
                  (int)(eol - line), line);
        if (colon - line == 14 && strncasecmp(line, "Content-Length", 14) == 0) {
            CHECK(content_length == -1, "two Content-Length headers");
            content_length = strtol(colon + 2, NULL, 10);
        }
        if (colon - line == 10 && strncasecmp(line, "Connection", 10) == 0) {
            connections++;
            connection_seen = (size_t)(eol + 2 - line) == connection_length &&
                              memcmp(line, connection, connection_length) == 0;
        }
    }
    CHECK(line < end && eol == line, "no empty line after the headers");
    size_t body = (size_t)(end - (eol + 2));
    CHECK(connection_length == 0 ? connections == 0 : connections == 1 && connection_seen,
          "%zu Connection headers, not just \"%s\"", connections, connection);
    if (status == 204 || status == 304) {
        CHECK(content_length == -1 && body == 0, "a %d with a body or a length", status);
    } else {
        CHECK(content_length >= 0, "no Content-Length");
        CHECK(head_only ? body == 0 : body == (size_t)content_length,
              "Content-Length %ld, body %zu bytes, HEAD %d", content_length, body, head_only);
    }
}

static void check_route(struct config *config, size_t variant)
{
    /* How the client connection goes on, as exchange.c says it: varied by
     * the input's length, so that each request meets each line. */
    static const enum response_connection modes[] = { CONNECTION_PERSIST, CONNECTION_KEEP_ALIVE,
                                                      CONNECTION_CLOSE };
    static const struct http_limits limits = { 8192, 32768 };

    /* A fuzzed route_time_limit may be 10 s; loops are cut sooner here. */
    config->route.time_limit = 0.005;
    for (size_t i = 0; i < sizeof requests / sizeof requests[0]; i++) {
        struct http_request req;
        struct request_info info;
        const char *buf = requests[i];
        struct request_view view; /* made once the head is parsed */
        struct route_request rq = { &view, &info, "192.0.2.1" };
        struct buffer answer = BUFFER_INIT;
        struct pool *pool = (struct pool *)1;
        bool head_only = strncmp(buf, "HEAD", 4) == 0;
        const char *connection = response_connection_line(modes[(i + variant) % 3]);

        http_request_init(&req);
        CHECK(http_parse_request(&req, buf, strlen(buf), &limits) == HTTP_DONE, "request %zu", i);
        view = request_view_of(&req, buf);
        CHECK(request_check(&view, &config->policy, &info) == 0, "request %zu", i);
        switch (route_call(&config->route, &rq, head_only, connection, &pool, &answer)) {
        case ROUTE_DEFAULT:
        case ROUTE_FAILED:
            CHECK(buffer_length(&answer) == 0, "an answer without ROUTE_ANSWER");
            break;
        case ROUTE_POOL:
            CHECK(named_pool_index(config, pool) >= 0, "ROUTE_POOL with a pool not named in 'pools'");
            CHECK(buffer_length(&answer) == 0, "an answer with ROUTE_POOL");
            break;
        case ROUTE_ANSWER:
            check_answer(answer.data + answer.start, buffer_length(&answer), head_only, connection);
            break;
        default:
            CHECK(false, "route_call returned something else");
        }
        buffer_free(&answer);
        request_info_free(&info);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    struct config config;
    FILE *out;

    if (ftruncate(input_fd, 0) != 0 || pwrite(input_fd, data, len, 0) != (ssize_t)len) {
        perror("fuzz_config: writing the input");
        abort();
    }
    out = open_memstream(&messages, &messages_length);
    CHECK(out != NULL, "open_memstream failed");
    stderr = out; /* config.c's messages; ours go to `report` */
    int rc = config_load(input_path, &config);
    stderr = report;
    fclose(out);
    if (getenv("FUZZ_CONFIG_VERBOSE") != NULL)
        fprintf(report, "config_load: %d; printed: %.*s", rc, (int)messages_length, messages);

    CHECK(rc == 0 || rc == -1, "config_load returned %d", rc);
    if (rc == -1) {
        char prefix[80];
        snprintf(prefix, sizeof prefix, "rsp: %s", input_path);
        CHECK(messages_length > strlen(prefix) && strncmp(messages, prefix, strlen(prefix)) == 0,
              "a failed load must print \"%s...\"", prefix);
    } else {
        check_config(&config);
        if (config.route.L != NULL) {
            free(messages);
            messages = NULL;
            out = open_memstream(&messages, &messages_length);
            CHECK(out != NULL, "open_memstream failed");
            stderr = out; /* route's log lines */
            check_route(&config, len);
            stderr = report;
            fclose(out);
        }
        config_free(&config);
    }
    free(messages);
    messages = NULL;
    messages_length = 0;
    return 0;
}
