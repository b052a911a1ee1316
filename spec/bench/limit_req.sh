#!/usr/bin/env bash
# spec/bench/limit_req.sh: pacing against a real rate limit.  A local
# nginx with `limit_req` at RATE requests a second (burst 0, 429 beyond) and
# N URLs fetched at --parallel-max P, each run beside the others in the same
# invocation: luaretry with no pacing, with a static `rate` (limit = RATE),
# and 0.9 RATE, with `rate = { adaptive = true }`, and `curl --parallel
# --retry 5`.  For
# each: the 429s nginx sent per success, the successes, and the wall time
# against the ideal N / RATE seconds.  Uses LUARETRY_BIN if set; nginx and
# its log live in a temporary folder, stopped by PID on exit.
#
#   spec/bench/limit_req.sh [N [RATE [P]]]     (default 1000 50 16)
set -u
export LC_ALL=C
cd "$(dirname "$0")/../.." || exit 1

N=${1:-1000}
RATE=${2:-50}
P=${3:-16}
BIN=${LUARETRY_BIN:-build/luaretry}
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$BIN" ] || { echo "limit_req: $BIN not built (make all)" >&2; exit 1; }
[ -x "$NGINX" ] || { echo "limit_req: nginx not installed (make deps)" >&2; exit 1; }

DIR=$(mktemp -d)
PIDFILE=$DIR/nginx.pid
cleanup() {
  [ -s "$PIDFILE" ] && kill "$(cat "$PIDFILE")" 2>/dev/null
  rm -rf "$DIR"
}
trap cleanup EXIT

. spec/bench/nginx_limit_req.sh
start_limit_req_nginx limit_req "$RATE"
mkdir -p "$DIR/out"

: > "$DIR/urls"
: > "$DIR/curl.cfg"
for i in $(seq "$N"); do
  echo "http://127.0.0.1:$PORT/u/$i" >> "$DIR/urls"
  printf 'url = "http://127.0.0.1:%s/u/%s"\noutput = "/dev/null"\n' "$PORT" "$i" >> "$DIR/curl.cfg"
done

# counts LABEL SECONDS: the access log's 200s and 429s since the last reset.
counts() {
  local ok tooMany
  ok=$(awk '$9 == 200' "$DIR/logs/access.log" | wc -l)
  tooMany=$(awk '$9 == 429' "$DIR/logs/access.log" | wc -l)
  awk -v l="$1" -v s="$2" -v ok="$ok" -v t="$tooMany" -v n="$N" -v r="$RATE" 'BEGIN {
    printf "%-34s %5d ok %6d 429s  %.3f 429s per success  %7.2f s  (%.2fx the ideal %.0f s)\n",
           l, ok, t, ok ? t / ok : 0, s, s / (n / r), n / r }'
  : > "$DIR/logs/access.log"
  kill -USR1 "$(cat "$PIDFILE")"   # reopen the log
  sleep 1.5                        # the limiter forgets the last run
}

run() {  # run LABEL CMD...
  local label=$1; shift
  local t0=$EPOCHREALTIME
  "$@" > /dev/null 2>&1
  local t1=$EPOCHREALTIME
  counts "$label" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')"
}

echo "limit_req: nginx at $RATE r/s (burst 0), $N URLs, $P at once"
ONLY=${LIMIT_REQ_ONLY:-}   # "adaptive": that run only (tuning); "defaults": see below
# http.lua as it was before its guards (issue 28): no budget, no rate
UNGUARDED=(--set budget=none --set rate=none)
if [ "$ONLY" = adaptive ]; then
  run "luaretry, rate = { adaptive = true }" "$BIN" run policies/http.lua --urls "$DIR/urls" \
    --parallel-max "$P" -s --output-dir "$DIR/out" --set rate.adaptive=true ${LIMIT_REQ_SET:-}
  exit 0
fi
# "defaults": the shipped http.lua with no guard setting, beside the same
# without its guards and, with BASELINE_BIN (a build of the tree before
# them), that build's http.lua (BASELINE_PARALLEL=--parallel for a build
# from before --parallel-max): the goal is at most 0.1 429s per success
# and 1.3x the ideal time (spec/bench/defaults.sh)
if [ "$ONLY" = defaults ]; then
  for k in $(seq "${ROUNDS:-1}"); do
    run "http.lua, shipped guards (no setting)" "$BIN" run policies/http.lua --urls "$DIR/urls" \
      --parallel-max "$P" -s --output-dir "$DIR/out"
    run "http.lua, --set budget=none rate=none" "$BIN" run policies/http.lua --urls "$DIR/urls" \
      --parallel-max "$P" -s --output-dir "$DIR/out" "${UNGUARDED[@]}"
    if [ -n "${BASELINE_BIN:-}" ]; then
      run "baseline build, its http.lua" "$BASELINE_BIN" run "${BASELINE_POLICY:-policies/http.lua}" \
        --urls "$DIR/urls" "${BASELINE_PARALLEL:---parallel-max}" "$P" -s --output-dir "$DIR/out"
    fi
  done
  exit 0
fi
run "luaretry, no pacing" "$BIN" run policies/http.lua --urls "$DIR/urls" --parallel-max "$P" -s \
  --output-dir "$DIR/out" "${UNGUARDED[@]}"
run "luaretry, rate = { limit = $RATE }" "$BIN" run policies/http.lua --urls "$DIR/urls" \
  --parallel-max "$P" -s --output-dir "$DIR/out" --set "rate.limit=$RATE" --set rate.adaptive=false
BELOW=$(awk -v r="$RATE" 'BEGIN { print r * 0.9 }')
run "luaretry, rate = { limit = $BELOW }" "$BIN" run policies/http.lua --urls "$DIR/urls" \
  --parallel-max "$P" -s --output-dir "$DIR/out" --set "rate.limit=$BELOW" --set rate.adaptive=false
run "luaretry, rate = { adaptive = true }" "$BIN" run policies/http.lua --urls "$DIR/urls" \
  --parallel-max "$P" -s --output-dir "$DIR/out"
run "curl --parallel --retry 5" curl -s --parallel --parallel-max "$P" --retry 5 -K "$DIR/curl.cfg"
