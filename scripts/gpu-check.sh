#!/usr/bin/env bash
# Builds the hardware probes on this machine (probes-only build: the CUDA toolkit and CMake,
# nothing else of servesweep's dependencies) and runs them on its GPU(s), then prints a short
# table: HBM GB/s, bf16 and fp8 GEMM TFLOP/s, host<->device GB/s and a one-node NCCL sanity
# check, beside the published H200 figures, and the probes' energy from the GPUs' energy counters
# against their power samples. For the GPU machine; about 2-3 minutes. It reads clocks and
# power with nvidia-smi but never changes a clock or setting.
#
#   scripts/gpu-check.sh            # build into build-gpu/ and run
#   SERVESWEEP_GPU_BUILD=dir scripts/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build="${SERVESWEEP_GPU_BUILD:-build-gpu}"
mkdir -p "$build"

# NCCL and cuBLAS may come as Python wheels (nvidia-nccl-cu13, nvidia-cublas) beside the toolkit.
wheel_dir() {
  python3 -c 'import importlib, sys; print(list(importlib.import_module(sys.argv[1]).__path__)[0])' "$1" 2>/dev/null || true
}
hints=()
nccl_dir=$(wheel_dir nvidia.nccl)
if [ -n "$nccl_dir" ] && [ -f "$nccl_dir/include/nccl.h" ]; then
  hints+=("-DNCCL_INCLUDE_DIR=$nccl_dir/include" "-DNCCL_LIBRARY=$(ls "$nccl_dir"/lib/libnccl.so* | head -n 1)")
  export LD_LIBRARY_PATH="$nccl_dir/lib:${LD_LIBRARY_PATH:-}"
fi
cublas_dir=$(wheel_dir nvidia.cublas)
if [ -n "$cublas_dir" ] && [ -d "$cublas_dir/lib" ]; then
  export LD_LIBRARY_PATH="$cublas_dir/lib:${LD_LIBRARY_PATH:-}"
fi

echo "== build (probes only) =="
cmake -S . -B "$build" -G Ninja -DSERVESWEEP_PROBES_ONLY=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  "${hints[@]}" > "$build/cmake.log" 2>&1 || { tail -20 "$build/cmake.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" > "$build/build.log" 2>&1 || { tail -30 "$build/build.log"; exit 1; }

echo "== GPUs =="
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv,noheader 2>/dev/null || echo "(nvidia-smi not available)"
# The energy counter servesweep reads around each measured phase (docs/results.md#energy).
nvidia-smi --query-gpu=index,uuid,total_energy_consumption --format=csv,noheader,nounits \
  2>&1 || echo "(no energy counter through nvidia-smi)"

echo "== probes =="
# The probes' energy, two ways: the energy counters read just before and after them (as a run's
# measured phase is read), and power.draw sampled every 200 ms meanwhile; they should agree.
energy_query=(--query-gpu=index,uuid,total_energy_consumption --format=csv,noheader,nounits)
nvidia-smi --query-gpu=index,power.draw --format=csv,noheader,nounits -lms 200 \
  > "$build/power.csv" 2>/dev/null &
sampler=$!
{ date +%s.%N; nvidia-smi "${energy_query[@]}"; } > "$build/energy-before.csv" 2>&1 || true
probe_status=0
"$build/servesweep-gpu-probe" --json > "$build/probes.json" || probe_status=$?
nccl_status=0
if [ -x "$build/servesweep-nccl-probe-local" ]; then
  "$build/servesweep-nccl-probe-local" > "$build/nccl.jsonl" || nccl_status=$?
else
  echo '{"probe":"nccl","status":"not built"}' > "$build/nccl.jsonl"
fi
{ date +%s.%N; nvidia-smi "${energy_query[@]}"; } > "$build/energy-after.csv" 2>&1 || true
kill "$sampler" 2>/dev/null || true
wait "$sampler" 2>/dev/null || true
python3 "$(dirname "$0")/gpu-energy-summary.py" "$build/energy-before.csv" \
  "$build/energy-after.csv" "$build/power.csv" || true

summary_status=0
python3 - "$build/probes.json" "$build/nccl.jsonl" <<'PY' || summary_status=$?
import json, sys
report = json.load(open(sys.argv[1]))
nccl = [json.loads(l) for l in open(sys.argv[2]) if l.startswith("{")]
published = {"hbm.copy": 4800, "hbm.triad": 4800, "gemm.bf16": 989, "gemm.fp8": 1979, "h2d": 64, "d2h": 64}
units = {"hbm.copy": "GB/s", "hbm.triad": "GB/s", "gemm.bf16": "TFLOP/s", "gemm.fp8": "TFLOP/s", "h2d": "GB/s", "d2h": "GB/s"}
print(f"device: {', '.join(d['name'] for d in report['devices']) or report['status']} ({report['detail'] or 'ok'})")
print(f"{'figure':<12} {'gpu':>3} {'measured':>10} {'published H200':>15} {'ratio':>6}  verdict     detail")
for f in report["figures"]:
    if f["status"] != "ok":
        print(f"{f['probe']:<12} {f['gpu']:>3} {'-':>10} {'':>15} {'':>6}  {f['status']:<10}  {f['detail']}")
        continue
    pub = published.get(f["probe"], 0)
    ratio = f"{f['value'] / pub:.2f}" if pub else "-"
    print(f"{f['probe']:<12} {f['gpu']:>3} {f['value']:>10.1f} {pub:>9} {units.get(f['probe'], ''):<5} {ratio:>6}  {f['verdict']:<10}  {f['detail']}")
ok = [r for r in nccl if r.get("ok")]
bad = [r for r in nccl if "ok" in r and not r["ok"]]
if not nccl:
    print("nccl: the probe printed nothing (see its error above)")
    bad = [None]
elif "status" in nccl[0]:
    print(f"nccl: {nccl[0]['status']}")
else:
    big = {r["probe"]: r for r in nccl if r["bytes"] == max(x["bytes"] for x in nccl)}
    line = ", ".join(f"{p[5:]} {r['algbw_gbps']:.0f}/{r['busbw_gbps']:.0f}" for p, r in sorted(big.items()))
    print(f"nccl ({nccl[0]['ranks']} rank(s)): {len(ok)} checks correct, {len(bad)} wrong; "
          f"algbw/busbw GB/s at {max(r['bytes'] for r in nccl) >> 20} MiB: {line}")
if report["status"] != "ok":
    print("no GPU here: nothing measured")
    sys.exit(3)
print("healthy" if report.get("healthy") and not bad else "NOT healthy")
PY
[ "$summary_status" -eq 3 ] && exit 3
exit $(( summary_status != 0 || probe_status != 0 || (nccl_status != 0 && nccl_status != 2) ))
