# lua_call.py CONFIG.lua: what happens without a protected call. Not part of
# rsp: this loads LuaJIT's C library with ctypes and runs the script with
# the unprotected lua_call instead of lua_pcall, as a careless C program would.
import ctypes, ctypes.util, sys

lua = ctypes.CDLL(ctypes.util.find_library("luajit-5.1") or "libluajit-5.1.so.2")
lua.luaL_newstate.restype = ctypes.c_void_p
L = ctypes.c_void_p(lua.luaL_newstate())
lua.luaL_openlibs(L)
if lua.luaL_loadfile(L, sys.argv[1].encode()) != 0:
    sys.exit("the script does not load")
print("calling the script with lua_call...", flush=True)
lua.lua_call(L, 0, 0)               # an error in the script: Lua panics, the process exits
print("back from lua_call")         # never printed when the script fails
