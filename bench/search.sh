#!/usr/bin/env bash
# `servesweep search` against the exhaustive sweep of the same space (issue #25's bars), on the
# emulator served by the performance model with a hidden "true" engine profile (slower weight
# reads, a dearer all-reduce and CPU step than the shipped default the search's model starts
# from). 4 layouts x 6 batch limits = 24 configurations of Llama-3.1-8B on emulated H200s, one
# agent with 4 GPUs (runs one at a time, so GPU-seconds are each run's attempt x its GPUs).
#
#   exhaustive  `servesweep run` at 8 concurrency levels per configuration (192 runs): its
#               GPU-seconds, and its winner (the best output tok/s per GPU among the levels
#               meeting the SLO)
#   fine truth  the true limit of every configuration: the model given the true profile,
#               searched to 1% (--predict-only; the emulator follows its model within 2%)
#   search A    the model starts from the default profile, with a band wide enough for its error;
#               as searches run by default, the profile fitted again on the counted runs after
#               every round
#   search B    the model's profile is the truth's, with a narrow band
#   search C    as A with --no-learn: the first model and its band alone
# Prints per search: its winner (against the exhaustive and the fine one), the limit against the
# fine truth's, GPU-seconds and their share of the exhaustive sweep's, real runs and rounds; then
# the search's own CPU time per round (its bookkeeping and the model's predictions), from a
# --predict-only search of the same space, next to a real run's mean attempt.
#
# Usage: bench/search.sh [build_dir=build]
# Env: SERVESWEEP (default BUILD/servesweep), STARTUP_MS (500: the emulator's cold start).
set -euo pipefail

BUILD=${1:-build}
SERVESWEEP=${SERVESWEEP:-$BUILD/servesweep}
STARTUP_MS=${STARTUP_MS:-500}
BENCH_NAME=search
[ -x "$SERVESWEEP" ] || { echo "search: $SERVESWEEP not built" >&2; exit 1; }
source "$(dirname "$0")/lib.sh"
src=$(cd "$(dirname "$0")/.." && pwd)

sed -e 's/^name: default/name: truth/' \
    -e 's/weight_read_efficiency: 0.85/weight_read_efficiency: 0.55/' \
    -e 's/allreduce_us: 8 /allreduce_us: 80 /' \
    -e 's/step_us: 400/step_us: 900/' "$src/profiles/engines/default.yaml" >"$tmp/truth.yaml"
cat >"$tmp/wide.yaml" <<'YAML'
measured_by: "bench/search.sh: wide enough for the default profile's error on the truth"
measured_at: 2026-12-04
bands:
  - {kind: uncalibrated, low_pct: -30, high_pct: 60, figures: 30, cases: 3}
YAML
cat >"$tmp/narrow.yaml" <<'YAML'
measured_by: "bench/search.sh: the model is the truth"
measured_at: 2026-12-04
bands:
  - {kind: uncalibrated, low_pct: -5, high_pct: 5, figures: 30, cases: 3}
YAML

matrix() {  # precision
  cat <<YAML
name: searchbench
engine: sim
model: meta-llama/Llama-3.1-8B-Instruct
engine_flags: [--engine-profile, $tmp/truth.yaml]
sim: {hardware: h200, startup_ms: $STARTUP_MS}
workload: {api: completions, input_len: 256, output_len: 32, num_requests: 24, warmup_requests: 0, seed: 3}
local: {agents: 1, gpus_per_agent: 4}
axes:
  layout: [{tp: 1}, {tp: 2}, {tp: 4}, {tp: 1, dp: 2}]
  engine_config: [{max_num_seqs: 4}, {max_num_seqs: 8}, {max_num_seqs: 16}, {max_num_seqs: 32}, {max_num_seqs: 64}, {max_num_seqs: 256}]
zip:
  # The exhaustive grid's 8 levels, each as long as the search's level of it: max(24, 3 x level).
  - concurrency: [1, 2, 4, 8, 16, 32, 64, 128]
    num_requests: [24, 24, 24, 24, 48, 96, 192, 384]
search:
  objective: max_output_tok_per_s_per_gpu
  constraints:
    tpot_median_ms: {max: 9}
    ttft_p90_ms: {max: 1000}
  load: {knob: concurrency, min: 1, max: 128}
  precision: $1
  boundary_repeats: 2
  noise_pct: 2
  requests_per_level: 3
YAML
}
matrix 0.05 >"$tmp/m.yaml"
matrix 0.01 >"$tmp/fine.yaml"

# --no-learn: the truth's own model for every configuration (learning would fit it to its own
# predictions and prune with the fit's band, leaving pruned configurations without a limit).
"$SERVESWEEP" search "$tmp/fine.yaml" --predict-only --no-learn --engine-profile "$tmp/truth.yaml" \
  --out "$tmp/fine" --progress off >/dev/null
start=$(date +%s.%N)
"$SERVESWEEP" run "$tmp/m.yaml" --out "$tmp/exhaustive" --progress off >/dev/null
exhaustive_wall=$(echo "$(date +%s.%N) - $start" | bc)
"$SERVESWEEP" search "$tmp/m.yaml" --error-bands "$tmp/wide.yaml" --out "$tmp/a" \
  --progress off >/dev/null
"$SERVESWEEP" search "$tmp/m.yaml" --error-bands "$tmp/wide.yaml" --no-learn --out "$tmp/c" \
  --progress off >/dev/null
"$SERVESWEEP" search "$tmp/m.yaml" --engine-profile "$tmp/truth.yaml" \
  --error-bands "$tmp/narrow.yaml" --out "$tmp/b" --progress off >/dev/null
/usr/bin/time -f "%U %S" -o "$tmp/cpu" "$SERVESWEEP" search "$tmp/m.yaml" --predict-only \
  --error-bands "$tmp/wide.yaml" --no-learn --out "$tmp/p" --progress off >/dev/null
/usr/bin/time -f "%U %S" -o "$tmp/cpu-learn" "$SERVESWEEP" search "$tmp/m.yaml" --predict-only \
  --error-bands "$tmp/wide.yaml" --out "$tmp/pl" --progress off >/dev/null

python3 - "$tmp" "$exhaustive_wall" <<'PY'
import json, sqlite3, sys
tmp, wall = sys.argv[1], float(sys.argv[2])
db = sqlite3.connect(f"{tmp}/exhaustive/results.db")
rows = db.execute("SELECT runs.label, gpu_count, attempt_s, tpot_median_ms, ttft_p90_ms, "
                  "output_throughput_per_gpu FROM results JOIN runs USING(run_id) "
                  "WHERE result_status = 'ok'").fetchall()
gpu_s = sum(r[1] * r[2] for r in rows)
meeting = [r for r in rows if r[3] <= 9 and r[4] <= 1000]
best = max(meeting, key=lambda r: r[5])
load_keys = ("concurrency=", "num_requests=")
config = lambda label: " ".join(w for w in label.split() if not w.startswith(load_keys))
fine = json.load(open(f"{tmp}/fine/search.json"))
true_of = {c["label"]: c for c in fine["configurations"]}
fine_winner = fine["configurations"][fine["winner"]]
fine_best = fine_winner["objective"]
grid_best = true_of[config(best[0])]["objective"]
print(f"exhaustive: {len(rows)} runs, {gpu_s:.1f} GPU-s ({wall:.0f} s wall); winner "
      f"{config(best[0])} at {best[0].split('concurrency=')[1].split()[0]}: {best[5]:.1f} tok/s/GPU "
      f"measured; at its true limit {grid_best:.1f} ({(grid_best / fine_best - 1) * 100:+.1f}% of "
      f"the true best)")
print(f"fine truth: winner {fine_winner['label']} limit {fine_winner['limit']} "
      f"({fine_best:.1f} tok/s/GPU)")
for name in ("a", "b", "c"):
    s = json.load(open(f"{tmp}/{name}/search.json"))
    w = s["configurations"][s["winner"]] if s["winner"] is not None else None
    label = w["label"] if w else "none"
    truth = true_of.get(label, {})
    true_limit = truth.get("limit") or float("nan")
    pruned = sum(c["status"] == "pruned" for c in s["configurations"])
    print(f"search {name}: winner {label} (the exhaustive's: {label == config(best[0])}; "
          f"its true objective {truth.get('objective', float('nan')):.1f} = "
          f"{(truth.get('objective', float('nan')) / fine_best - 1) * 100:+.1f}% of the true best); "
          f"limit {w['limit'] if w else None} vs true {true_limit} "
          f"({(w['limit'] / true_limit - 1) * 100 if w else float('nan'):+.1f}%); "
          f"{s['real_runs']} runs in {s['rounds']} rounds, {pruned} pruned; {s['gpu_s']:.1f} GPU-s = "
          f"{100 * s['gpu_s'] / gpu_s:.1f}% of the exhaustive sweep's")
mean_attempt = sum(r[2] for r in rows) / len(rows)
for cpu, out, what in (("cpu", "p", " with --no-learn"), ("cpu-learn", "pl", " with learning's fits")):
    user, system = map(float, open(f"{tmp}/{cpu}").read().split())
    p = json.load(open(f"{tmp}/{out}/search.json"))
    print(f"bookkeeping{what}: {1000 * (user + system) / max(p['rounds'], 1):.1f} ms CPU per "
          f"round (--predict-only, {p['rounds']} rounds, predictions included) vs a real run's "
          f"mean attempt of {mean_attempt:.2f} s")
a = json.load(open(f"{tmp}/a/search.json"))
by_round = {}
for s in a["steps"]:
    if s["counted"] and s["objective"] and s["predicted_objective"] is not None:
        by_round.setdefault(s["model_generation"], []).append(
            abs(s["predicted_objective"] / s["objective"] - 1))
med = lambda v: sorted(v)[len(v) // 2]
print("search a's model error by model: " + ", ".join(
    f"model {g}: {100 * med(v):.1f}% over {len(v)} runs" for g, v in sorted(by_round.items())))
PY
