#!/bin/bash
# Builds the libFuzzer targets (fuzz/) with clang, ASan and UBSan in build-fuzz/ and fuzzes each
# for a bounded time, starting from its seed corpus. A crash leaves its input in
# build-fuzz/fuzz-out/crashes/ and fails the script: fix the bug, then copy the input into
# fuzz/regressions/<target>/ so every build replays it (ctest fuzz_replay_<target>).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET (default 20)] [TARGET...]
#   FUZZ_JOBS=2 scripts/fuzz.sh 60 matrix
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(envelope sse stream prometheus matrix trace)
build=${FUZZ_BUILD_DIR:-build-fuzz}

if ! command -v clang++ > /dev/null; then
  echo "fuzz.sh: clang++ not found; scripts/install-deps.sh installs it" >&2
  exit 1
fi
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DSERVESWEEP_FUZZ=ON \
  -DSERVESWEEP_BUILD_TESTS=OFF -DSERVESWEEP_BUILD_BENCH=OFF > /dev/null
cmake --build "$build" -j"${FUZZ_BUILD_JOBS:-2}" --target "${targets[@]/%/_fuzz}"

out="$build/fuzz-out"
mkdir -p "$out/crashes"
failed=()
for target in "${targets[@]}"; do
  mkdir -p "$out/corpus/$target"
  echo "== $target: ${seconds} s"
  inputs=("$out/corpus/$target" "fuzz/corpus/$target")
  [ -d "fuzz/regressions/$target" ] && inputs+=("fuzz/regressions/$target")
  # New inputs go to the scratch corpus (the first folder), never into the source tree.
  if ! "$build/fuzz/${target}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="$out/crashes/$target-" \
      "${inputs[@]}" 2>&1 | tail -n 25; then
    failed+=("$target")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: crashes in: ${failed[*]} (inputs in $out/crashes)" >&2
  exit 1
fi
echo "fuzz.sh: no crash in ${targets[*]} (${seconds} s each)"
