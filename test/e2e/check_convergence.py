#!/usr/bin/env python3
"""check_convergence.py REF.jsonl RUN.jsonl FIRST LAST TOL: RUN's mean loss
over steps FIRST..LAST is within relative TOL of REF's (fp16/bf16 tracking
fp32, invariant 7). Both runs' metrics must pass run_checks.check_run.
Prints both means and their relative difference; exit 0 when within TOL,
1 otherwise, 2 on bad arguments."""
import sys

from run_checks import check_run


def mean_loss(records, first, last, problems, path):
    losses = [r.get("loss") for r in records if first <= r.get("step", 0) <= last]
    if len(losses) != last - first + 1:
        problems.append(f"{path}: {len(losses)} records in steps {first}-{last}")
        return float("nan")
    return sum(losses) / len(losses)


def main(argv):
    if len(argv) != 6:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    ref_path, run_path = argv[1], argv[2]
    first, last, tol = int(argv[3]), int(argv[4]), float(argv[5])
    ref, problems = check_run(ref_path)
    run, more = check_run(run_path)
    problems += more
    a = mean_loss(ref, first, last, problems, ref_path)
    b = mean_loss(run, first, last, problems, run_path)
    d = abs(b - a) / abs(a) if a else float("inf")
    print(f"mean loss over steps {first}-{last}: {b:.4f} vs {a:.4f} "
          f"(rel {d:.2e})")
    if not d <= tol:
        problems.append(f"relative difference {d:.2e} > {tol:g}")
    for p in problems:
        print(f"check_convergence: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
