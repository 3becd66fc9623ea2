#!/usr/bin/env python3
"""check_metrics.py METRICS.jsonl STEPS MIN_DROP: a run's metrics (every
rank's file) are complete and sane (run_checks.check_run: steps 1..STEPS,
finite values, the plan's written bytes equal to its predictions, resident
memory within the plan's total plus the baseline), and the mean loss of the
last 3 steps is at least MIN_DROP below that of the first 3 (MIN_DROP
"none": no loss check). Exit 0 when all holds, 1 otherwise (one line per
problem), 2 on bad arguments."""
import sys

from run_checks import check_run


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    path, steps = argv[1], int(argv[2])
    min_drop = None if argv[3] == "none" else float(argv[3])
    records, problems = check_run(path, steps)
    if min_drop is not None and not problems and len(records) < 6:
        problems.append(f"{path}: {len(records)} steps; the loss drop needs 6")
    if not problems:
        first = sum(r["loss"] for r in records[:3]) / 3
        last = sum(r["loss"] for r in records[-3:]) / 3
        print(f"loss {first:.4f} -> {last:.4f}; plan wrote what it predicted "
              f"in {len(records[0]['predicted_bytes'])} categories; resident "
              f"{records[-1]['rss_peak_bytes']} bytes")
        if min_drop is not None and not first - last >= min_drop:
            problems.append(f"loss fell by {first - last:.4f}, less than {min_drop}")
    for p in problems:
        print(f"check_metrics: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
