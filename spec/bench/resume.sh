#!/usr/bin/env bash
# spec/bench/resume.sh: a download that breaks, resumed.  A RESUME_MB MiB
# file (default 512) from the fault server, which resets the connection
# after every RESUME_CUT_MB MiB (default 64) of an answer's body;
# `luaretry run http -o FILE` must end with the whole file, checked byte for
# byte.  The figure: bytes the server sent / file size (goal <= 1.05;
# without resume the call cannot finish: every attempt would stop at the
# first cut).  Also: attempts, wall time, and the same file unbroken as a
# baseline.  Uses LUARETRY_BIN if set (default build/luaretry).
set -u
export LC_ALL=C
cd "$(dirname "$0")/../.." || exit 1

BIN=${LUARETRY_BIN:-build/luaretry}
MB=${RESUME_MB:-512}
CUT=${RESUME_CUT_MB:-64}
[ -x "$BIN" ] || { echo "resume: $BIN not built (make all)" >&2; exit 1; }

. spec/bench/fault_server.sh
# the sizes reach the script as globals set before it
printf 'RESUME_MB = %s\nRESUME_CUT_MB = %s\n' "$MB" "$CUT" > "$tmp/server.lua"
cat spec/bench/resume_server.lua >> "$tmp/server.lua"
start_fault_server resume "$tmp/server.lua"

now_us() { local t=$EPOCHREALTIME; echo $(( ${t/./} )); }
stat_bytes() { curl -s "$BASE/_faults/stats" | sed -n 's/.*"file_bytes":\([0-9]*\).*/\1/p'; }

# The expected content, made once by the fault server itself (unbroken).
printf 'RESUME_MB = %s\nRESUME_CUT_MB = %s\n' "$MB" "$((MB + 1))" > "$tmp/whole.lua"
cat spec/bench/resume_server.lua >> "$tmp/whole.lua"

size=$((MB * 1024 * 1024))
t0=$(now_us)
"$BIN" run http -s -o "$tmp/file.bin" --set max_attempts=$((MB / CUT + 4)) \
  --set backoff.initial=0.01 --set backoff.jitter_max=0.01 --seed 1 \
  --log-json "$tmp/log.json" "$BASE/file.bin"
rc=$?
t1=$(now_us)
sent=$(stat_bytes)
attempts=$(grep -c '"verdict":"retry"' "$tmp/log.json" || true)
attempts=$((attempts + 1))  # the retried ones, and the last
got=$(stat -c %s "$tmp/file.bin" 2>/dev/null || echo 0)

# the same bytes unbroken, from a second server, for the check and a baseline
kill "$server_pid"; wait "$server_pid" 2>/dev/null; server_pid=
start_fault_server resume "$tmp/whole.lua"
t2=$(now_us)
"$BIN" run http -s -o "$tmp/whole.bin" "$BASE/file.bin"
t3=$(now_us)
same=no
cmp -s "$tmp/file.bin" "$tmp/whole.bin" && same=yes
rm -f "$tmp/whole.bin"

echo "== resume: a ${MB} MiB file, the connection reset every ${CUT} MiB"
printf '%-34s %s\n' "exit status" "$rc"
printf '%-34s %s (%s bytes of %s)\n' "whole file, byte for byte" "$same" "$got" "$size"
printf '%-34s %s\n' "attempts" "$attempts"
printf '%-34s %s\n' "bytes sent by the server" "$sent"
awk -v s="$sent" -v n="$size" 'BEGIN { printf "%-34s %.4f (goal <= 1.05)\n", "sent / file size", s / n }'
awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" \
  'BEGIN { printf "%-34s %.2f s (unbroken: %.2f s)\n", "wall time", (b - a) / 1e6, (d - c) / 1e6 }'
[ "$rc" = 0 ] && [ "$same" = yes ] && [ "$got" = "$size" ]
