#!/usr/bin/env bash
# spec/bench/peers.sh: the "fail k times, then succeed, no wait" loop in
# luaretry and in the retry libraries a user would otherwise pick.
#
#   luaretry   build/bench_loop (loop.c): luaretry_call_run, policies/http.lua
#              with backoff.initial=0, jitter none; virtual and real clock
#   tenacity   peer_tenacity.py: @retry(stop_after_attempt(10), wait_none(),
#              retry_if_exception_type), as is and with sleep=a no-op
#   urllib3    peer_urllib3.py: Retry(total=10, backoff_factor=0), driven
#              through is_retry / increment / sleep as its pool does
#   cockatiel  peer_cockatiel.js: retry(handleAll, { maxAttempts: 10,
#              backoff: new ConstantBackoff(0) })
#
# k = 3: every call takes 4 attempts.  Figures are ns per attempt, the best
# of PEER_ROUNDS rounds (default 3); the rows' runs are interleaved round by
# round, so a noisy neighbour hurts them alike; a run lasts PEER_SECONDS
# (default 0.25).  Ratios are to luaretry on the virtual clock, measured in
# the same rounds.
#
# What is missing is installed first, when run as root: Debian's
# python3-tenacity, python3-urllib3 (for /usr/bin/python3, or PEER_PYTHON),
# nodejs and npm (only when no node / npm command is found: a node from
# elsewhere brings its own npm), after one apt-get update; then cockatiel
# from npm into spec/bench/.peers/.  A peer that cannot be had is a row that
# says "skipped: why"; it never fails the bench.
set -u
export LC_ALL=C
cd "$(dirname "$0")/../.." || exit 1

LOOP=${BENCH_LOOP:-build/bench_loop}
PY=${PEER_PYTHON:-/usr/bin/python3}
ROUNDS=${PEER_ROUNDS:-3}
SECS=${PEER_SECONDS:-0.25}
PEERS=spec/bench/.peers
[ -x "$LOOP" ] || { echo "peers: $LOOP not built (make bench builds it)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# --- install what is missing
py_has() { [ -x "$PY" ] && "$PY" -c "import $1" >/dev/null 2>&1; }
have_cockatiel() { [ -f "$PEERS/node_modules/cockatiel/package.json" ]; }

missing=()
py_has tenacity || missing+=(python3-tenacity)
py_has urllib3 || missing+=(python3-urllib3)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)

apt_note=
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "peers: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if timeout 300 apt-get update -qq >"$tmp/apt.log" 2>&1; then
      # All at once; if that fails, one by one, so that one that cannot be
      # had does not keep the others out.
      if ! timeout 600 apt-get install -y -qq "${missing[@]}" >>"$tmp/apt.log" 2>&1; then
        for p in "${missing[@]}"; do
          timeout 600 apt-get install -y -qq "$p" >>"$tmp/apt.log" 2>&1
        done
      fi
    fi
    reason=$(grep -E '^(E|W):' "$tmp/apt.log" | tail -n 1)
    apt_note="could not be installed: ${reason:-$(tail -n 1 "$tmp/apt.log")}"
  else
    apt_note="not installed (as root, make bench installs it)"
  fi
fi

node_note=
if ! have_cockatiel; then
  if ! command -v node >/dev/null 2>&1; then
    node_note="no node: nodejs $apt_note"
  elif ! command -v npm >/dev/null 2>&1; then
    node_note="no npm: npm $apt_note"
  else
    echo "peers: npm install cockatiel into $PEERS"
    if ! mkdir -p "$PEERS" >"$tmp/npm.log" 2>&1 ||
       ! timeout 180 npm install --no-save --no-audit --no-fund --fetch-retries=1 --prefix "$PEERS" cockatiel \
         >>"$tmp/npm.log" 2>&1 || ! have_cockatiel; then
      reason=$(grep -iE 'err|denied' "$tmp/npm.log" | grep -v 'complete log' | head -n 1)
      node_note="npm install cockatiel failed: ${reason:-$(tail -n 1 "$tmp/npm.log")}"
    fi
  fi
fi

# --- rows: name, label, command (a peer prints NS CALLS VERSION)
declare -A why best calls version
rows=(tenacity tenacity_nosleep urllib3 cockatiel)
if ! py_has tenacity; then
  why[tenacity]="python3-tenacity $apt_note"
  why[tenacity_nosleep]=${why[tenacity]}
fi
py_has urllib3 || why[urllib3]="python3-urllib3 $apt_note"
[ -n "$node_note" ] && why[cockatiel]=$node_note

peer_cmd() {
  case $1 in
    tenacity) timeout 120 "$PY" spec/bench/peer_tenacity.py "$SECS" default ;;
    tenacity_nosleep) timeout 120 "$PY" spec/bench/peer_tenacity.py "$SECS" nosleep ;;
    urllib3) timeout 120 "$PY" spec/bench/peer_urllib3.py "$SECS" ;;
    cockatiel) NODE_PATH=$PWD/$PEERS/node_modules timeout 120 node spec/bench/peer_cockatiel.js "$SECS" ;;
  esac
}

# keep NAME NS CALLS [VERSION]: the smaller figure wins.
keep() {
  local name=$1 ns=$2 n=$3 v=${4:-}
  if [ -z "${best[$name]:-}" ] || awk -v a="$ns" -v b="${best[$name]}" 'BEGIN { exit !(a < b) }'; then
    best[$name]=$ns calls[$name]=$n
  fi
  [ -n "$v" ] && version[$name]=$v
}

for _ in $(seq "$ROUNDS"); do
  "$LOOP" "$SECS" >"$tmp/loop" 2>"$tmp/loop.err" || {
    echo "peers: $LOOP failed: $(tail -n 1 "$tmp/loop.err")" >&2; exit 1; }
  while read -r name ns n; do keep "lr_$name" "$ns" "$n"; done <"$tmp/loop"
  for r in "${rows[@]}"; do
    [ -n "${why[$r]:-}" ] && continue
    if peer_cmd "$r" >"$tmp/out" 2>"$tmp/err" && read -r ns n v <"$tmp/out" && [ -n "${n:-}" ]; then
      keep "$r" "$ns" "$n" "$v"
    else
      why[$r]="failed: $(tail -n 1 "$tmp/err")"
    fi
  done
done

pyv=$("$PY" -c 'import platform; print(platform.python_version())' 2>/dev/null) || pyv="not found"
nodev=$(node --version 2>/dev/null) || nodev="not found"
lrv=$(sed -n 's/#define LUARETRY_VERSION "\(.*\)"/\1/p' core/include/luaretry.h)
label() {
  local v=${version[$1]:+ ${version[$1]}}
  case $1 in
    lr_virtual) echo "luaretry $lrv, virtual clock (reference)" ;;
    lr_real) echo "luaretry $lrv, real clock, seed from the OS" ;;
    tenacity) echo "tenacity$v (Python $pyv)" ;;
    tenacity_nosleep) echo "  the same, sleep=no-op" ;;
    urllib3) echo "urllib3$v Retry (Python $pyv)" ;;
    cockatiel) echo "cockatiel$v (Node $nodev)" ;;
  esac
}

printf '\nluaretry %s bench: peers   fail 3 times, then succeed, no wait; best of %s rounds, interleaved, ~%s s a run\n\n' \
  "$lrv" "$ROUNDS" "$SECS"
printf '%-44s %14s %12s %14s\n' "row" "per attempt" "calls/run" "vs luaretry"
ref=${best[lr_virtual]}
for r in lr_virtual lr_real "${rows[@]}"; do
  if [ -n "${why[$r]:-}" ]; then
    printf '%-44s %s\n' "$(label "$r")" "skipped: ${why[$r]}"
  else
    awk -v l="$(label "$r")" -v ns="${best[$r]}" -v n="${calls[$r]}" -v ref="$ref" 'BEGIN {
      printf "%-44s %11.1f ns %12d %13.2fx\n", l, ns, n, ns / ref }'
  fi
done
