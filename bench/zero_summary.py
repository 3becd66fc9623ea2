#!/usr/bin/env python3
"""Table for bench/zero_cpu.sh: step time, peak bytes, comm bytes, overlap.

usage: zero_summary.py OUT_DIR [--first-step 3]
"""
import argparse
import json
import os
import re
import statistics

CATS = ["params", "grads", "optimizer_state", "activations", "comm_buffers"]


def mib(b):
    return f"{b / 2**20:.2f}"


def report_bytes(path):
    """Predicted per-rank bytes by category from dsc --report."""
    got = {}
    for line in open(path):
        m = re.match(r"\s+(\w+)\s+(\d+) bytes", line)
        if m:
            got[m.group(1)] = int(m.group(2))
        m = re.match(r"model \w+: (\d+) parameters", line)
        if m:
            got["n_params"] = int(m.group(1))
        m = re.match(r"(micro_step|apply) .* ([\d.]+) MB to collectives", line)
        if m:
            got["comm_mb." + m.group(1)] = float(m.group(2))
    return got


def merge(iv):
    iv.sort()
    out = []
    for a, b in iv:
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def overlap(trace, first_step):
    """(comm us, comm us under compute) on one rank's trace, steps >= first_step."""
    ev = json.load(open(trace))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    names = {e["tid"]: e["args"]["name"] for e in ev
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    xs = [e for e in ev if e.get("ph") == "X" and e["args"].get("step", 0) >= first_step]
    comp = merge([[e["ts"], e["ts"] + e["dur"]] for e in xs if names.get(e["tid"]) == "compute"])
    comm = [(e["ts"], e["ts"] + e["dur"]) for e in xs
            if names.get(e["tid"]) == "comm" and e["name"].startswith("comm.")]
    total = sum(b - a for a, b in comm)
    hidden = 0.0
    for a, b in comm:
        for c, d in comp:
            if d <= a:
                continue
            if c >= b:
                break
            hidden += min(b, d) - max(a, c)
    kinds = sorted({e["name"] for e in xs if names.get(e["tid"]) == "comm"})
    return total, hidden, kinds


def comm_mb(pred):
    """MB each rank hands to collectives per step (GA = 1), from the plan."""
    return pred["comm_mb.micro_step"] + pred["comm_mb.apply"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--first-step", type=int, default=3)
    a = ap.parse_args()
    notes = []
    print("| stage | N | step ms (median) | params MiB meas / pred | grads MiB meas / pred "
          "| optimizer_state MiB meas / pred | activations MiB meas / pred "
          "| comm_buffers MiB meas / pred "
          "| comm MB/step/rank (plan) | comm ms/step (rank 0) | comm hidden under compute |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for s in (0, 1, 2, 3):
        for n in (1, 2, 4):
            tag = f"s{s}.n{n}"
            d = os.path.join(a.out, tag)
            pred = report_bytes(d + ".report.txt")
            rows = [json.loads(l) for l in open(d + ".metrics.jsonl") if l.strip()]
            rows = [r for r in rows if r["step"] >= a.first_step]
            st = statistics.median(r["step_s"] for r in rows) * 1e3
            peak = {c: max(r["plan_written_bytes"][c] for r in rows) for c in CATS}
            total, hidden, kinds = overlap(d + ".trace.json", a.first_step)
            nsteps = len({r["step"] for r in rows})
            cb = comm_mb(pred)
            share = f"{100 * hidden / total:.0f}%" if total > 0 else "n/a (no comm)"
            cells = [f"{mib(peak[c])} / {mib(pred[c])}" for c in CATS]
            print(f"| {s} | {n} | {st:.1f} | " + " | ".join(cells) +
                  f" | {cb:.2f} | {total / 1e3 / nsteps:.1f} | {share} |")
            if kinds:
                notes.append(f"{tag}: rank 0 comm kernels: {', '.join(kinds)}")
    print()
    for line in notes:
        print(line)


if __name__ == "__main__":
    main()
