#!/usr/bin/env bash
# spec/bench/run_vs_curl.sh: what `luaretry run` costs over plain curl, and
# what an extra attempt costs.  Run from anywhere; uses LUARETRY_BIN if set
# (default build/luaretry) and RUNS (default 200).
#
#   wall time per run   luaretry run policies/http.lua URL -q   vs   curl -s URL
#   peak RSS            /usr/bin/time -f %M, else VmHWM polled from /proc
#   extra attempts      503, 503, 200 with zero waits   vs   a single 200
#
# The runs of the figures compared are interleaved, so a noisy neighbour
# hurts them alike.  The fault server is stopped by its PID on exit.
set -u
export LC_ALL=C
cd "$(dirname "$0")/../.." || exit 1

BIN=${LUARETRY_BIN:-build/luaretry}
RUNS=${RUNS:-200}
RSS_RUNS=${RSS_RUNS:-20}
POLICY=policies/http.lua
[ -x "$BIN" ] || { echo "run_vs_curl: $BIN not built (make all)" >&2; exit 1; }
CURL=$(command -v curl || true)

. spec/bench/fault_server.sh
start_fault_server run_vs_curl spec/fixtures/run/bench_server.lua

# Microseconds now, without a fork.
now_us() { local t=$EPOCHREALTIME; echo $(( ${t/./} )); }

# time_us VAR CMD...: runs CMD (stdout and stderr discarded), adds its wall time
# to the array VAR, and fails when CMD fails.
time_us() {
  local -n acc=$1; shift
  local t0=${EPOCHREALTIME/./}
  "$@" >/dev/null 2>&1
  local rc=$?
  local t1=${EPOCHREALTIME/./}
  acc+=( $(( t1 - t0 )) )
  return $rc
}

# stats ARRAY...: "mean median" in ms.
stats() {
  printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1; s += $1 }
    END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
          printf "%.3f %.3f\n", s / NR / 1000, m / 1000 }'
}

# peak_rss_kb CMD...: the largest peak RSS (KiB) over RSS_RUNS runs.
if [ -x /usr/bin/time ]; then
  RSS_HOW="/usr/bin/time -f %M"
  peak_once() { /usr/bin/time -f %M -o "$tmp/rss" "$@" >/dev/null 2>&1; tail -n 1 "$tmp/rss"; }
else
  # No GNU time: poll VmHWM of the process until it exits (a lower bound:
  # the last milliseconds of a short run may be missed).
  RSS_HOW="VmHWM polled from /proc (lower bound)"
  peak_once() {
    "$@" >/dev/null 2>&1 &
    local pid=$! best=0 line v
    while kill -0 "$pid" 2>/dev/null; do
      while read -r line; do
        case $line in VmHWM:*) v=${line//[!0-9]/}; [ "${v:-0}" -gt "$best" ] && best=$v ;; esac
      done 2>/dev/null <"/proc/$pid/status"
    done
    wait "$pid"
    echo "$best"
  }
fi
peak_rss_kb() {
  local best=0 v
  for _ in $(seq "$RSS_RUNS"); do
    v=$(peak_once "$@")
    [ "${v:-0}" -gt "$best" ] && best=$v
  done
  echo "$best"
}

fail() { echo "run_vs_curl: $*" >&2; exit 1; }

# A check before timing anything: every command must succeed.
"$BIN" run "$POLICY" "$BASE/ok" -q >/dev/null || fail "luaretry run $BASE/ok failed"
if [ -n "$CURL" ]; then "$CURL" -sf "$BASE/ok" >/dev/null || fail "curl $BASE/ok failed"; fi
"$BIN" run "$POLICY" "$BASE/flaky/check" -q --set backoff.initial=0 --set backoff.jitter_max=0 \
  >/dev/null || fail "luaretry run $BASE/flaky/check failed"

# Zero waits: backoff.initial=0 and no jitter.  (`--set backoff.jitter=none`
# is read as "unset" by this version, so jitter_max=0 does it.)
ZERO=(--set backoff.initial=0 --set backoff.jitter_max=0)

# 1. luaretry vs curl, one 200; 2. one 200 vs 503, 503, 200 (interleaved).
lr=() cu=() one=() three=()
for i in $(seq "$RUNS"); do
  time_us lr "$BIN" run "$POLICY" "$BASE/ok" -q || fail "luaretry run failed (run $i)"
  if [ -n "$CURL" ]; then time_us cu "$CURL" -sf "$BASE/ok" || fail "curl failed (run $i)"; fi
  time_us one "$BIN" run "$POLICY" "$BASE/ok" -q "${ZERO[@]}" || fail "single 200 failed (run $i)"
  time_us three "$BIN" run "$POLICY" "$BASE/flaky/$i" -q "${ZERO[@]}" || fail "503, 503, 200 failed (run $i)"
done

read -r lr_mean lr_med < <(stats "${lr[@]}")
read -r one_mean one_med < <(stats "${one[@]}")
read -r three_mean three_med < <(stats "${three[@]}")
if [ -n "$CURL" ]; then
  read -r cu_mean cu_med < <(stats "${cu[@]}")
else
  cu_mean=nan cu_med=nan
fi

lr_rss=$(peak_rss_kb "$BIN" run "$POLICY" "$BASE/ok" -q)
cu_rss=n/a
[ -n "$CURL" ] && cu_rss=$(peak_rss_kb "$CURL" -sf "$BASE/ok")

awk -v runs="$RUNS" -v how="$RSS_HOW" -v bin="$BIN" \
    -v lr_mean="$lr_mean" -v lr_med="$lr_med" -v cu_mean="$cu_mean" -v cu_med="$cu_med" \
    -v lr_rss="$lr_rss" -v cu_rss="$cu_rss" \
    -v one_mean="$one_mean" -v one_med="$one_med" -v three_mean="$three_mean" \
    -v three_med="$three_med" 'BEGIN {
  printf "luaretry run vs curl: %d runs each, interleaved; %s against the fault server on 127.0.0.1\n\n", runs, bin
  printf "%-44s %12s %12s %12s %10s\n", "figure", "luaretry", "curl", "ratio", "target"
  if (cu_mean == "nan") {
    printf "%-44s %9.3f ms %12s\n", "wall time per run, one 200 (mean)", lr_mean, "no curl"
  } else {
    r = lr_mean / cu_mean
    printf "%-44s %9.3f ms %9.3f ms %11.2fx %10s  %s\n", "wall time per run, one 200 (mean)", lr_mean, cu_mean, r, "<= 1.3x", (r <= 1.3 ? "ok" : "MISSED")
    printf "%-44s %9.3f ms %9.3f ms %11.2fx\n", "wall time per run, one 200 (median)", lr_med, cu_med, lr_med / cu_med
  }
  if (cu_rss == "n/a") printf "%-44s %9d KiB %12s\n", "peak RSS (max of runs)", lr_rss, "n/a"
  else printf "%-44s %9d KiB %8d KiB %11.2fx\n", "peak RSS (max of runs)", lr_rss, cu_rss, lr_rss / cu_rss
  printf "  (peak RSS by %s)\n\n", how
  printf "%-44s %12s %12s %12s\n", "extra attempts (zero waits)", "mean", "median", ""
  printf "%-44s %9.3f ms %9.3f ms\n", "one attempt: 200", one_mean, one_med
  printf "%-44s %9.3f ms %9.3f ms\n", "three attempts: 503, 503, 200", three_mean, three_med
  printf "%-44s %9.3f ms %9.3f ms\n", "cost per extra attempt ((3) - (1)) / 2", (three_mean - one_mean) / 2, (three_med - one_med) / 2
}'
