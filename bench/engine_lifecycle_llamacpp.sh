#!/usr/bin/env bash
# One engine per configuration against a cold engine per run, on the real llama.cpp server here
# (SmolLM2-135M Q4_1 on 2 CPU threads, 4 slots): a ladder of concurrency 1, 2, 4, REPEATS repeats,
# each lifecycle once. Prints, per level, the TTFT and TPOT medians under each lifecycle (the
# median over the repeats), the run-to-run noise (the largest spread of one level's repeats
# within one lifecycle, over their median), the difference between the two lifecycles with its
# 90% bootstrap interval (the repeats of each lifecycle resampled: a level's median can be
# bimodal run to run, see bench/README.md, and then the spread of a few repeats says little),
# and each kept engine's cache state (`reset` = the reset verified: a prompt repeated after it
# hit nothing).
#
# Usage: bench/engine_lifecycle_llamacpp.sh [build_dir=build]
# Env: MODEL (default /opt/servesweep-engines/models/SmolLM2-135M-Instruct.Q4_1.gguf),
#      REPEATS (default 3; 8 took 401 and 412 s for the two lifecycles here).
set -euo pipefail

BUILD=${1:-build}
SERVESWEEP=${SERVESWEEP:-$BUILD/servesweep}
MODEL=${MODEL:-/opt/servesweep-engines/models/SmolLM2-135M-Instruct.Q4_1.gguf}
BENCH_NAME=engine_lifecycle_llamacpp
REPEATS=${REPEATS:-3}
[ -x "$SERVESWEEP" ] || { echo "$BENCH_NAME: $SERVESWEEP not built" >&2; exit 1; }
[ -f "$MODEL" ] || { echo "$BENCH_NAME: no model at $MODEL (scripts/install-engines.sh)" >&2; exit 1; }
source "$(dirname "$0")/lib.sh"

for lifecycle in per_run per_configuration; do
  cat >"$tmp/$lifecycle.yaml" <<YAML
name: llamacpp-$lifecycle
engine: llamacpp
model: smollm2
engine_lifecycle: $lifecycle
engine_config: {model_path: $MODEL, threads: 2, context_len: 4096, max_num_seqs: 4}
workload: {api: completions, prompt: token_ids, input_len: 64, output_len: 32, num_requests: 32,
           warmup_requests: 4, ignore_eos: true, seed: 5}
timeout_s: 300
max_attempts: 1
local: {agents: 1, gpus_per_agent: 1}
repeats: $REPEATS
axes:
  concurrency: [1, 2, 4]
YAML
  start=$(date +%s.%N)
  "$SERVESWEEP" run "$tmp/$lifecycle.yaml" --out "$tmp/$lifecycle" --progress off \
    >"$tmp/$lifecycle.log" 2>&1 || { tail -30 "$tmp/$lifecycle.log" >&2; exit 1; }
  echo "$lifecycle: $(python3 -c "import time; print(f'{time.time() - $start:.0f}')") s wall"
done

python3 - "$tmp/per_run/results.db" "$tmp/per_configuration/results.db" <<'PY'
import random, sqlite3, statistics, sys
def read(path):
    db = sqlite3.connect(path)
    out = {}
    for c, ttft, tpot, state, engine in db.execute(
            "SELECT concurrency, ttft_median_ms, tpot_median_ms, cache_state, engine_id "
            "FROM results WHERE result_status = 'ok' ORDER BY concurrency"):
        out.setdefault(c, []).append((ttft, tpot, state, engine))
    return out
cold, kept = read(sys.argv[1]), read(sys.argv[2])
def med(rows, i): return statistics.median(r[i] for r in rows)
def spread(rows, i): return (max(r[i] for r in rows) - min(r[i] for r in rows)) / med(rows, i)
def interval(a, b, i, draws=4000):
    # 90% bootstrap interval of med(b) / med(a) - 1, each side's repeats resampled.
    rng = random.Random(7)
    d = sorted(med(rng.choices(b, k=len(b)), i) / med(rng.choices(a, k=len(a)), i) - 1
               for _ in range(draws))
    return d[int(0.05 * draws)], d[int(0.95 * draws)]
print("level | TTFT p50 ms cold / kept | TPOT p50 ms cold / kept | noise TTFT, TPOT | "
      "kept - cold TTFT [90%], TPOT [90%] | within")
for c in sorted(cold):
    noise = [max(spread(cold[c], i), spread(kept[c], i)) for i in (0, 1)]
    diff = [med(kept[c], i) / med(cold[c], i) - 1 for i in (0, 1)]
    ci = [interval(cold[c], kept[c], i) for i in (0, 1)]
    same = all(lo <= 0 <= hi for lo, hi in ci)
    print(f"c={c} | {med(cold[c], 0):.1f} / {med(kept[c], 0):.1f} | {med(cold[c], 1):.2f} / "
          f"{med(kept[c], 1):.2f} | {100 * noise[0]:.1f}%, {100 * noise[1]:.1f}% | "
          + ", ".join(f"{100 * diff[i]:+.1f}% [{100 * ci[i][0]:+.1f}, {100 * ci[i][1]:+.1f}]"
                      for i in (0, 1))
          + f" | {'yes' if same else 'no'}")
    print("    TTFT p50 of each repeat, ms: cold " + " ".join(f"{r[0]:.0f}" for r in cold[c])
          + "; kept " + " ".join(f"{r[0]:.0f}" for r in kept[c]))
states = [r[2] for rows in kept.values() for r in rows]
engines = {r[3] for rows in kept.values() for r in rows}
print(f"kept: {len(engines)} engine(s) for {len(states)} runs; cache states: "
      + ", ".join(f"{s} x{states.count(s)}" for s in sorted(set(states))))
PY
