#!/usr/bin/env python3
"""tail_runs.py RUN.jsonl N OUT.jsonl: the last N steps of a run's metrics,
for rank 0 (RUN.jsonl) and every other rank (RUN.rankR.jsonl), written as
OUT.jsonl and OUT.rankR.jsonl: what a run resumed after step (total - N)
should have produced, for compare_runs.py. Exit 2 on bad arguments or a
run with fewer than N steps."""
import os
import sys


def rank_path(path, rank):
    if rank == 0:
        return path
    stem = path[:-len(".jsonl")] if path.endswith(".jsonl") else path
    return f"{stem}.rank{rank}.jsonl"


def main(argv):
    if len(argv) != 4 or not argv[2].isdigit():
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    run, n, out = argv[1], int(argv[2]), argv[3]
    rank = 0
    while os.path.exists(rank_path(run, rank)):
        with open(rank_path(run, rank)) as f:
            lines = [l for l in f if l.strip()]
        if len(lines) < n:
            print(f"tail_runs: {rank_path(run, rank)} has {len(lines)} steps, "
                  f"fewer than {n}", file=sys.stderr)
            return 2
        with open(rank_path(out, rank), "w") as f:
            f.writelines(lines[-n:])
        rank += 1
    if rank == 0:
        print(f"tail_runs: {run}: missing", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
