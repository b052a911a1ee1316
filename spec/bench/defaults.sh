#!/usr/bin/env bash
# spec/bench/defaults.sh: the shipped http.lua's guards (issue 28: a budget
# with its floor, an adaptive rate), with no guard setting, beside the same
# policy without them (--set budget=none --set rate=none: http.lua as it
# was) and, with BASELINE_BIN (and BASELINE_POLICY, its http.lua;
# BASELINE_PARALLEL=--parallel for a build from before --parallel-max), a
# build of the tree from before them, all in the same run:
#   (a) an outage: OUTAGE_URLS (default 1000) URLs at --parallel-max 50 against
#       an always-503 fault server, the backoff shortened (backoff.initial
#       0.05, backoff.max 0.2) so the batch lasts seconds: requests per URL
#       (goal: at most 1.3); and one call alone (all its 10 attempts);
#   (b) nginx limit_req at 20 r/s, burst 0: 200 URLs at --parallel-max 8
#       (spec/bench/limit_req.sh's "defaults" mode): 429s per success (goal
#       at most 0.1) and the wall time against the ideal 10 s (goal 1.3x).
# Smaller runs (make test's smoke run): OUTAGE_URLS, DEFAULTS_NGINX_URLS.
# Servers are stopped by their PIDs on exit; every run is bounded.
set -u
export LC_ALL=C
cd "$(dirname "$0")/../.." || exit 1

BIN=${LUARETRY_BIN:-build/luaretry}
N=${OUTAGE_URLS:-1000}
[ -x "$BIN" ] || { echo "defaults: $BIN not built (make all)" >&2; exit 1; }

. spec/bench/fault_server.sh
start_fault_server defaults spec/bench/batch_server.lua

reset_server() { curl -s -X POST "$BASE/_faults/reset" >/dev/null; }
requests_seen() { curl -s "$BASE/_faults/requests" | grep -o '"n":' | wc -l; }

for i in $(seq "$N"); do echo "$BASE/outage/$i"; done > "$tmp/outage.txt"
SHORT=(--set backoff.initial=0.05 --set backoff.max=0.2)

# outage LABEL BIN POLICY PARALLEL [ARGS...]: one row of (a)
outage() {
  local label=$1 bin=$2 policy=$3 par=$4; shift 4
  reset_server
  local t0=$EPOCHREALTIME
  timeout -s KILL 600 "$bin" run "$policy" "$par" 50 --urls "$tmp/outage.txt" -q "${SHORT[@]}" \
    "$@" >/dev/null 2>"$tmp/err"
  local rc=$? t1=$EPOCHREALTIME
  local seen
  seen=$(requests_seen)
  awk -v l="$label" -v s="$seen" -v n="$N" -v rc="$rc" -v a="$t0" -v b="$t1" 'BEGIN {
    r = s / n
    printf "| %s | %d | %d | %.2f | %s | %.2f s | %d |\n", l, n, s, r,
           (r <= 1.3 ? "<= 1.3 ok" : "<= 1.3 MISSED"), b - a, rc }'
}

# lone LABEL BIN POLICY [ARGS...]: one call against always-503
lone() {
  local label=$1 bin=$2 policy=$3; shift 3
  reset_server
  timeout -s KILL 120 "$bin" run "$policy" "$BASE/outage/lone" -q "${SHORT[@]}" "$@" \
    >/dev/null 2>&1
  local rc=$?
  echo "| $label | 1 | $(requests_seen) | | | | $rc |"
}

echo "(a) outage: $N URLs at --parallel-max 50, always 503, backoff.initial=0.05 backoff.max=0.2"
echo
echo "| run | URLs | requests | per URL | goal | wall | exit |"
echo "|---|---|---|---|---|---|---|"
outage "http.lua, shipped guards (no setting)" "$BIN" policies/http.lua --parallel-max
outage "http.lua, --set budget=none rate=none" "$BIN" policies/http.lua --parallel-max \
  --set budget=none --set rate=none
if [ -n "${BASELINE_BIN:-}" ]; then
  outage "baseline build, its http.lua" "$BASELINE_BIN" "${BASELINE_POLICY:-policies/http.lua}" \
    "${BASELINE_PARALLEL:---parallel-max}"
fi
lone "one call alone, shipped guards" "$BIN" policies/http.lua
echo
NGINX_URLS=${DEFAULTS_NGINX_URLS:-200}
echo "(b) nginx limit_req at 20 r/s, burst 0: $NGINX_URLS URLs at --parallel-max 8"
echo
LIMIT_REQ_ONLY=defaults LUARETRY_BIN=$BIN bash spec/bench/limit_req.sh "$NGINX_URLS" 20 8
