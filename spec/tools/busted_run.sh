#!/bin/sh
# busted_run.sh BUILD SECONDS BUSTED-ARGS...: busted over spec/*_spec.lua,
# SPEC_JOBS files at a time (2 unless set), under one time limit.
#
# Why several at once: most specs wait on real time (a server's delay, a
# CLI's real backoff), and one busted over the whole of spec/ left the
# machine half idle.  Each file runs in a busted of its own, its output
# kept until it ends and then printed whole, so files never interleave.
# Files go in name order, or the reverse with SPEC_ORDER=reverse: `make
# test`'s sanitized half, so that its fleet specs (many processes and
# servers each) do not run beside the plain half's.
#
# A run that hangs fails here, naming each test still running then,
# instead of running until CI's own limit stops everything without a word.
# Each spec file's seconds are left in BUILD/spec-times.  BUSTED_LUA names
# the interpreter (lua5.4 unless set).
if [ "${1-}" = --one ]; then
  # one file (the last argument), for xargs: BUILD and BUSTED-ARGS before it
  build=$2
  shift 2
  for file; do :; done
  name=$(basename "$file" .lua)
  out=$build/spec-logs/$name.out
  LUARETRY_SPEC_NOW=$build/spec-now/$name LUARETRY_SPEC_TIMES=$build/spec-times \
    busted --lua="${BUSTED_LUA:-lua5.4}" --helper=spec/support/progress.lua "$@" > "$out" 2>&1
  rc=$?
  rm -f "$build/spec-now/$name"
  [ "$rc" = 0 ] || echo "$file" >> "$build/spec-failed"
  # printed whole, one file at a time (flock: another may be printing)
  flock "$build/spec-logs" sh -c 'printf "\n== %s (exit %s)\n" "$1" "$2"; cat "$3"' sh "$file" "$rc" "$out"
  exit 0 # xargs goes on; the failure is in spec-failed
fi

build=$1 limit=$2
shift 2
jobs=${SPEC_JOBS:-2}
times=$build/spec-times
mkdir -p "$build"
rm -rf "$build/spec-now" "$build/spec-logs" "$build/spec-failed"
mkdir -p "$build/spec-now" "$build/spec-logs"
order=$build/spec-order
if [ "${SPEC_ORDER:-}" = reverse ]; then ls spec/*_spec.lua | sort -r; else ls spec/*_spec.lua; fi > "$order"
rm -f "$times"
count=$(wc -l < "$order")
echo "busted: $count spec files, $jobs at a time"
timeout -k 30 "$limit" xargs -P "$jobs" -n 1 sh "$0" --one "$build" "$@" < "$order"
rc=$?
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  echo
  echo "busted did not end within $limit s; the tests running then:"
  cat "$build"/spec-now/* 2>/dev/null || echo "(none had started)"
  exit "$rc"
fi
if [ -s "$build/spec-failed" ]; then
  echo
  echo "busted: $(wc -l < "$build/spec-failed") of $count spec files failed:"
  sed 's/^/  /' "$build/spec-failed"
  exit 1
fi
[ "$rc" = 0 ] || { echo "busted: xargs exit $rc"; exit "$rc"; }
echo "busted: all $count spec files passed"
