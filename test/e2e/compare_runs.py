#!/usr/bin/env python3
"""compare_runs.py A.jsonl A.safetensors B.jsonl B.safetensors TOL [WTOL]: two runs
that should be the same training (e.g. N ranks vs. one rank with the same
global batch) have per-step losses and final weights equal within a
relative tolerance TOL (the weights within WTOL when given: bf16 runs,
docs/precision.md). Each run's metrics must pass run_checks.check_run
(every rank: finite values, the plan's written bytes equal to its
predictions, resident memory within the plan's total plus the baseline).
The weight files must hold the same tensors with the same dtypes and
shapes, all finite. A run resumed from a checkpoint (first step > 1) is
compared with one covering the same steps. Exit 0 when all holds, 1
otherwise, 2 on bad arguments.

Losses are compared one by one. Weights are compared per tensor as
||a - b|| / ||b||: AdamW divides each element's update by its own gradient
scale, so an element whose gradient is mostly rounding noise takes
noise-driven full-size steps under any change of summation order, and an
element-wise bound would measure that noise rather than the training."""
import json
import math
import sys

import safetensors_io as st
from run_checks import check_run


def compare_weights(path_a, path_b, tol, problems):
    try:
        wa, wb = st.read(path_a), st.read(path_b)
    except (OSError, ValueError, st.FormatError) as e:
        problems.append(str(e))
        return 0.0
    if sorted(wa) != sorted(wb):
        problems.append(f"tensors in one file only: {sorted(set(wa) ^ set(wb))}")
    if not wa:
        problems.append(f"{path_a}: no tensors")
    worst = 0.0
    for name in sorted(set(wa) & set(wb)):
        a, b = wa[name], wb[name]
        if (a.dtype, a.shape) != (b.dtype, b.shape):
            problems.append(f"{name}: {a.dtype} {a.shape} vs {b.dtype} {b.shape}")
            continue
        if not all(math.isfinite(v) for v in a.values + b.values):
            problems.append(f"{name}: non-finite values")
            continue
        norm = math.sqrt(sum(v * v for v in b.values))
        diff = math.sqrt(sum((x - y) ** 2 for x, y in zip(a.values, b.values)))
        d = diff / norm if norm > 0 else (0.0 if diff == 0 else math.inf)
        worst = max(worst, d)
        if not d <= tol:
            problems.append(f"{name}: weights differ by {d:.2e} (> {tol:g})")
    return worst


def first_step(path):
    """The step of a metrics file's first record (1 if it has none)."""
    try:
        with open(path) as f:
            for line in f:
                if line.strip():
                    step = json.loads(line).get("step")
                    return step if isinstance(step, int) else 1
    except (OSError, ValueError):
        pass
    return 1


def main(argv):
    if len(argv) not in (6, 7):
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    a_metrics, a_weights, b_metrics, b_weights, tol = argv[1:6]
    tol = float(tol)
    weight_tol = float(argv[6]) if len(argv) == 7 else tol
    # A resumed run starts after its checkpoint's step; both runs must then
    # cover the same steps.
    first_a, first_b = first_step(a_metrics), first_step(b_metrics)
    ra, problems = check_run(a_metrics, first=first_a)
    rb, more = check_run(b_metrics, first=first_b)
    problems += more
    if first_a != first_b:
        problems.append(f"the runs start at steps {first_a} and {first_b}")
    worst_loss = 0.0
    if len(ra) != len(rb):
        problems.append(f"{len(ra)} steps vs {len(rb)}")
    for x, y in zip(ra, rb):
        la, lb = x.get("loss"), y.get("loss")
        if not (isinstance(la, float) and isinstance(lb, float)):
            continue  # reported by check_run
        d = abs(la - lb) / max(abs(lb), 1e-12)
        worst_loss = max(worst_loss, d)
        if not d <= tol:
            problems.append(f"step {x.get('step')}: loss {la!r} vs {lb!r} "
                            f"(rel {d:.2e} > {tol:g})")
    worst_w = compare_weights(a_weights, b_weights, weight_tol, problems)
    print(f"{len(ra)} steps: max loss rel diff {worst_loss:.2e}, "
          f"max weight rel diff {worst_w:.2e}")
    for p in problems[:20]:
        print(f"compare_runs: {p}")
    if len(problems) > 20:
        print(f"compare_runs: ... and {len(problems) - 20} more")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
