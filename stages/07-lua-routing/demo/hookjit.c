/* hookjit.c: does a count hook see a hot Lua loop, with and without the JIT? */
#include <lauxlib.h>
#include <lua.h>
#include <luajit.h>
#include <lualib.h>
#include <stdio.h>

static long hook_calls;

static void count_hook(lua_State *L, lua_Debug *ar)
{
    (void)L;
    (void)ar;
    hook_calls++;
}

static void run(int jit)
{
    lua_State *L = luaL_newstate();

    luaL_openlibs(L);
    luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | (jit ? LUAJIT_MODE_ON : LUAJIT_MODE_OFF));
    lua_sethook(L, count_hook, LUA_MASKCOUNT, 10);  /* every 10 instructions */
    hook_calls = 0;
    luaL_loadstring(L, "local n = 0 for i = 1, 1e8 do n = n + i end");
    lua_pcall(L, 0, 0, 0);
    printf("JIT %-3s: 100 million turns, the hook ran %ld times\n", jit ? "on" : "off", hook_calls);
    lua_close(L);
}

int main(void)
{
    run(1);
    run(0);
    return 0;
}
