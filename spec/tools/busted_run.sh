#!/bin/sh
# busted_run.sh BUILD SECONDS BUSTED-ARGS...: busted over spec/*_spec.lua,
# under one time limit: SPEC_JOBS files at a time (2 unless set), or with
# SPEC_JOBS=1 one busted over them all.
#
# Why several at once: most specs wait on real time (a server's delay, a
# CLI's real backoff), and one busted left the machine half idle: `make
# test` took 893 to 1,023 s with two at a time, 1,127 to 1,263 s with one
# (and 780 to 804 s with two, once the specs' helpers started fewer
# programs).  Three in the sanitized half made it 752 to 762 s; at that
# load two runs of five failed on a fleet spec's exact counts, each a bug
# found and fixed (a spec's 1 s round trip to Redis; a draw the budget's
# leases dropped, budget_lease.c), so the sanitized half runs three.
# (Two became the default once the fleet's reserve flake that this load
# brought out was found: the reserve's question went in a script of its
# own when the worker's sync came during the wait, and the fake Redis
# never answered that script.)  Each file runs in a busted of its own,
# its output kept until it ends and then printed whole, so files never
# interleave.
# Files go in name order, or the reverse with SPEC_ORDER=reverse (so that
# one half's fleet specs, many processes and servers each, need not run
# beside the other's).
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

# A failed file's log from its first failure on, lines and width
# bounded; a file that failed with no failure named (a crash) its end.
digest() {
  if grep -q '^\(Failure\|Error\) → ' "$1"; then
    sed -n '/^\(Failure\|Error\) → /,$p' "$1"
  elif [ -s "$1" ]; then
    tail -n 15 "$1"
  else
    echo "(it printed nothing)"
  fi | cut -c1-240 | head -n 40
}

if [ "${1-}" = --digests ]; then
  # after both halves: what each one's failed files said (make test)
  shift
  for build; do cat "$build/spec-digest" 2>/dev/null; done
  exit 0
fi

build=$1 limit=$2
shift 2
jobs=${SPEC_JOBS:-2}
times=$build/spec-times
mkdir -p "$build"
rm -rf "$build/spec-now" "$build/spec-logs" "$build/spec-failed" "$build/spec-digest"
mkdir -p "$build/spec-now" "$build/spec-logs"
order=$build/spec-order
if [ "${SPEC_ORDER:-}" = reverse ]; then ls spec/*_spec.lua | sort -r; else ls spec/*_spec.lua; fi > "$order"
rm -f "$times"
count=$(wc -l < "$order")
if [ "$jobs" = 1 ]; then
  # one busted over spec/, as before SPEC_JOBS; over the files in their
  # order when SPEC_ORDER asks for another than busted's (name order)
  if [ "${SPEC_ORDER:-}" = reverse ]; then
    # shellcheck disable=SC2046 # spec file names have no spaces
    set -- "$@" $(cat "$order")
  else
    set -- "$@" spec
  fi
  LUARETRY_SPEC_NOW=$build/spec-now/busted LUARETRY_SPEC_TIMES=$times \
    timeout -k 30 "$limit" busted --lua="${BUSTED_LUA:-lua5.4}" --helper=spec/support/progress.lua \
    "$@"
  rc=$?
else
  echo "busted: $count spec files, $jobs at a time"
  timeout -k 30 "$limit" xargs -P "$jobs" -n 1 sh "$0" --one "$build" "$@" < "$order"
  rc=$?
fi
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  echo
  echo "busted did not end within $limit s; the tests running then:"
  cat "$build"/spec-now/* 2>/dev/null || echo "(none had started)"
  exit "$rc"
fi
[ "$jobs" = 1 ] && exit "$rc" # busted said what failed
if [ -s "$build/spec-failed" ]; then
  # the list, then each file's failures again (CI keeps the output's two
  # ends, not the middle where the file was printed), in spec-digest too
  # for make test to print once both halves have ended
  {
    echo
    echo "busted: $(wc -l < "$build/spec-failed") of $count spec files failed ($build):"
    sed 's/^/  /' "$build/spec-failed"
    while read -r file; do
      echo "-- $file, its failures:"
      digest "$build/spec-logs/$(basename "$file" .lua).out"
    done < "$build/spec-failed"
  } > "$build/spec-digest"
  cat "$build/spec-digest"
  exit 1
fi
[ "$rc" = 0 ] || { echo "busted: xargs exit $rc"; exit "$rc"; }
echo "busted: all $count spec files passed"
