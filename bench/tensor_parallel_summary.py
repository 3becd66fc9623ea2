#!/usr/bin/env python3
"""Table for bench/tensor_parallel.sh: step time, per-rank memory, and the
collective bytes a rank ran (comms_logger) beside dsc --report's.

usage: tensor_parallel_summary.py OUT_DIR [--steps 3] [--first-step 3]
"""
import argparse
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from zero_summary import overlap  # noqa: E402

RUNS = [("t4", "T = 4"), ("t4sp", "T = 4, sequence parallel"), ("t4c", "T = 4, 2 chunks"),
        ("z3", "D = 4, ZeRO-3"), ("z0", "D = 4, stage 0"), ("m22", "2 x 2 (T = 2), ZeRO-1"),
        ("u4", "S = 4 (Ulysses)")]
# A Ulysses group's all-to-alls share the tensor group's column.
GROUP_COLUMN = {"sequence": "tensor"}
UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def predicted(path):
    """(per-rank device bytes, parameters per rank line, collective bytes
    per step by group) from dsc --report."""
    total, groups, params = 0, {}, ""
    in_memory = False
    for line in open(path):
        if line.startswith("per-rank memory (device)"):
            in_memory = True
        m = re.match(r"\s+total\s+(\d+) bytes", line)
        if m and in_memory:
            total, in_memory = int(m.group(1)), False
        m = re.match(r"\s+(micro_step|apply)\s+(tensor|sequence|data)\s+\w+\s+x(\d+)\s+(\d+) bytes", line)
        if m:
            g = GROUP_COLUMN.get(m.group(2), m.group(2))
            groups[g] = groups.get(g, 0) + int(m.group(4))
        # The timeline on --machine cpu: micro_step's share hidden.
        m = re.match(r"\s+micro_step\s+[\d.]+ ms compute .* \((\d+)% hidden\)", line)
        if m:
            groups["hidden"] = m.group(1) + "%"
    return total, groups


def measured_comms(path, steps):
    """Collective message bytes per step by group from comms_logger's table
    (rank 0). Without tensor parallelism every collective is the data
    group's."""
    groups = {}
    for line in open(path):
        m = re.match(r"\s+(\w+)(?: (tensor|sequence|data))?\s+([\d.]+) (B|KiB|MiB|GiB)\s+(\d+)\s", line)
        if m and m.group(1) in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
            g = m.group(2) or "data"
            g = GROUP_COLUMN.get(g, g)
            groups[g] = groups.get(g, 0) + float(m.group(3)) * UNITS[m.group(4)] * int(m.group(5))
    return {g: b / steps for g, b in groups.items()}


def mb(b):
    return f"{b / 1e6:.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--first-step", type=int, default=3)
    a = ap.parse_args()
    print("| layout | step ms (median) | device MiB/rank written / predicted "
          "| activations MiB/rank "
          "| peak RSS MiB (rank 0) | tensor/sequence-group MB/step measured / predicted "
          "| data-group MB/step measured / predicted | comm ms/step (rank 0) "
          "| comm hidden under compute measured / predicted |")
    print("|---|---|---|---|---|---|---|---|---|")
    for tag, name in RUNS:
        d = os.path.join(a.out, tag)
        total, pred = predicted(d + ".report.txt")
        rows = [json.loads(l) for l in open(d + ".metrics.jsonl") if l.strip()]
        rows = [r for r in rows if r["step"] >= a.first_step]
        step = statistics.median(r["step_s"] for r in rows) * 1e3
        written = max(sum(r["plan_written_bytes"].values()) for r in rows)
        rss = max(r["rss_peak_bytes"] for r in rows)
        meas = measured_comms(d + ".comms.log", a.steps)
        comm, hidden, _ = overlap(d + ".trace.json", a.first_step)
        nsteps = len({r["step"] for r in rows})
        share = f"{100 * hidden / comm:.0f}%" if comm > 0 else "n/a"
        cells = [f"{mb(meas.get(g, 0))} / {mb(pred.get(g, 0))}" for g in ("tensor", "data")]
        acts = max(r["plan_written_bytes"]["activations"] for r in rows)
        print(f"| {name} | {step:.0f} | {written / 2**20:.1f} / {total / 2**20:.1f} "
              f"| {acts / 2**20:.1f} "
              f"| {rss / 2**20:.0f} | " + " | ".join(cells) +
              f" | {comm / 1e3 / nsteps:.0f} | {share} / {pred.get('hidden', 'n/a')} |")


if __name__ == "__main__":
    main()
