#!/bin/sh
# c_tests.sh SECONDS PROGRAM...: the C tests, C_TEST_JOBS at a time (2
# unless set), each under its own limit of SECONDS.  Many wait on real
# time (a server's delay, a hedge's, Redis's), so one at a time left a core
# idle beside the CPU-bound ones (the guard model, the allocation failures).
# Each program's output is kept until it ends and then printed whole, so
# outputs never interleave; every program runs, and the failures are
# named together at the end.
if [ "${1-}" = --one ]; then
  # one program, for xargs: --one SECONDS LOGDIR PROGRAM
  limit=$2 logs=$3 t=$4
  log=$logs/$(basename "$t").log
  timeout -k 10 "$limit" "./$t" > "$log" 2>&1
  rc=$?
  [ "$rc" = 0 ] || echo "$t: failed (exit $rc)" >> "$log"
  [ "$rc" = 0 ] || echo "$t: failed (exit $rc)" >> "$logs/failed"
  flock "$logs" sh -c 'printf "== %s\n" "$1"; cat "$2"' sh "$t" "$log"
  exit 0 # xargs goes on; the failure is in LOGDIR/failed
fi

limit=$1
shift
logs=$(mktemp -d "${TMPDIR:-/tmp}/luaretry-c-tests.XXXXXX") || exit 1
trap 'rm -rf "$logs"' EXIT INT TERM
printf '%s\n' "$@" | xargs -P "${C_TEST_JOBS:-2}" -n 1 sh "$0" --one "$limit" "$logs" || exit 1
if [ -s "$logs/failed" ]; then
  echo
  echo "C tests: $(wc -l < "$logs/failed") of $# failed:"
  cat "$logs/failed"
  exit 1
fi
echo "C tests: all $# passed"
