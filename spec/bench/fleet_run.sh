#!/usr/bin/env bash
# spec/bench/fleet_run.sh: an outage seen by 100 processes.  Each
# process is one `luaretry run` call of 4 attempts against an always-503
# fault server (spec/fixtures/fleet/server.lua), started FLEET_STAGGER
# seconds apart (0.05; 0: all at once); side by side in one run:
#   local     the policy's budget (10 tokens, ratio 0.1) shared through the
#             local store (--fleet local, a shared-memory file in a
#             temporary $XDG_RUNTIME_DIR);
#   fleet     the same budget shared through a local redis-server
#             (loopback TCP) with --redis;
#   process   the same budget, each process its own;
#   none      no budget.
#   fleet and per process again with the budget's floor (budget.reserve
#             0.1, as the shipped policies have it): the fleet's is one;
# For each: the requests the server saw per first attempt, the processes'
# exit statuses, and the wall time until the last one ended.  Then
# `simulate --clients 100 --fleet` for the same policy, the model's figure.
# The servers are stopped by their PIDs on exit; every wait is bounded.
set -u
export LC_ALL=C
cd "$(dirname "$0")/../.." || exit 1

BIN=${LUARETRY_BIN:-build/luaretry}
N=${FLEET_PROCESSES:-100}
STAGGER=${FLEET_STAGGER:-0.05}
[ -x "$BIN" ] || { echo "fleet_run: $BIN not built (make all)" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "fleet_run: redis-server missing (make deps)" >&2; exit 1; }

. spec/bench/fault_server.sh
. spec/bench/redis_server.sh
start_fault_server fleet_run spec/fixtures/fleet/server.lua
start_redis fleet_run

cat >"$tmp/guarded.lua" <<'EOF'
name = "bench-fleet"
max_attempts = 4
deadline = 30
attempt_timeout = 5
backoff = { initial = 0.1, max = 0.4, jitter = "full" }
budget = { max_tokens = 10, token_ratio = 0.1 }
EOF
grep -v '^budget' "$tmp/guarded.lua" >"$tmp/unguarded.lua"

requests() { curl -s "$BASE/_faults/requests" | grep -o '"path"' | wc -l; }

# One outage: N processes at once; prints a row of the table.
outage() {
  local label=$1 policy=$2; shift 2
  curl -s -X POST "$BASE/_faults/reset" >/dev/null
  rm -f "$tmp"/code.*
  local t0=$EPOCHREALTIME pids=()
  for i in $(seq "$N"); do
    ( timeout -s KILL 60 "$BIN" run "$policy" "$BASE/503" -q "$@" >/dev/null 2>"$tmp/err.$i"
      echo $? >"$tmp/code.$i" ) &
    pids+=($!)
    [ "$STAGGER" = 0 ] || sleep "$STAGGER"
  done
  wait "${pids[@]}"   # not the servers
  local t1=$EPOCHREALTIME
  local sent codes
  sent=$(requests)
  codes=$(cat "$tmp"/code.* | sort | uniq -c | awk '{printf "%s%d x exit %s", (NR>1?", ":""), $1, $2}')
  printf '| %s | %d | %d | %.2f | %s | %.2f s |\n' "$label" "$N" "$sent" \
    "$(echo "$sent / $N" | bc -l)" "$codes" "$(echo "$t1 - $t0" | bc -l)"
}

# the local store's folder: a temporary one, removed with $tmp
export XDG_RUNTIME_DIR=$tmp/run
mkdir -m 700 "$XDG_RUNTIME_DIR"

echo "| guards | processes | requests seen | per first attempt | exit statuses | wall time |"
echo "|---|---|---|---|---|---|"
# a round trip may take more than the default 100 ms on a busy machine
# (the processes then fall back to their local guards, as they should)
SLOW_OK=(--set fleet.command_timeout=1000)
outage "local store (--fleet local, one budget of 10 tokens)" "$tmp/guarded.lua" --fleet local
outage "fleet (--redis, one budget of 10 tokens)" "$tmp/guarded.lua" --redis "$REDIS" "${SLOW_OK[@]}"
# the budget's floor (budget.reserve, shipped at 0.1): the fleet's, one for all
outage "local store, with a reserve of 0.1 retries a second" "$tmp/guarded.lua" --fleet local \
  --set budget.reserve=0.1
outage "fleet, with a reserve of 0.1 retries a second" "$tmp/guarded.lua" --redis "$REDIS" \
  --set budget.reserve=0.1 --set "fleet.key=bench-reserve-$$" "${SLOW_OK[@]}"
outage "per process, with a reserve of 0.1 each" "$tmp/guarded.lua" --set budget.reserve=0.1
outage "per process (a budget of 10 tokens each)" "$tmp/guarded.lua"
outage "none" "$tmp/unguarded.lua"
local_model=$("$BIN" simulate "$tmp/guarded.lua" --clients "$N" --fleet local --json)
printf '| model: simulate --clients %d --fleet local | local store %s |\n' "$N" \
  "$(echo "$local_model" | sed -n 's/.*"fleet":{[^}]*"amplification":\([0-9.]*\).*/\1/p')"
model=$("$BIN" simulate "$tmp/guarded.lua" --clients "$N" --fleet --json)
printf '| model: simulate --clients %d --fleet | fleet %s, per process %s |\n' "$N" \
  "$(echo "$model" | sed -n 's/.*"fleet":{[^}]*"amplification":\([0-9.]*\).*/\1/p')" \
  "$(echo "$model" | sed -n 's/.*"own":{[^}]*"amplification":\([0-9.]*\).*/\1/p')"
