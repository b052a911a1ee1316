#!/usr/bin/env bash
# spec/bench/smoke.sh: every benchmark of `make bench`, once, at a small
# size: make test's smoke run.  Each must run to its end and exit 0 (the
# scripts fail when their premise does: a batch whose URLs did not all
# succeed, a bench loop whose calls were refused); the figures are not
# judged here (small sizes, and a machine busy with the other half of
# make test) but are kept in $SMOKE_DIR/NAME.log.  A failure prints the
# bench's command and the end of its output.
#
# Not here: peers.sh installs its peers (apt, npm) and is make bench's
# alone (its luaretry side, bench_loop, is run); fleet_scale.sh has its
# short run in spec/fleet_scale_spec.lua.
#
# Three lanes at once: most of the time goes in real waits (backoff, a
# limit_req at 20 r/s), not CPU.
#   spec/bench/smoke.sh          BUILD (default build): the binaries' folder
set -u
export LC_ALL=C
cd "$(dirname "$0")/../.." || exit 1
B=${BUILD:-build}
SMOKE_DIR=${SMOKE_DIR:-$B/bench-smoke}
rm -rf "$SMOKE_DIR"
mkdir -p "$SMOKE_DIR"
export LUARETRY_BIN=$B/luaretry RELAY=$B/relay BENCH_DECIDE=$B/bench_decide

# smoke NAME CMD...: one bench, bounded; its status in $SMOKE_DIR/NAME.rc
smoke() {
  local name=$1
  shift
  local t0=$EPOCHREALTIME rc=0
  timeout -k 10 300 "$@" >"$SMOKE_DIR/$name.log" 2>&1 </dev/null || rc=$?
  echo "$rc" >"$SMOKE_DIR/$name.rc"
  printf '%s\n' "$*" >"$SMOKE_DIR/$name.cmd"
  awk -v n="$name" -v rc="$rc" -v a="$t0" -v b="$EPOCHREALTIME" \
    'BEGIN { printf "bench smoke: %-14s %s %6.1f s\n", n, (rc == 0 ? "ok    " : "FAILED"), b - a }'
}

lane_cpu() {
  smoke decide "$B/bench_decide"
  smoke decide_instr sh spec/bench/decide_instr.sh 200
  smoke guards_off "$B/bench_guards_cost" 2000 off
  smoke guards_http "$B/bench_guards_cost" 2000
  smoke guards_all "$B/bench_guards_cost" 2000 guards
  smoke locks "$B/bench_locks" 8 1000
  smoke loop "$B/bench_loop" 0.02
  smoke reuse "$B/bench_reuse"
  smoke waits "$B/bench_waits" 50
  smoke fleet "$B/bench_fleet"
  smoke fleet_decide "$B/bench_fleet_decide"
  smoke fleet_steps "$B/bench_fleet_steps"
  smoke hedge "$B/bench_hedge" --cost
  smoke run_vs_curl env RUNS=10 RSS_RUNS=2 bash spec/bench/run_vs_curl.sh
  smoke million env MILLION_URLS=2000 bash spec/bench/million.sh
  smoke resume env RESUME_MB=8 RESUME_CUT_MB=2 NGINX_MB=4 bash spec/bench/resume.sh
  smoke throttle_procs bash spec/bench/throttle_procs.sh 10 5 0.01
  smoke fleet_rate bash spec/bench/fleet_rate.sh 40 20 2 2
}

lane_outage() {
  smoke defaults env OUTAGE_URLS=50 DEFAULTS_NGINX_URLS=20 bash spec/bench/defaults.sh
  smoke fleet_run env FLEET_PROCESSES=10 bash spec/bench/fleet_run.sh
}

lane_waits() {
  smoke chain env CHAIN_REQUESTS=1 bash spec/bench/chain.sh
  smoke limit_req bash spec/bench/limit_req.sh 20 20 4
  smoke batch env BATCH_URLS=100 BATCH_DEADLINE=2 BATCH_CURL= bash spec/bench/batch.sh
}

t0=$EPOCHREALTIME
lane_cpu &
cpu_pid=$!
lane_outage &
outage_pid=$!
lane_waits
wait "$cpu_pid" "$outage_pid"

failed=0
for rc in "$SMOKE_DIR"/*.rc; do
  [ "$(cat "$rc")" = 0 ] && continue
  name=$(basename "$rc" .rc)
  failed=$((failed + 1))
  echo "bench smoke: $name failed (exit $(cat "$rc")): $(cat "$SMOKE_DIR/$name.cmd")"
  tail -n 30 "$SMOKE_DIR/$name.log"
done
n=$(ls "$SMOKE_DIR"/*.rc | wc -l)
awk -v n="$n" -v f="$failed" -v a="$t0" -v b="$EPOCHREALTIME" \
  'BEGIN { printf "bench smoke: %d of %d benches ran to their end, %.1f s\n", n - f, n, b - a }'
[ "$failed" = 0 ]
