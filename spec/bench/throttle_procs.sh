#!/usr/bin/env bash
# spec/bench/throttle_procs.sh: 100 processes against one always-503
# service, each one `luaretry run` of 20 URLs (first attempts included),
# started one every STAGGER seconds (default 0.05: over 5 s, as workers
# that keep arriving during an outage), with no admission control (the
# baseline), admission control (the client-side throttle) per process, and the same fleet-wide
# (--redis: a local redis-server on a loopback port, started and stopped
# here).  Prints the requests the service saw per process, and those it saw
# after the first second per process started after it (the fleet's counts
# are known by then: the issue's goal is <= 1.5 fleet-wide).
#   spec/bench/throttle_procs.sh [PROCESSES [URLS [STAGGER]]]   (default 100 20 0.05)
set -u
export LC_ALL=C
cd "$(dirname "$0")/../.." || exit 1
BIN=${LUARETRY_BIN:-build/luaretry}
PROCS=${1:-100}
URLS=${2:-20}
STAGGER=${3:-0.05}
[ -x "$BIN" ] || { echo "throttle_procs: $BIN not built (make all)" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "throttle_procs: redis-server missing (make deps)" >&2; exit 1; }
. spec/bench/fault_server.sh
. spec/bench/redis_server.sh
start_fault_server throttle_procs spec/bench/batch_server.lua
start_redis throttle_procs

# The server's clock (seconds) of each request since the last reset.
request_times() {
  "$BIN" run policies/http.lua -q "$BASE/_faults/requests" 2>/dev/null |
    grep -o '"time":[0-9.]*' | cut -d: -f2
}
reset_server() { "$BIN" run policies/http.lua -q -X POST "$BASE/_faults/reset" >/dev/null 2>&1; }

for i in $(seq "$URLS"); do echo "$BASE/outage/$i"; done > "$tmp/urls"
run() {  # run LABEL POLICY_TEXT [ARG]...
  local label=$1 text=$2
  shift 2
  printf '%s' "$text" > "$tmp/p.lua"
  reset_server
  local t0=$EPOCHREALTIME
  local pids=()
  for p in $(seq "$PROCS"); do
    "$BIN" run "$tmp/p.lua" --urls "$tmp/urls" -s --seed "$p" "$@" >/dev/null 2>&1 &
    pids+=($!)
    sleep "$STAGGER"
  done
  wait "${pids[@]}"   # not the fault server nor Redis
  local t1=$EPOCHREALTIME
  # processes started after the first second: those after 1 / STAGGER
  request_times | sort -n | awk -v l="$label" -v p="$PROCS" -v u="$URLS" -v s="$STAGGER" \
    -v a="$t0" -v b="$t1" '
    NR == 1 { first = $1 } { t[NR] = $1 }
    END {
      late = 0
      for (i = 1; i <= NR; i++) if (t[i] > first + 1) late++
      later = s > 0 ? p - int(1 / s) : 0
      per = "-"
      if (later > 0) per = sprintf("%5.2f per process started after it (%d)", late / later, later)
      printf "%-30s %6d requests: %6.2f per process; after the first second %5d: %s  %.1f s\n",
        l, NR, NR / p, late, per, b - a
    }'
}
BASE_POLICY='max_attempts = 3
deadline = 30
attempt_timeout = 5
backoff = { initial = 0.05, jitter = "full" }
'
THROTTLE='admission = { k = 2, window = 60 }
fleet = { sync = 50 }
'
echo "throttle_procs: $PROCS processes x $URLS calls against an always-503 service, one started every $STAGGER s"
run "no admission (baseline)" "$BASE_POLICY"
run "admission per process" "$BASE_POLICY$THROTTLE"
run "admission fleet-wide (--redis)" "${BASE_POLICY}name = 'bench-$RANDOM'
$THROTTLE" --redis "$REDIS" --set fleet.command_timeout=1000
