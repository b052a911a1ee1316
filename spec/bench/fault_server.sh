# spec/bench/fault_server.sh: sourced by the bench scripts.  Starts the
# fault server on a free loopback port with SCRIPT, sets BASE, and stops it
# by its PID (and removes $tmp) on exit.
#   start_fault_server NAME SCRIPT      (NAME prefixes the error messages)
#   stop_pid PID                        (SIGTERM, SIGKILL after 2 s; none: nothing)
tmp=$(mktemp -d)
server_pid=
stop_pid() {
  [ -n "$1" ] || return 0
  kill "$1" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.02; done
  kill -KILL "$1" 2>/dev/null
  wait "$1" 2>/dev/null
}
cleanup() {
  stop_pid "$server_pid"
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_fault_server() {
  "$BIN" faults --listen 127.0.0.1:0 "$2" >"$tmp/server.out" 2>"$tmp/server.err" </dev/null &
  server_pid=$!
  port=
  for _ in $(seq 250); do
    port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$tmp/server.out" 2>/dev/null)
    [ -n "$port" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.02
  done
  [ -n "$port" ] || { echo "$1: the fault server did not start: $(cat "$tmp/server.err")" >&2; exit 1; }
  BASE=http://127.0.0.1:$port
}
