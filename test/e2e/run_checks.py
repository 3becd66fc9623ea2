"""Checks shared by check_metrics.py and compare_runs.py. Every check returns
a list of problems (strings); the scripts print them and exit 1 when there
is any. No `assert`: these must fail under `python3 -O` too.

A run's metrics are one JSONL file per rank: rank 0 at PATH, rank r > 0 at
PATH with ".rank<r>" before ".jsonl" (dsrun's naming). load_run reads all of
them, using rank 0's `world_size` to know how many there must be."""
import json
import math
import os

CATEGORY_KEYS = ("plan_written_bytes", "predicted_bytes")
SPACE_KEYS = ("plan_written_bytes_per_space", "predicted_bytes_per_space")
SCALARS = ("loss", "lr", "grad_norm", "loss_scale", "tokens_per_s", "step_s")
# Resident memory a run holds beyond its baseline and its arenas: OpenBLAS's
# per-thread GEMM buffers, the stream threads' stacks and malloc arenas, MPI's
# collective buffers; oneDNN's bf16 GEMM state (its JIT kernels, scratchpad
# and OpenMP threads: 3 MiB more than the widened run of the same plan).
# Measured 4.0-7.2 MiB on 2 cores (1 and 2 ranks, plans of 1.3-177 MiB;
# docs/testing.md); the bound is about twice the worst.
RSS_OVERHEAD_BYTES = 16 << 20
# Arenas are calloc'ed and touched lazily, so resident growth below this
# share of the plan's total means the plan reserved memory it never used.
RSS_MIN_SHARE = 0.95


def rank_path(path, rank):
    if rank == 0:
        return path
    stem = path[:-len(".jsonl")] if path.endswith(".jsonl") else path
    return f"{stem}.rank{rank}.jsonl" if path.endswith(".jsonl") else f"{path}.rank{rank}"


def read_jsonl(path, problems):
    if not os.path.isfile(path):
        problems.append(f"{path}: missing")
        return []
    records = []
    for n, line in enumerate(open(path), 1):
        try:
            records.append(json.loads(line))
        except ValueError as e:
            problems.append(f"{path}:{n}: not JSON ({e})")
    if not records:
        problems.append(f"{path}: no records")
    return records


def load_run(path, problems):
    """[records of rank 0, records of rank 1, ...]."""
    first = read_jsonl(path, problems)
    world = first[0].get("world_size", 1) if first else 1
    if not isinstance(world, int) or world < 1:
        problems.append(f"{path}: world_size {world!r}")
        world = 1
    return [first] + [read_jsonl(rank_path(path, r), problems) for r in range(1, world)]


def finite_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check_bytes_table(where, record, key, problems):
    table = record.get(key)
    if not isinstance(table, dict) or not table:
        problems.append(f"{where}: '{key}' is missing or empty")
        return {}
    for name, v in table.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            problems.append(f"{where}: {key}[{name}] = {v!r} is not a byte count")
    return table


def check_records(path, rank, records, steps=None, first=1):
    """One rank's records: steps first..first+N-1 (N = steps when given; a
    resumed run's first step is the checkpoint's next), every scalar
    finite, byte tables present and non-empty, the plan's written bytes equal
    to its predictions (a consistency check of the plan), and the resident
    set within the plan's total plus the measured baseline."""
    problems = []
    want = list(range(first, first + (steps if steps is not None else len(records))))
    got = [r.get("step") for r in records]
    if got != want:
        problems.append(f"{path}: steps {got[:5]}{'...' if len(got) > 5 else ''}"
                        f" are not {first}..{first + len(want) - 1}")
    for r in records:
        where = f"{path}: step {r.get('step')}"
        if not isinstance(r.get("skipped"), bool):
            problems.append(f"{where}: skipped is {r.get('skipped')!r}")
        for key in SCALARS:
            # A skipped step is one whose gradient norm was not finite.
            if key == "grad_norm" and r.get("skipped") is True:
                continue
            if not finite_number(r.get(key)):
                problems.append(f"{where}: {key} is {r.get(key)!r}")
        if r.get("rank") != rank:
            problems.append(f"{where}: rank {r.get('rank')!r}, expected {rank}")
        for written_key, predicted_key in (CATEGORY_KEYS, SPACE_KEYS):
            written = check_bytes_table(where, r, written_key, problems)
            predicted = check_bytes_table(where, r, predicted_key, problems)
            if written and predicted and written != predicted:
                problems.append(f"{where}: the plan wrote {written} but "
                                f"predicted {predicted} ({written_key})")
        # With offload: each space's categories too.
        by_written = r.get("plan_written_bytes_by_space")
        by_predicted = r.get("predicted_bytes_by_space")
        if by_written is not None or by_predicted is not None:
            if by_written != by_predicted:
                problems.append(f"{where}: the plan wrote {by_written} but "
                                f"predicted {by_predicted} (per space)")
        problems += check_rss(where, r)
    return problems


def check_rss(where, r):
    base, peak = r.get("rss_baseline_bytes"), r.get("rss_peak_bytes")
    table = r.get("predicted_bytes")
    if not (isinstance(base, int) and isinstance(peak, int) and base > 0 and peak > 0):
        return [f"{where}: resident-set readings {base!r}, {peak!r} are missing"]
    if not isinstance(table, dict):
        return []
    total = sum(v for v in table.values() if isinstance(v, int))
    growth = peak - base
    if growth > total + RSS_OVERHEAD_BYTES:
        return [f"{where}: resident set grew by {growth} bytes, more than the "
                f"plan's {total} + {RSS_OVERHEAD_BYTES} of runtime overhead"]
    if growth < RSS_MIN_SHARE * total:
        return [f"{where}: resident set grew by {growth} bytes, less than "
                f"{RSS_MIN_SHARE:.0%} of the plan's {total}: arenas reserved "
                "but never used"]
    return []


def check_run(path, steps=None, first=1):
    """(rank 0's records, problems) for every rank's file of a run whose
    first step is `first`."""
    problems = []
    ranks = load_run(path, problems)
    for rank, records in enumerate(ranks):
        if records:
            problems += check_records(rank_path(path, rank), rank, records,
                                      steps, first)
    losses = [[r.get("loss") for r in records] for records in ranks if records]
    if any(l != losses[0] for l in losses):
        problems.append(f"{path}: the ranks report different losses")
    return ranks[0], problems
