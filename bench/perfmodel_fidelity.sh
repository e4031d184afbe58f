#!/bin/sh
# The performance model's bars (issue 16), in one go, from the repository root after a build:
#   bench/perfmodel_fidelity.sh [build] [old-servesweep]
# 1. CPU time of a 1,000-request virtual run and of a 100-run matrix (build/bench/virtual_run_bench,
#    plan --simulate's own path), and of the bare model (build/bench/perfmodel_bench);
# 2. the published cases' errors after calibration (the shipped profiles) and their medians
#    (`servesweep calibrate --published tests/fidelity/published.yaml`);
# 3. the uncalibrated pair (vllm-ci-h200-latency: no profile was fitted to H200 dense points),
#    with the default profile, and, given an older servesweep binary (one built at a47d563,
#    before engine profiles), the same points through it (bench/perfmodel_fidelity_compare.py);
# 4. the llama.cpp held-out figures of the last fidelity test run, when it left them
#    (build/test-artifacts/fidelity/llamacpp-calibration.json; ctest -R LlamacppFidelity).
# Figures go into the issue note and docs/perfmodel.md; nothing here is asserted.
set -eu
B=${1:-build}
OLD=${2:-}
T=tests/fidelity/published.yaml

echo "== CPU time: plan --simulate path (1,000-request run; 100-run matrix)"
"$B/bench/virtual_run_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
echo "== CPU time: bare model (SimulateWorkload, 1,000 requests)"
"$B/bench/perfmodel_bench" --benchmark_filter='ClosedLoop|OpenLoop'

echo "== published cases, shipped (calibrated) profiles"
"$B/servesweep" calibrate --published $T | grep -E '^(case|all bounded|median)'

echo "== uncalibrated pair, default profile (vllm-ci-h200-latency)"
"$B/servesweep" calibrate --published $T --engine-profile default |
  grep -E '^(vllm-ci-h200-latency|case vllm-ci-h200-latency)'
if [ -n "$OLD" ]; then
  echo "== the same points through $OLD (the model before engine profiles)"
  python3 bench/perfmodel_fidelity_compare.py --servesweep "$OLD" --table $T
fi

J=$B/test-artifacts/fidelity/llamacpp-calibration.json
if [ -f "$J" ]; then
  echo "== llama.cpp (last ctest -R LlamacppFidelity run)"
  python3 - "$J" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
for p in r["points"]:
    tag = "held out" if p["held_out"] else "fitted"
    print(f"  {p['point']:<44} {p['metric']:<18} {p['measured']:>9.4g} {p['predicted']:>9.4g} "
          f"{p['error'] * 100:+6.1f}%  {tag}")
print(f"fitted median |error| {r['median_abs_error'] * 100:.1f}%; "
      f"held out {r['held_out_median_abs_error'] * 100:.1f}%")
EOF
  # How far the machine let the measurement repeat itself: the issue's 15% is judged on a run
  # whose repeats agree (a few %); the test's bar widens by half this spread.
  S=$B/test-artifacts/fidelity/llamacpp-repeat-spread.txt
  if [ -f "$S" ]; then
    python3 -c "import sys; print(f'repeats {float(open(sys.argv[1]).read()) * 100:.1f}% apart at the median')" "$S"
  fi
fi
