#!/usr/bin/env python3
"""check_bubble.py METRICS.jsonl STAGES MICRO_BATCHES [VIRTUAL_STAGES]: a
pipeline run's measured bubble (the metrics' "bubble", every step after
the first) is a share of the step no smaller than 0.8 x (P - 1) /
(V M + P - 1), the bubble of equal stages with free messages that no
schedule of GPipe or 1F1B (V = 1) or the interleaved one (V chunks a
stage) goes below, and below 1; prints the median. METRICS.jsonl "none": checks that
the file has no "bubble" (a plan without a pipeline). Exit 0 when all
holds, 1 otherwise (one line per problem), 2 on bad arguments."""
import json
import statistics
import sys


def main(argv):
    if len(argv) not in (4, 5):
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    path, stages, micro = argv[1], int(argv[2]), int(argv[3])
    chunks = int(argv[4]) if len(argv) == 5 else 1
    with open(path) as f:
        records = [json.loads(line) for line in f]
    if stages == 1:
        extra = [r["step"] for r in records if "bubble" in r]
        if extra:
            print(f"{path}: steps {extra} report a bubble without a pipeline")
            return 1
        print(f"{len(records)} steps, no bubble")
        return 0
    floor = 0.8 * (stages - 1) / (chunks * micro + stages - 1)
    problems = []
    values = []
    for r in records[1:]:
        b = r.get("bubble")
        if b is None:
            problems.append(f"step {r['step']}: no bubble")
        elif not floor <= b < 1:
            problems.append(f"step {r['step']}: bubble {b:.3f} outside "
                            f"[{floor:.3f}, 1)")
        else:
            values.append(b)
    for p in problems:
        print(p)
    if not problems:
        print(f"{len(values)} steps, bubble >= {floor:.3f}, median "
              f"{statistics.median(values):.3f}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
