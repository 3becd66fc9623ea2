#!/usr/bin/env python3
"""Compares two dsrun metrics files step by step (device-check's
equivalence): prints the largest relative loss difference and whether it
is within the bound for the plan's precision (fp32: 1e-5; bf16: 2e-2, the
precision issue's tolerance against fp32 runs; exact: 0, two runs of one
backend that must agree bitwise); a config named PRECISION-OPTIMIZER
("fp32-sgd") takes its precision's bound. Exit 0 when within."""
import json
import sys


def losses(path):
    with open(path) as f:
        return [json.loads(line)["loss"] for line in f if '"loss"' in line]


def main():
    ref, got, precision = sys.argv[1], sys.argv[2], sys.argv[3]
    bound = {"fp32": 1e-5, "exact": 0.0}.get(precision.split("-")[0], 2e-2)
    try:
        a, b = losses(ref), losses(got)
    except OSError as e:
        print(f"no metrics ({e.strerror}: {e.filename})")
        return 1
    if not b or len(a) != len(b):
        print(f"{len(b)} steps against the CPU's {len(a)}")
        return 1
    worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
    ok = worst <= bound
    what = "max rel loss diff" if bound else "max rel diff (must be 0)"
    print(f"{len(a)} steps, {what} {worst:.2e} "
          f"({'within' if ok else 'OVER'} {bound:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
