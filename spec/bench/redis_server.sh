# spec/bench/redis_server.sh: sourced by the bench scripts, after
# fault_server.sh (its $tmp, its cleanup).  Starts a redis-server on a free
# loopback port (a few tries, each bounded), without persistence, sets
# REDIS and rport, and stops it by its PID on exit, before fault_server.sh's
# cleanup.
#   start_redis NAME [ARG...]   (NAME prefixes the error messages; ARGs go
#                               to redis-server, e.g. --maxclients 4000)
redis_pid=
stop_all() {
  stop_pid "$redis_pid"
  cleanup
}
trap stop_all EXIT

start_redis() {
  local try name=$1
  shift
  for try in 1 2 3 4 5; do
    rport=$(( 20000 + (RANDOM * 7 + try * 7919) % 40000 ))
    redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" \
      "$@" --daemonize no >"$tmp/redis.log" 2>&1 </dev/null &
    redis_pid=$!
    for _ in $(seq 100); do
      [ "$(redis-cli -p "$rport" ping 2>/dev/null)" = PONG ] && break 2
      kill -0 "$redis_pid" 2>/dev/null || break
      sleep 0.02
    done
    kill -KILL "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null; redis_pid=
  done
  [ -n "$redis_pid" ] || { echo "$name: redis-server did not start: $(cat "$tmp/redis.log")" >&2; exit 1; }
  REDIS=redis://127.0.0.1:$rport/0
}
