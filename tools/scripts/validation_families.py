#!/usr/bin/env python3
"""Per-family accuracy table from `trainsim validate --json` on stdin.

A run's family is its source family: the run id up to the first '_' (narayanan2021, megatron, mcore, nemo2407,
torchtitan, mpt, bloom176b, mbridge, mlperf, ...), the naming convention of shared/validation/README.md.
For each family: runs scored, step-time MAPE, max |error| and signed bias (mean error, negative = trainsim too fast),
and the same for peak memory where runs report it. Runs that were not scored (unsupported, error, oom) are counted
apart. Usage: trainsim validate FILE --json | tools/scripts/validation_families.py
"""
import json
import sys
from collections import OrderedDict


def family(run_id):
    return run_id.split("_", 1)[0]


def stats(errors):
    if not errors:
        return "", "", ""
    mape = sum(abs(e) for e in errors) / len(errors)
    worst = max(abs(e) for e in errors)
    bias = sum(errors) / len(errors)
    return f"{mape:.1f}%", f"{worst:.1f}%", f"{bias:+.1f}%"


def main():
    doc = json.load(sys.stdin)
    fams = OrderedDict()
    for run in doc.get("runs", []):
        f = fams.setdefault(family(run["id"]), {"step": [], "mem": [], "other": 0})
        if not any(m.get("name") == "step_time_s" and m.get("error_pct") is not None
                   for m in run.get("metrics", [])):
            f["other"] += 1
        for m in run.get("metrics", []):
            if m.get("error_pct") is None:
                continue
            if m.get("name") == "step_time_s":
                f["step"].append(m["error_pct"])
            elif m.get("name") == "peak_memory_GiB":
                f["mem"].append(m["error_pct"])
    head = f"{'family':<16}{'runs':>5}{'MAPE':>8}{'max':>8}{'bias':>8}   {'memory runs':>11}{'MAPE':>8}{'max':>8}{'bias':>8}{'not scored':>12}"
    print(head)
    for name, f in fams.items():
        s, m = stats(f["step"]), stats(f["mem"])
        print(f"{name:<16}{len(f['step']):>5}{s[0]:>8}{s[1]:>8}{s[2]:>8}   {len(f['mem']):>11}{m[0]:>8}{m[1]:>8}{m[2]:>8}"
              f"{f['other']:>12}")


if __name__ == "__main__":
    main()
