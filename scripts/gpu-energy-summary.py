#!/usr/bin/env python3
"""The energy of scripts/gpu-check.sh's probes, per GPU, measured two ways: the energy counters
(NVML's total energy in mJ, as servesweep reads them around a run's measured phase) read before
and after, and the mean of power.draw sampled every 200 ms meanwhile times the same window.
Agreement within 10% says the counter path measures what the GPU drew (docs/results.md#energy).

Usage: gpu-energy-summary.py ENERGY_BEFORE ENERGY_AFTER POWER_CSV
  ENERGY_*: a line with `date +%s.%N`, then nvidia-smi's `index, uuid, mJ` rows
  POWER_CSV: nvidia-smi's `index, W` rows (-lms 200)
Exit status: 0 agree, 1 disagree, 2 nothing to compare (no counter or no samples)."""
import sys


def read_counters(path):
    lines = [l.strip() for l in open(path) if l.strip()]
    at_s = float(lines[0])
    counters = {}
    for line in lines[1:]:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 3 and cells[0].isdigit():
            try:
                counters[int(cells[0])] = float(cells[2])
            except ValueError:
                pass  # [N/A] / [Not Supported]
    return at_s, counters


def main(before_path, after_path, power_path):
    t0, before = read_counters(before_path)
    t1, after = read_counters(after_path)
    samples = {}
    for line in open(power_path):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 2 and cells[0].isdigit():
            try:
                samples.setdefault(int(cells[0]), []).append(float(cells[1]))
            except ValueError:
                pass
    window_s = t1 - t0
    print(f"energy over the probes ({window_s:.1f} s):")
    print(f"{'gpu':>3} {'counter J':>10} {'counter W':>10} {'samples W':>10} {'samples':>8} {'ratio':>6}  verdict")
    verdicts = []
    for gpu in sorted(set(before) | set(after) | set(samples)):
        if gpu not in before or gpu not in after:
            print(f"{gpu:>3} {'-':>10} {'-':>10} {'':>10} {'':>8} {'':>6}  no energy counter")
            continue
        joules = (after[gpu] - before[gpu]) / 1e3
        counter_w = joules / window_s if window_s > 0 else float("nan")
        got = samples.get(gpu, [])
        if not got:
            print(f"{gpu:>3} {joules:>10.1f} {counter_w:>10.1f} {'-':>10} {0:>8} {'-':>6}  no power samples")
            continue
        sampled_w = sum(got) / len(got)
        ratio = counter_w / sampled_w if sampled_w > 0 else float("nan")
        verdict = "agree" if abs(ratio - 1) <= 0.10 else "DISAGREE"
        verdicts.append(verdict == "agree")
        print(f"{gpu:>3} {joules:>10.1f} {counter_w:>10.1f} {sampled_w:>10.1f} {len(got):>8} {ratio:>6.3f}  {verdict}")
    if not verdicts:
        return 2
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:]))
