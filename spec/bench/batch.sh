#!/usr/bin/env bash
# spec/bench/batch.sh: `luaretry run` with many URLs (one call each, one
# policy, one multi handle) next to curl doing the same, against the local
# fault server (spec/bench/batch_server.lua).  Run from anywhere; uses
# LUARETRY_BIN if set (default build/luaretry).
#
#   (a) outage: 50 calls at once (one `run --parallel-max 50` of 50 URLs)
#       against an always-503 server, deadline 10 s, with and without a
#       retry budget: requests the server saw / first attempts, next to
#       `curl --parallel --parallel-max 50 --retry 3` on the same 50 URLs.
#   (b) throughput: 2,000 URLs answered 503 on 30% of attempts
#       (deterministic per path), 16 transfers at once: wall time next to
#       `curl --parallel --parallel-max 16 --retry 5`; luaretry once with
#       curl's waits (1 s doubling, no jitter) and once with short waits.
#       Every luaretry run must end with all its URLs succeeded, or the
#       script fails.
#
# Smaller runs (make test's smoke run): BATCH_URLS for (b)'s 2,000,
# BATCH_DEADLINE for (a)'s 10 s, BATCH_CURL= (empty) for no curl rows.
# The fault server is stopped by its PID on exit; every run is bounded.
set -u
export LC_ALL=C
cd "$(dirname "$0")/../.." || exit 1

BIN=${LUARETRY_BIN:-build/luaretry}
POLICY=policies/http.lua
[ -x "$BIN" ] || { echo "batch: $BIN not built (make all)" >&2; exit 1; }
CURL=${BATCH_CURL-$(command -v curl || true)}

. spec/bench/fault_server.sh
start_fault_server batch spec/bench/batch_server.lua

fail() { echo "batch: $*" >&2; exit 1; }

# The server's own log, through luaretry itself (no curl needed).
reset_server() { "$BIN" run "$POLICY" -q -X POST "$BASE/_faults/reset" >/dev/null 2>&1 || fail "reset failed"; }
requests_seen() {
  "$BIN" run "$POLICY" -q "$BASE/_faults/requests" 2>/dev/null | grep -o '"n":' | wc -l
}

# timed VAR CMD...: runs CMD, stores its wall time in seconds in VAR.
timed() {
  local -n secs=$1; shift
  local t0=${EPOCHREALTIME/./}
  "$@"
  local rc=$?
  local t1=${EPOCHREALTIME/./}
  secs=$(awk -v d=$(( t1 - t0 )) 'BEGIN { printf "%.3f", d / 1e6 }')
  return $rc
}

# curl_config FILE PATH N [null]: a curl config for URLs $BASE/PATH/1..N,
# each to its own file (curl truncates its output before a retry, and
# /dev/null cannot be truncated), or with `null` all to /dev/null.
curl_config() {
  mkdir -p "$tmp/curl"
  for i in $(seq "$3"); do
    if [ "${4:-}" = null ]; then
      printf 'url = "%s/%s/%d"\noutput = "/dev/null"\n' "$BASE" "$2" "$i"
    else
      printf 'url = "%s/%s/%d"\noutput = "%s/curl/%d"\n' "$BASE" "$2" "$i" "$tmp" "$i"
    fi
  done > "$1"
}

# Successes: the count in luaretry's summary line ("N URLs: K succeeded,
# ...", which -q leaves out; "?" when it is missing); 200s in curl's -w
# output.
lr_ok() {
  local k
  k=$(sed -n 's/^luaretry: [0-9]* URLs: \([0-9]*\) succeeded,.*/\1/p' "$1" | tail -n 1)
  echo "${k:-?}"
}
curl_ok() { grep -c '^200$' "$1"; }

# ---- (a) an outage

N_OUT=50
for i in $(seq "$N_OUT"); do echo "$BASE/outage/$i"; done > "$tmp/outage.txt"
DEADLINE=${BATCH_DEADLINE:-10}
OUTAGE=(--set deadline="$DEADLINE" --parallel-max "$N_OUT" --urls "$tmp/outage.txt" -q)

reset_server
# the budget alone, without http.lua's floor (spec/bench/defaults.sh measures
# the policy as shipped)
timed a_b_secs "$BIN" run "$POLICY" "${OUTAGE[@]}" --set budget.max_tokens=10 \
  --set budget.token_ratio=0.1 --set budget.reserve=0 >/dev/null 2>"$tmp/a_b.err"
a_b_rc=$?
a_b_req=$(requests_seen)
reset_server
timed a_n_secs "$BIN" run "$POLICY" "${OUTAGE[@]}" --set budget=none >/dev/null 2>"$tmp/a_n.err"
a_n_rc=$?
a_n_req=$(requests_seen)
a_c_req=skip a_c_secs=0 a_c_rc=-
if [ -n "$CURL" ]; then
  curl_config "$tmp/outage.cfg" outage "$N_OUT"
  reset_server
  timed a_c_secs "$CURL" -s --parallel --parallel-max "$N_OUT" --retry 3 -K "$tmp/outage.cfg" \
    >/dev/null 2>&1
  a_c_rc=$?
  a_c_req=$(requests_seen)
fi

# ---- (b) throughput

N_B=${BATCH_URLS:-2000}
for i in $(seq "$N_B"); do echo "$BASE/t/$i"; done > "$tmp/t.txt"
for i in $(seq "$N_B"); do echo "$BASE/ok/$i"; done > "$tmp/ok.txt"
# like curl's --retry: http.lua without its guards (a budget refuses a
# service failing 30% of attempts; curl has none)
BATCH=(--parallel-max 16 --set max_attempts=6 --set budget=none --set rate=none)
LIKE=(--set backoff.initial=1 --set backoff.multiplier=2 --set backoff.jitter_max=0)
SHORT=(--set backoff.initial=0.05 --set backoff.jitter_max=0.05)

reset_server
timed b_l_secs "$BIN" run "$POLICY" --urls "$tmp/t.txt" "${BATCH[@]}" "${LIKE[@]}" \
  >/dev/null 2>"$tmp/b_l.err" || fail "luaretry like-for-like failed: $(tail -3 "$tmp/b_l.err")"
b_l_req=$(requests_seen) b_l_ok=$(lr_ok "$tmp/b_l.err")
reset_server
timed b_s_secs "$BIN" run "$POLICY" --urls "$tmp/t.txt" "${BATCH[@]}" "${SHORT[@]}" \
  >/dev/null 2>"$tmp/b_s.err" || fail "luaretry short waits failed: $(tail -3 "$tmp/b_s.err")"
b_s_req=$(requests_seen) b_s_ok=$(lr_ok "$tmp/b_s.err")
reset_server
timed b_o_secs "$BIN" run "$POLICY" --urls "$tmp/ok.txt" "${BATCH[@]}" \
  >/dev/null 2>"$tmp/b_o.err" || fail "luaretry, all 200, failed"
b_o_req=$(requests_seen) b_o_ok=$(lr_ok "$tmp/b_o.err")
for ok in "$b_l_ok" "$b_s_ok" "$b_o_ok"; do
  [ "$ok" = "$N_B" ] || fail "a luaretry run of (b) had $ok of $N_B URLs succeed"
done
b_c_secs=0 b_c_req=skip b_c_ok=0 b_co_secs=0 b_co_req=skip b_co_ok=0
if [ -n "$CURL" ]; then
  curl_config "$tmp/t.cfg" t "$N_B"
  curl_config "$tmp/ok.cfg" ok "$N_B" null
  reset_server
  timed b_c_secs "$CURL" -s --parallel --parallel-max 16 --retry 5 -w '%{http_code}\n' \
    -K "$tmp/t.cfg" >"$tmp/b_c.out" 2>/dev/null || fail "curl --retry 5 failed"
  b_c_req=$(requests_seen) b_c_ok=$(curl_ok "$tmp/b_c.out")
  reset_server
  timed b_co_secs "$CURL" -s --parallel --parallel-max 16 -w '%{http_code}\n' \
    -K "$tmp/ok.cfg" >"$tmp/b_co.out" 2>/dev/null || fail "curl, all 200, failed"
  b_co_req=$(requests_seen) b_co_ok=$(curl_ok "$tmp/b_co.out")
fi

cpus=$(nproc 2>/dev/null || echo "?")
curl_name=none
[ -n "$CURL" ] && curl_name=$("$CURL" --version | head -n 1 | cut -d' ' -f1-2)

awk -v n_out="$N_OUT" -v cpus="$cpus" -v curl="$curl_name" -v bin="$BIN" \
    -v a_b_req="$a_b_req" -v a_b_secs="$a_b_secs" -v a_b_rc="$a_b_rc" \
    -v a_n_req="$a_n_req" -v a_n_secs="$a_n_secs" -v a_n_rc="$a_n_rc" \
    -v a_c_req="$a_c_req" -v a_c_secs="$a_c_secs" -v a_c_rc="$a_c_rc" \
    -v n_b="$N_B" -v deadline="$DEADLINE" \
    -v b_l_secs="$b_l_secs" -v b_l_req="$b_l_req" -v b_l_ok="$b_l_ok" \
    -v b_s_secs="$b_s_secs" -v b_s_req="$b_s_req" -v b_s_ok="$b_s_ok" \
    -v b_o_secs="$b_o_secs" -v b_o_req="$b_o_req" -v b_o_ok="$b_o_ok" \
    -v b_c_secs="$b_c_secs" -v b_c_req="$b_c_req" -v b_c_ok="$b_c_ok" \
    -v b_co_secs="$b_co_secs" -v b_co_req="$b_co_req" -v b_co_ok="$b_co_ok" 'BEGIN {
  printf "luaretry batch: %s vs %s, against the fault server on 127.0.0.1, %s CPUs\n\n", bin, curl, cpus
  printf "(a) outage: %d URLs at once, always 503, policies/http.lua with deadline=%s\n", n_out, deadline
  printf "%-50s %9s %7s %9s %10s %8s %5s\n", "row", "requests", "first", "req/first", "target", "wall", "exit"
  r = a_b_req / n_out
  printf "%-50s %9d %7d %9.2f %10s %6.2f s %5s\n", "luaretry --parallel-max 50, budget 10 / 0.1", a_b_req, n_out, r, (r <= 1.1 ? "<= 1.1 ok" : "<= 1.1 MISSED"), a_b_secs, a_b_rc
  printf "%-50s %9d %7d %9.2f %10s %6.2f s %5s\n", "luaretry --parallel-max 50, no budget", a_n_req, n_out, a_n_req / n_out, "", a_n_secs, a_n_rc
  if (a_c_req == "skip") printf "%-50s %9s\n", "curl --parallel --retry 3 (baseline)", "skipped: no curl"
  else printf "%-50s %9d %7d %9.2f %10s %6.2f s %5s\n", "curl --parallel --retry 3 (baseline)", a_c_req, n_out, a_c_req / n_out, "", a_c_secs, a_c_rc
  printf "\n(b) throughput: %d URLs, 503 on 30%% of attempts (at most 3 in a row), 16 transfers at once\n", n_b
  printf "%-50s %8s %9s %6s %10s\n", "row", "wall", "requests", "ok", "vs curl"
  if (b_c_req == "skip") {
    printf "%-50s %s\n", "curl --parallel-max 16 --retry 5 (baseline)", "skipped: no curl"
    b_c_secs = 0; b_co_secs = 0
  } else printf "%-50s %6.2f s %9d %6d %10s\n", "curl --parallel-max 16 --retry 5 (baseline)", b_c_secs, b_c_req, b_c_ok, "1.00x"
  vs = b_c_secs > 0 ? sprintf("%.2fx", b_l_secs / b_c_secs) : "-"
  printf "%-50s %6.2f s %9d %6d %10s\n", "luaretry, curl'\''s waits (1 s doubling, no jitter)", b_l_secs, b_l_req, b_l_ok, vs
  vs = b_c_secs > 0 ? sprintf("%.2fx", b_s_secs / b_c_secs) : "-"
  printf "%-50s %6.2f s %9d %6d %10s\n", "luaretry, short waits (0.05 s, jitter 0.05)", b_s_secs, b_s_req, b_s_ok, vs
  printf "no 503 (%d x 200), the transfers alone:\n", n_b
  if (b_co_req != "skip") printf "%-50s %6.2f s %9d %6d %10s\n", "  curl --parallel-max 16 (baseline)", b_co_secs, b_co_req, b_co_ok, "1.00x"
  vs = b_co_secs > 0 ? sprintf("%.2fx", b_o_secs / b_co_secs) : "-"
  printf "%-50s %6.2f s %9d %6d %10s\n", "  luaretry --parallel-max 16", b_o_secs, b_o_req, b_o_ok, vs
}'
