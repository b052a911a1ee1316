#!/bin/sh
# busted_run.sh BUILD SECONDS BUSTED-ARGS...: busted over spec/ under a
# time limit.  A run that hangs fails here, naming the test that never
# ended, instead of running until CI's own limit stops everything without
# a word.  Each spec file's seconds are left in BUILD/spec-times.
# BUSTED_LUA names the interpreter (lua5.4 unless set).
build=$1 limit=$2
shift 2
now=$build/spec-now times=$build/spec-times
mkdir -p "$build"
rm -f "$now" "$times"
LUARETRY_SPEC_NOW=$now LUARETRY_SPEC_TIMES=$times \
  timeout -k 30 "$limit" busted --lua="${BUSTED_LUA:-lua5.4}" --helper=spec/support/progress.lua "$@"
rc=$?
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  echo
  echo "busted did not end within $limit s; the test running then:"
  cat "$now" 2>/dev/null || echo "(none had started)"
fi
exit "$rc"
