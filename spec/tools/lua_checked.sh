#!/bin/sh
# lua_checked.sh LUA_SRC [SPEC...]: the sanitized specs (all of spec/ by
# default) in a lua_host whose liblua is built from LUA_SRC with
# AddressSanitizer, Lua's internal assertions and its API checks.
#
# Why: liblua5.4 from Debian is not instrumented, so a write it makes
# outside its own blocks, or a C function's misuse of the API (a push past
# the stack's room, a luaL_Buffer with something left above it), is seen
# by `make test` only later, if ever: as an allocator CHECK in some other
# free.  This build stops at the misuse itself.  It found the unknown
# option's luaL_Buffer (core/policy/load.c) that `make test` never showed.
#
# LUA_SRC: a Lua 5.4.4 source tree (Debian's version: `apt-get source
# lua5.4`, or a checkout of github.com/lua/lua at v5.4.4), the files
# lapi.c... at its top or in src/.  Needs build/asan (make test-build).
# Only lua_host (busted and the module it loads) uses the checked liblua:
# the programs the specs start use Debian's.  Not part of `make test`:
# the source is not a Debian package here, and the run takes about 15 min.
set -eu
src=${1:?usage: lua_checked.sh LUA_SRC [SPEC...]}
shift
[ -f "$src/lapi.c" ] || src=$src/src
[ -f "$src/lapi.c" ] || { echo "lua_checked.sh: no lapi.c in $1 or $1/src" >&2; exit 2; }
out=build/lua-checked
mkdir -p "$out/src"
cp "$src"/*.c "$src"/*.h "$out/src/"
# Debian's luaconf.h: its module paths (busted lives in /usr/share/lua/5.4)
cp /usr/include/lua5.4/luaconf.h "/usr/include/$(cc -print-multiarch)/lua5.4-deb-multiarch.h" "$out/src/"
printf 'LUA_5.4 { global: *; };\n' > "$out/lua.map" # Debian's symbol version
core="lapi lcode lctype ldebug ldo ldump lfunc lgc llex lmem lobject lopcodes lparser lstate
  lstring ltable ltm lundump lvm lzio lauxlib lbaselib lcorolib ldblib liolib lmathlib loadlib
  loslib lstrlib ltablib lutf8lib linit"
files=$(for f in $core; do printf '%s/src/%s.c ' "$out" "$f"; done)
# shellcheck disable=SC2086 # the file list is split on purpose
cc -shared -fPIC -g -O1 -fno-omit-frame-pointer -fsanitize=address -DLUA_COMPAT_5_3 \
  -DLUA_USE_LINUX -DLUAI_ASSERT -DLUA_USE_APICHECK $files -Wl,-soname,liblua5.4.so.0 \
  -Wl,--version-script="$out/lua.map" -o "$out/liblua5.4.so.0" -ldl -lm
lib=$(cd "$out" && pwd)
cc -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -std=c11 -D_GNU_SOURCE \
  -I/usr/include/lua5.4 spec/c/lua_host.c -o "$out/lua_host" -L"$lib" -Wl,-rpath,"$lib" \
  -Wl,--disable-new-dtags -l:liblua5.4.so.0
[ $# -gt 0 ] || set -- spec
ASAN_OPTIONS=detect_leaks=0 LUARETRY_BIN=build/asan/luaretry FAULTS_SERVE=build/asan/faults_serve \
  FAULTS_SMOKE=build/asan/faults_smoke RELAY=build/asan/relay LUARETRY_SPEC_NOW=$out/now \
  busted --lua="$out/lua_host" --helper=spec/support/progress.lua --cpath='build/asan/?.so' \
  --output=utfTerminal "$@"
