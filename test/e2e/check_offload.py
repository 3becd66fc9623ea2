#!/usr/bin/env python3
"""check_offload.py OFFLOAD.jsonl BASELINE.jsonl WHAT: an offloaded run (WHAT =
optimizer, param or both) against the same training without offload, rank
by rank, from the last record of each metrics file: every run passes
run_checks (written = predicted, per space and category too); with
optimizer offload the device holds no optimizer state and the host exactly
the state the baseline's device held; with parameter offload (compiled with
stage3_param_persistence_threshold 0, so every parameter is sharded) the
device holds no parameters and the host exactly the baseline's. Prints one
line per rank with the bytes, exit 0 when all holds, 1 otherwise.

check_offload.py RUN.jsonl --falls NATS: the run passes run_checks, skipped
no step and its last loss is more than NATS below its first."""
import sys

from run_checks import check_run, load_run


def falls(path, nats):
    records, problems = check_run(path)
    if records:
        first, last = records[0].get("loss"), records[-1].get("loss")
        skipped = sum(1 for r in records if r.get("skipped"))
        print(f"loss {first:.3f} -> {last:.3f} in {len(records)} steps, "
              f"{skipped} skipped")
        if skipped or not last < first - nats:
            problems.append(f"{path}: the loss did not fall by {nats:g} "
                            f"without skipped steps")
    for p in problems:
        print(f"check_offload: {p}")
    return 1 if problems else 0


def main():
    if len(sys.argv) == 4 and sys.argv[2] == "--falls":
        return falls(sys.argv[1], float(sys.argv[3]))
    if len(sys.argv) != 4 or sys.argv[3] not in ("optimizer", "param", "both"):
        print(__doc__, file=sys.stderr)
        return 2
    path, base_path, what = sys.argv[1:]
    problems = check_run(path)[1] + check_run(base_path)[1]
    runs, base_runs = load_run(path, problems), load_run(base_path, problems)
    kinds = {"optimizer": ["optimizer_state"], "param": ["params"],
             "both": ["optimizer_state", "params"]}[what]
    for rank, (records, base) in enumerate(zip(runs, base_runs)):
        if not records or not base:
            problems.append(f"rank {rank}: no records")
            continue
        by_space = records[-1].get("predicted_bytes_by_space", {})
        device, host = by_space.get("device", {}), by_space.get("host", {})
        before = base[-1].get("predicted_bytes", {})
        line = []
        for kind in kinds:
            want = before.get(kind)
            if device.get(kind) != 0:
                problems.append(f"rank {rank}: {device.get(kind)!r} bytes of "
                                f"{kind} on the device, expected 0")
            if not want or host.get(kind) != want:
                problems.append(f"rank {rank}: {host.get(kind)!r} bytes of "
                                f"{kind} on the host, expected {want!r} (the "
                                f"baseline's device)")
            line.append(f"{kind} device {device.get(kind)} host {host.get(kind)}")
        print(f"rank {rank}: " + ", ".join(line))
    for p in problems:
        print(f"check_offload: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
