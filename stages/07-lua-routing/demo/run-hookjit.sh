#!/usr/bin/env bash
# Does a count hook see a hot Lua loop? demo/hookjit.c, compiled and run:
# a hundred million turns with LuaJIT's compiler on, then off.
. "$(dirname "$0")/../../../tools/demo-lib.sh" || exit 1
echo "\$ cc -O2 -Wall -o hookjit demo/hookjit.c \$(pkg-config --cflags --libs luajit)"
cc -O2 -Wall -o "$DEMO_TMP/hookjit" demo/hookjit.c $(pkg-config --cflags --libs luajit) || demo_fail "cc failed"
echo "\$ ./hookjit"
demo_run "$DEMO_TMP/hookjit"
