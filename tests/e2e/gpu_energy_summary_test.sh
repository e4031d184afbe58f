#!/usr/bin/env bash
# scripts/gpu-energy-summary.py (the device check's energy): the counters' joules over the window
# against the power samples' mean, at its edges: agreeing within 10% (exit 0), 20% apart (exit 1),
# a GPU without a counter or samples (named, and exit 2 when nothing is left to compare).
set -euo pipefail
script="$1/scripts/gpu-energy-summary.py"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

printf '100.0\n0, GPU-a, 1000000\n1, GPU-b, [N/A]\n' >"$dir/before"
printf '110.0\n0, GPU-a, 4000000\n1, GPU-b, [N/A]\n' >"$dir/after"
for _ in $(seq 50); do echo "0, 310.0"; echo "1, 100.0"; done >"$dir/power"
out=$(python3 "$script" "$dir/before" "$dir/after" "$dir/power") || fail "expected exit 0: $out"
grep -q "^  0     3000.0      300.0      310.0       50  0.968  agree$" <<<"$out" || fail "$out"
grep -q "^  1 .*no energy counter$" <<<"$out" || fail "GPU 1 not named: $out"

for _ in $(seq 50); do echo "0, 375.0"; done >"$dir/power"
rc=0; out=$(python3 "$script" "$dir/before" "$dir/after" "$dir/power") || rc=$?
[ "$rc" -eq 1 ] || fail "expected exit 1 at 300 W vs 375 W, got $rc: $out"
grep -q "0.800  DISAGREE$" <<<"$out" || fail "$out"

: >"$dir/power"
rc=0; out=$(python3 "$script" "$dir/before" "$dir/after" "$dir/power") || rc=$?
[ "$rc" -eq 2 ] || fail "expected exit 2 without samples, got $rc: $out"
grep -q "no power samples$" <<<"$out" || fail "$out"
echo "ok"
