#!/usr/bin/env python3
"""Errors of any servesweep build's `plan --simulate` on the fidelity suite's published cases.

Runs each case's matrix (tests/fidelity/published.yaml) through `plan --simulate` of the given
binary, reads the simulated figures back from its results.db and prints predicted / measured - 1
per figure, per case and overall (medians of |error|). Used to measure the model before this
calibration work (an older binary, which has no `calibrate`) against the same points as
`servesweep calibrate --published` checks; figures in docs/perfmodel.md.

  bench/perfmodel_fidelity_compare.py --servesweep /path/to/old/servesweep \
      --table tests/fidelity/published.yaml [--cases vllm-ci-h200-latency,...]
"""
import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile

import yaml  # python3-yaml (Debian), installed by scripts/install-deps.sh


def matches(row, match):
    for key, want in match.items():
        have = row.get(key)
        if isinstance(want, bool):
            want = 1 if want else 0
        if have is None:
            return False
        try:
            if float(have) != float(want):
                return False
        except (TypeError, ValueError):
            if str(have) != str(want):
                return False
    return True


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--servesweep", required=True)
    p.add_argument("--table", required=True)
    p.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    args = p.parse_args()
    table = yaml.safe_load(open(args.table))
    folder = os.path.dirname(os.path.abspath(args.table))
    wanted = set(filter(None, args.cases.split(",")))
    bounded = []
    for case in table["cases"]:
        if wanted and case["name"] not in wanted:
            continue
        with tempfile.TemporaryDirectory() as out:
            matrix = os.path.join(folder, case["matrix"])
            run = subprocess.run([args.servesweep, "plan", matrix, "--simulate", "--out",
                                  out + "/o"], capture_output=True, text=True)
            if run.returncode != 0:
                print(f"{case['name']}: plan --simulate failed: {run.stdout[-300:]}"
                      f"{run.stderr[-300:]}")
                continue
            db = sqlite3.connect(out + "/o/results.db")
            db.row_factory = sqlite3.Row
            rows = [dict(r) for r in db.execute(
                "SELECT results.*, runs.spec FROM results JOIN runs USING(run_id)")]
            # Match keys the results table has under other names.
            for r in rows:
                r["request_rate"] = r["request_rate_per_s"]
                r["dp_attention"] = None
            errors = []
            for point in case["points"]:
                match = {k: v for k, v in point["match"].items() if k != "dp_attention"}
                found = [r for r in rows if matches(r, match)]
                if "dp_attention" in point["match"]:
                    # Told apart by the layout's dp (the results table has no dp_attention).
                    found = [r for r in found if (r["dp"] > 1) == bool(point["match"]["dp_attention"])]
                if len(found) != 1:
                    print(f"  {case['name']} {point['match']}: {len(found)} runs match")
                    continue
                for metric, measured in point["figures"].items():
                    predicted = found[0].get(metric)
                    e = predicted / measured - 1 if predicted else float("nan")
                    note = " (excluded)" if point.get("exclude") else ""
                    print(f"  {case['name']:<30} {str(point['match']):<45} {metric:<26} "
                          f"{measured:>10.4g} {predicted if predicted else float('nan'):>10.4g} "
                          f"{e * 100:+7.1f}%{note}")
                    if not point.get("exclude") and case.get("verified", True):
                        errors.append(abs(e))
            if errors:
                print(f"case {case['name']}: median |error| {statistics.median(errors) * 100:.1f}%")
                if case.get("bound_pct", 0) > 0:
                    bounded.extend(errors)
    if bounded:
        print(f"all bounded cases: median |error| {statistics.median(bounded) * 100:.1f}% over "
              f"{len(bounded)} figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
