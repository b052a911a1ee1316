#!/usr/bin/env bash
# spec/bench/throttle_procs.sh: 100 processes against one always-503 service,
# each one `luaretry run` of 20 URLs (first attempts included), with and
# without the client-side throttle (per process: the fleet's Redis does not
# share it yet).  Prints the requests the service saw per process, beside
# the prediction of `simulate --clients 100 --fleet` (own guards).
#   spec/bench/throttle_procs.sh [PROCESSES [URLS]]     (default 100 20)
set -u
export LC_ALL=C
cd "$(dirname "$0")/../.." || exit 1
BIN=${LUARETRY_BIN:-build/luaretry}
PROCS=${1:-100}
URLS=${2:-20}
[ -x "$BIN" ] || { echo "throttle_procs: $BIN not built (make all)" >&2; exit 1; }
. spec/bench/fault_server.sh
start_fault_server throttle_procs spec/bench/batch_server.lua

requests_seen() {
  "$BIN" run policies/http.lua -q "$BASE/_faults/requests" 2>/dev/null | grep -o '"n":' | wc -l
}
reset_server() { "$BIN" run policies/http.lua -q -X POST "$BASE/_faults/reset" >/dev/null 2>&1; }

for i in $(seq "$URLS"); do echo "$BASE/outage/$i"; done > "$tmp/urls"
run() {  # run LABEL POLICY_TEXT
  printf '%s' "$2" > "$tmp/p.lua"
  reset_server
  local t0=$EPOCHREALTIME
  local pids=()
  for p in $(seq "$PROCS"); do
    "$BIN" run "$tmp/p.lua" --urls "$tmp/urls" -s --seed "$p" >/dev/null 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"   # not the fault server
  local t1=$EPOCHREALTIME n
  n=$(requests_seen)
  awk -v l="$1" -v n="$n" -v p="$PROCS" -v u="$URLS" -v a="$t0" -v b="$t1" 'BEGIN {
    printf "%-40s %6d requests: %6.2f per process (%d calls each)  %.1f s\n", l, n, n / p, u, b - a }'
}
BASE_POLICY='max_attempts = 3
deadline = 30
attempt_timeout = 5
backoff = { initial = 0.05, jitter = "full" }
'
echo "throttle_procs: $PROCS processes x $URLS calls against an always-503 service"
run "no throttle" "$BASE_POLICY"
run "throttle = { k = 2 } (per process)" "$BASE_POLICY"'throttle = { k = 2, window = 60 }
'
