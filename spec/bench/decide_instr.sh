#!/bin/sh
# decide_instr.sh: bench_decide's retrying decisions counted in
# instructions (spec/bench/README.md, "decide"): for each row, callgrind
# counts engine_retrying (report a 503, wait, next) and bare_decision (a
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
printf '%-42s %10s %10s %8s\n' "instructions per retrying decision" luaretry bare ratio
row=0
while [ "$row" -le 6 ]; do
  label=$(valgrind --tool=callgrind --callgrind-out-file="$out/cg" \
    --toggle-collect=engine_retrying --toggle-collect=bare_decision \
    "$bin" --instructions "$row" "$n" 2>/dev/null | tail -n 1)
  callgrind_annotate --inclusive=yes "$out/cg" 2>/dev/null |
    awk -v n="$n" -v label="$label" '
      /:engine_retrying \[/ { gsub(",", "", $1); e = $1 / n }
      /:bare_decision \[/ { gsub(",", "", $1); b = $1 / n }
      END {
        if (b > 0) printf "%-42s %10.0f %10.0f %7.2fx\n", label, e, b, e / b
        else printf "%-42s %10.0f\n", label, e
      }'
  row=$((row + 1))
done
