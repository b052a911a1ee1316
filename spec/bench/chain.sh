#!/usr/bin/env bash
# spec/bench/chain.sh: three layers on loopback, each retrying with
# max_attempts = 4: `luaretry run` (A) -> relay B -> relay C -> a fault
# server (spec/c/relay.c is the middle service).  Side by side, without
# and with `propagate` in every layer's policy:
#   outage    always 503: backend requests per user request (64 without)
#   flaky     each path fails once then answers 200: backend requests per
#             user request, beside one layer alone
#   late      the backend answers 503 after 2 s, the top's deadline is 1 s:
#             backend requests that start after the top's deadline
# Servers stopped by their PIDs on exit; every wait bounded.
set -u
export LC_ALL=C
cd "$(dirname "$0")/../.." || exit 1

BIN=${LUARETRY_BIN:-build/luaretry}
RELAY=${RELAY:-build/relay}
N=${CHAIN_REQUESTS:-20}
[ -x "$BIN" ] && [ -x "$RELAY" ] || { echo "chain: make all build/relay first" >&2; exit 1; }

. spec/bench/fault_server.sh
relays=()
stop_all() {
  for pid in "${relays[@]}"; do kill "$pid" 2>/dev/null; done
  cleanup
}
trap stop_all EXIT

cat > "$tmp/server.lua" <<'EOF'
respond = function (req)
  if req.path:match("^/outage/") then return 503 end
  if req.path:match("^/late/") then return {status = 503, delay = 2} end
  if req.count == 1 then return 503 end -- /flaky/...: fails once per path
  return {body = "ok\n"}
end
EOF
start_fault_server chain "$tmp/server.lua"

layer() { # $1: file, $2: extra line
  printf 'name = "layer"\nmax_attempts = 4\ndeadline = 20\nattempt_timeout = 10\n%s\n%s\n' \
    'backoff = { initial = 0.01, max = 0.02, jitter = "none" }' "$2" > "$1"
}
layer "$tmp/plain.lua" ""
layer "$tmp/prop.lua" "propagate = {}"

start_relay() { # $1 policy, $2 upstream; sets RELAY_BASE
  local out="$tmp/relay.$RANDOM.out"
  "$RELAY" "$1" "$2" >"$out" 2>/dev/null </dev/null &
  relays+=($!)
  local p=
  for _ in $(seq 250); do
    p=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$out" 2>/dev/null)
    [ -n "$p" ] && break
    sleep 0.02
  done
  [ -n "$p" ] || { echo "chain: a relay did not start" >&2; exit 1; }
  RELAY_BASE=http://127.0.0.1:$p
}

seen() { # requests the backend saw on paths starting with $1
  curl -s --max-time 10 "$BASE/_faults/requests" | grep -o "\"path\":\"$1[^\"]*\"" | wc -l
}

printf '%-8s %-10s %10s %12s\n' case policy requests per_user
for policy in plain prop; do
  start_relay "$tmp/$policy.lua" "$BASE"; c=$RELAY_BASE
  start_relay "$tmp/$policy.lua" "$c"; b=$RELAY_BASE
  for i in $(seq "$N"); do "$BIN" run "$tmp/$policy.lua" -s "$b/outage/$policy/$i" >/dev/null; done
  n=$(seen "/outage/$policy/")
  printf '%-8s %-10s %10d %12.2f\n' outage "$policy" "$n" "$(echo "$n / $N" | bc -l)"
  for i in $(seq "$N"); do "$BIN" run "$tmp/$policy.lua" -s "$b/flaky/$policy/$i" >/dev/null; done
  n=$(seen "/flaky/$policy/")
  printf '%-8s %-10s %10d %12.2f\n' flaky "$policy" "$n" "$(echo "$n / $N" | bc -l)"
  # late: one user request with a 1 s deadline; the inner layers are given
  # 4 s to go on after it
  before=$(seen "/late/$policy/")
  t0=$(date +%s.%N)
  "$BIN" run "$tmp/$policy.lua" -s --retry-max-time 1 "$b/late/$policy/1" >/dev/null
  sleep 4
  after=$(curl -s --max-time 10 "$BASE/_faults/requests" | tr '{' '\n' | grep -c "\"path\":\"/late/$policy/")
  printf "%-8s %-10s %10d %12s\n" late "$policy" "$((after - before - 1))" "after 1 s"
  kill "${relays[@]}" 2>/dev/null
  relays=()
done
for i in $(seq "$N"); do "$BIN" run "$tmp/prop.lua" -s "$BASE/flaky/alone/$i" >/dev/null; done
n=$(seen "/flaky/alone/")
printf '%-8s %-10s %10d %12.2f\n' flaky "one layer" "$n" "$(echo "$n / $N" | bc -l)"
