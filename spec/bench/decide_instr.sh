#!/bin/sh
# decide_instr.sh: bench_decide's retrying decisions counted in
# instructions (spec/bench/README.md, "decide"): for each row, callgrind
# counts engine_retrying (report a 503, wait, next), within it
# engine_report (the report alone), and bare_decision (a bare lua_pcall of
# the same is_transient), each in a run of its own of N cycles
# (--toggle-collect; the warm-up goes through other functions).
#
#   sh spec/bench/decide_instr.sh [N]     (default 20000)
#   BENCH_DECIDE=path/to/bench_decide     (default build/bench_decide)
set -eu
n=${1:-20000}
bin=${BENCH_DECIDE:-build/bench_decide}
command -v valgrind >/dev/null || { echo "decide_instr: skipped: no valgrind"; exit 0; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT INT TERM

# Inclusive instructions per cycle of each function named, from one run
# collecting only within $2: "name count" lines.
count() {
  valgrind --tool=callgrind --callgrind-out-file="$out/cg" --toggle-collect="$2" \
    "$bin" --instructions "$1" "$n" 2>/dev/null | tail -n 1 > "$out/label"
  callgrind_annotate --inclusive=yes "$out/cg" 2>/dev/null |
    awk -v n="$n" 'match($0, /:(engine_retrying|engine_report|bare_decision|bare_push_body|lua_pcallk|lua_pushlstring) \[/) {
      name = substr($0, RSTART + 1, RLENGTH - 3); gsub(",", "", $1); printf "%s %.0f\n", name, $1 / n }'
}

# "report" is luaretry_call_report alone (the verdict: judge, guards,
# backoff), "+ next" the whole step (report, wait, next) as a host makes it.
# "push" is what the baseline's lua_pushlstring of the body costs within
# "bare" (bare_push_body): a new string every call, which the engine makes
# only for a new body to a classifier that reads it.  "room" is what the
# row's target leaves the engine for its own work (its guards, backoff,
# counters, the step API, and the glue around the script: a borrowed
# state, the sandbox's limits, the proxy `info`) beyond Lua's own work in
# the bare call: target x bare, less the bare call's lua_pcall and the
# engine's body string (when it makes one).  Rows (b) and (f) are that own
# work alone, with a C classifier: with the guards on, and off.
printf '%-40s %7s %7s %7s %7s %6s %5s %6s %6s\n' "instructions per retrying decision" report ratio \
  "+ next" ratio bare push target room
row=0
while [ "$row" -le 7 ]; do
  engine=$(count "$row" engine_retrying)
  label=$(cut -f 1 "$out/label")
  target=$(cut -f 2 "$out/label")
  bare=""
  case "$row" in [0-4] | 6) bare=$(count "$row" bare_decision) ;; esac
  { echo "$engine" | sed 's/^/engine /'; echo "$bare" | sed 's/^/bare /'; } |
    awk -v label="$label" -v target="$target" '
      $2 == "engine_retrying" { e = $3 } $2 == "engine_report" { r = $3 }
      $2 == "bare_decision" { b = $3 } $2 == "bare_push_body" { p = $3 }
      $1 == "bare" && $2 == "lua_pcallk" { pcall_b = $3 }
      $1 == "engine" && $2 == "lua_pushlstring" { string_e = $3 }
      END {
        if (!(e > 0 && r > 0)) { print "decide_instr: nothing counted: " label > "/dev/stderr"; exit 1 }
        if (b > 0 && target > 0)
          printf "%-40s %7.0f %6.2fx %7.0f %6.2fx %6.0f %5.0f %5.2fx %6.0f\n", label, r, r / b, e, e / b, b, p,
            target, target * b - pcall_b - string_e
        else if (b > 0)
          printf "%-40s %7.0f %6.2fx %7.0f %6.2fx %6.0f %5.0f\n", label, r, r / b, e, e / b, b, p
        else printf "%-40s %7.0f %7s %7.0f\n", label, r, "", e
      }'
  row=$((row + 1))
done
