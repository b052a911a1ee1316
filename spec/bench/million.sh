#!/usr/bin/env bash
# spec/bench/million.sh: a long list of URLs through `luaretry run --urls`
# next to `curl --parallel --parallel-max 100` on the same list, against the
# local fault server (every URL answered 200 at once): wall time and peak
# resident memory of each (GNU time's "Maximum resident set size").
#
#   MILLION_URLS   how many URLs (default 1,000,000)
#   MILLION_BUDGET seconds one run may take (default 120): a run stopped by
#                  it is reported as such
#
# The script fails unless luaretry's summary line says every URL succeeded.
#
# luaretry reads the list as calls can begin and keeps only the calls in
# flight; curl reads its config (one `url =` line per URL) whole first.
# Both write the bodies to standard output (to /dev/null here) and run 100
# transfers at once.  The fault server is stopped by its PID on exit.
set -u
export LC_ALL=C
cd "$(dirname "$0")/../.." || exit 1

BIN=${LUARETRY_BIN:-build/luaretry}
N=${MILLION_URLS:-1000000}
BUDGET=${MILLION_BUDGET:-120}
[ -x "$BIN" ] || { echo "million: $BIN not built (make all)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "million: skipped: /usr/bin/time (Debian's time) is missing" >&2; exit 0; }
CURL=$(command -v curl || true)

. spec/bench/fault_server.sh
start_fault_server million spec/bench/batch_server.lua

awk -v base="$BASE" -v n="$N" 'BEGIN { for (i = 1; i <= n; i++) printf "%s/ok/%d\n", base, i }' \
  > "$tmp/urls"
sed 's/^/url = /' "$tmp/urls" > "$tmp/curl.conf"

# run NAME CMD...: wall time, peak RSS and exit status of CMD, bounded.
run() {
  local name=$1; shift
  /usr/bin/time -f '%e %M' -o "$tmp/$name.time" timeout -s KILL "$BUDGET" "$@" \
    >/dev/null 2>"$tmp/$name.err"
  echo $? > "$tmp/$name.rc"
}

# not -q: the batch's summary line ("N URLs: K succeeded, ...") is the count
run luaretry "$BIN" run policies/http.lua --parallel-max 100 --urls "$tmp/urls"
if [ -n "$CURL" ]; then run curl "$CURL" -s --parallel --parallel-max 100 -K "$tmp/curl.conf"; fi

# row NAME LABEL DONE: one line of the table
row() {
  local t rss rc
  read -r t rss < <(tail -n 1 "$tmp/$1.time")
  rc=$(cat "$tmp/$1.rc")
  local note=""
  [ "$rc" = 0 ] || note="  (exit $rc$([ "$rc" = 137 ] && echo ", stopped at the ${BUDGET} s budget"))"
  printf '%-48s %8.2f s %10.1f MiB%s\n' "$2" "$t" "$(awk -v k="$rss" 'BEGIN { print k / 1024 }')" "$note"
}

echo
echo "luaretry bench: million   $N URLs, 100 transfers at once, every answer 200, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo
printf '%-48s %10s %14s\n' "figure" "wall" "peak RSS"
row luaretry "luaretry run --parallel-max 100 --urls LIST"
ok=$(sed -n 's/^luaretry: [0-9]* URLs: \([0-9]*\) succeeded,.*/\1/p' "$tmp/luaretry.err")
[ -n "$CURL" ] && row curl "curl --parallel --parallel-max 100 -K LIST" || echo "curl: skipped: no curl command"
echo "luaretry: ${ok:-?} of $N URLs succeeded"
[ "${ok:-}" = "$N" ] || { echo "million: every answer is 200: all $N should have succeeded" >&2; exit 1; }
