#!/bin/sh
# decide_instr.sh: bench_decide's retrying decisions counted in
# instructions (spec/bench/README.md, "decide"): for each row, callgrind
# counts engine_retrying (report a 503, wait, next), within it
# engine_report (the report alone), and bare_decision (a
# bare lua_pcall of the same is_transient) with --toggle-collect, in one
# run of N cycles each (the warm-up goes through other functions).
#
#   sh spec/bench/decide_instr.sh [N]     (default 20000)
#   BENCH_DECIDE=path/to/bench_decide     (default build/bench_decide)
set -eu
n=${1:-20000}
bin=${BENCH_DECIDE:-build/bench_decide}
command -v valgrind >/dev/null || { echo "decide_instr: skipped: no valgrind"; exit 0; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT INT TERM
# "report" is luaretry_call_report alone (the verdict: judge, guards,
# backoff), "+ next" the whole step (report, wait, next) as a host makes it.
# "push" is what the baseline's lua_pushlstring of the body costs within
# "bare" (bare_push_body): a new string every call, which the engine makes
# only for a new body to a classifier that reads it (the "same body" rows'
# engine makes none).
printf '%-42s %10s %8s %10s %8s %10s %8s\n' "instructions per retrying decision" report ratio \
  "+ next" ratio bare push
row=0
while [ "$row" -le 6 ]; do
  label=$(valgrind --tool=callgrind --callgrind-out-file="$out/cg" \
    --toggle-collect=engine_retrying --toggle-collect=bare_decision \
    "$bin" --instructions "$row" "$n" 2>/dev/null | tail -n 1)
  callgrind_annotate --inclusive=yes "$out/cg" 2>/dev/null |
    awk -v n="$n" -v label="$label" '
      /:engine_retrying \[/ { gsub(",", "", $1); e = $1 / n }
      /:engine_report \[/ { gsub(",", "", $1); r = $1 / n }
      /:bare_decision \[/ { gsub(",", "", $1); b = $1 / n }
      /:bare_push_body \[/ { gsub(",", "", $1); p = $1 / n }
      END {
        if (b > 0) printf "%-42s %10.0f %7.2fx %10.0f %7.2fx %10.0f %8.0f\n", label, r, r / b, e, e / b, b, p
        else printf "%-42s %10.0f %8s %10.0f\n", label, r, "", e
      }'
  row=$((row + 1))
done
