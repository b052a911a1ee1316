#!/usr/bin/env bash
# spec/bench/fleet_rate.sh: one rate limit for several processes.  A local
# nginx with `limit_req` at RATE requests a second (burst 0, 429 beyond) and
# PROCS processes at once, each `luaretry run policies/http.lua` of N/PROCS
# URLs at --parallel-max P, with `rate = { limit = 0.9 RATE }`: per process (no
# Redis: PROCS times the limit reaches nginx), fleet-wide on one machine
# (--fleet local: one bucket in a shared-memory file, in a temporary
# $XDG_RUNTIME_DIR) and fleet-wide (--redis, a local redis-server: one
# bucket for all).  For each: the 429s nginx sent
# per success, the wall time against the ideal N / (0.9 RATE), and the
# round trips to Redis.  nginx and redis-server live in a temporary folder,
# stopped by PID on exit.
#
#   spec/bench/fleet_rate.sh [N [RATE [PROCS [P]]]]     (default 1000 50 4 4)
set -u
export LC_ALL=C
cd "$(dirname "$0")/../.." || exit 1

N=${1:-1000}
RATE=${2:-50}
PROCS=${3:-4}
P=${4:-4}
BIN=${LUARETRY_BIN:-build/luaretry}
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$BIN" ] || { echo "fleet_rate: $BIN not built (make all)" >&2; exit 1; }
[ -x "$NGINX" ] || { echo "fleet_rate: nginx not installed (make deps)" >&2; exit 1; }
command -v redis-server > /dev/null || { echo "fleet_rate: redis-server not installed" >&2; exit 1; }

DIR=$(mktemp -d)
PIDFILE=$DIR/nginx.pid
REDIS_PID=
cleanup() {
  [ -s "$PIDFILE" ] && kill "$(cat "$PIDFILE")" 2>/dev/null
  [ -n "$REDIS_PID" ] && kill "$REDIS_PID" 2>/dev/null
  rm -rf "$DIR"
}
trap cleanup EXIT

. spec/bench/nginx_limit_req.sh
start_limit_req_nginx fleet_rate "$RATE"
redis-server --port 0 --unixsocket "$DIR/redis.sock" --save '' --appendonly no \
  --daemonize no > "$DIR/redis.log" 2>&1 &
REDIS_PID=$!
for _ in $(seq 50); do redis-cli -s "$DIR/redis.sock" ping > /dev/null 2>&1 && break; sleep 0.1; done

EACH=$((N / PROCS))
for k in $(seq "$PROCS"); do
  : > "$DIR/urls$k"
  for i in $(seq "$EACH"); do echo "http://127.0.0.1:$PORT/p$k/$i" >> "$DIR/urls$k"; done
done
LIMIT=$(awk -v r="$RATE" 'BEGIN { print r * 0.9 }')

# run LABEL [ARGS...]: the PROCS processes at once, then nginx's counts.
run() {
  local label=$1; shift
  redis-cli -s "$DIR/redis.sock" config resetstat > /dev/null
  local t0=$EPOCHREALTIME pids=()
  for k in $(seq "$PROCS"); do
    "$BIN" run policies/http.lua --urls "$DIR/urls$k" --parallel-max "$P" -s \
      --set "rate.limit=$LIMIT" --set rate.adaptive=false "$@" > /dev/null 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"   # not redis-server
  local t1=$EPOCHREALTIME
  local ok tooMany trips
  ok=$(awk '$9 == 200' "$DIR/logs/access.log" | wc -l)
  tooMany=$(awk '$9 == 429' "$DIR/logs/access.log" | wc -l)
  trips=$(redis-cli -s "$DIR/redis.sock" info commandstats |
          sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\).*/\1/p')
  awk -v l="$label" -v a="$t0" -v b="$t1" -v ok="$ok" -v t="$tooMany" -v n="$N" -v r="$LIMIT" \
      -v rt="${trips:-0}" 'BEGIN {
    printf "%-36s %5d ok %6d 429s  %.3f 429s per success  %7.2f s  (%.2fx the ideal %.1f s)  %d round trips\n",
           l, ok, t, ok ? t / ok : 0, b - a, (b - a) / (n / r), n / r, rt }'
  : > "$DIR/logs/access.log"
  kill -USR1 "$(cat "$PIDFILE")"   # reopen the log
  sleep 1.5                        # the limiter forgets the last run
}

echo "fleet_rate: nginx at $RATE r/s (burst 0), $PROCS processes x $EACH URLs, $P at once each, rate.limit=$LIMIT"
run "per process (no Redis)"
export XDG_RUNTIME_DIR=$DIR/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
run "local store (--fleet local)" --fleet local --set "fleet.key=bench-$$"
run "fleet-wide (--redis)" --redis "unix://$DIR/redis.sock" --set "fleet.key=bench-$$"
