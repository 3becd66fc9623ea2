"""Whether a resumed run's losses match another run's at the same steps.

    same_losses.py RESUMED.jsonl FULL.jsonl TOL

Prints "steps A-B within TOL" for the resumed run's steps when each loss is
within relative TOL of the full run's loss at that step, else one line per
step that is not, and exits 1.
"""
import json
import sys


def losses(path):
    out = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                if "loss" in record and "step" in record:
                    out[record["step"]] = record["loss"]
    return out


def main():
    resumed, full, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
    if not resumed:
        print(f"same_losses: {sys.argv[1]}: no losses")
        return 1
    bad = []
    for step, loss in sorted(resumed.items()):
        want = full.get(step)
        if want is None or not abs(loss - want) <= tol * abs(want):
            bad.append(f"step {step}: {loss!r} vs {want!r}")
    if bad:
        print("\n".join(f"same_losses: {b}" for b in bad))
        return 1
    print(f"steps {min(resumed)}-{max(resumed)} within {tol:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
