#!/usr/bin/env python3
"""pipeline_timeline.py [--step N] [--width W] [--order] TRACE.json...

A pipeline schedule as it ran, from dsrun --trace files (one per rank:
t.json, t.rank1.json, ...). dsc tags every instruction of a stage's step
with its micro-batch and part (F forward, B backward or its input
gradients, W ZB-H1's weight gradients; plan Instr.micro_batch), and the
trace carries both per event. For one optimizer step (--step, default the
last in the files) each rank's compute stream becomes a run of blocks, a
block being consecutive instructions of one micro-batch's part.

Default: a timeline, one pair of rows per rank on a common time axis
(every rank's clock is this machine's monotonic one) W columns wide: the
part's letter over the micro-batch (0-9, then a-z, then again from 0),
'.' where the stream is idle (a rank with no event in the step: a row of
them), '-' for instructions of the step outside the schedule (the
gradient norm, the sums of tied weights). --order: each rank's blocks in
order, e.g. "F0 F1 B0 F2 B1 F3 B2 B3", one line per rank (ZB-H1's B and
W of one micro-batch, interleaved by the scheduled phase, as "B0+W0").

Exit 0; 2 with one line on bad input (no such file, not a trace, no
tagged events: the plan has no pipeline)."""
import argparse
import json
import sys

COMPUTE = 0  # the compute stream's track (runtime/tooling/Trace.cpp)
DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def load(path):
    try:
        with open(path) as f:
            text = f.read().rstrip()
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror}")
    # A run that died leaves the array unclosed (Trace.h); close it here.
    if text.startswith("[") and not text.endswith("]"):
        text = text.rstrip(",") + "]"
    try:
        events = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not a dsrun trace ({e.msg})")
    if not isinstance(events, list):
        raise ValueError(f"{path}: not a dsrun trace (no event array)")
    out = []
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        args = e.get("args")
        if not isinstance(args, dict) or not all(
                isinstance(e.get(k), (int, float)) for k in ("ts", "dur")):
            raise ValueError(f"{path}: not a dsrun trace (an event without "
                             "ts, dur or args)")
        out.append(e)
    return out


def step_events(events, step):
    """The compute stream's events of the step's micro_step programs,
    in time order."""
    picked = [e for e in events
              if e.get("tid") == COMPUTE and e["args"].get("step") == step and
              str(e.get("cat", "")).startswith("micro_step")]
    return sorted(picked, key=lambda e: e["ts"])


def blocks(events):
    """Consecutive events of one (part, micro-batch) as one block:
    [part, micro-batch, begin us, end us]; untagged events are part '-'."""
    out = []
    for e in events:
        key = (e["args"].get("part", "-"), e["args"].get("micro_batch", -1))
        end = e["ts"] + e["dur"]
        if out and (out[-1][0], out[-1][1]) == key:
            out[-1][3] = end
        else:
            out.append([key[0], key[1], e["ts"], end])
    return out


def order_names(bs):
    """The blocks' names in order ("F0", "B1"), untagged ones left out. A
    micro-batch's B and W blocks that alternate (the scheduled phase hoists
    a cheap weight-gradient op, a sum of a layer norm's gradients, up to
    the kernel that made its input, to free that sooner) are one "B0+W0"."""
    groups = []
    for p, m, _, _ in bs:
        if p == "-":
            continue
        last = groups[-1] if groups else None
        if last and last[1] == m and p in "BW" and set(last[0]) <= set("BW"):
            if p not in last[0]:
                last[0].append(p)
        else:
            groups.append([[p], m])
    return ["+".join(f"{p}{m}" for p in parts) for parts, m in groups]


def draw(rows, width):
    """Two lines per rank: part letters and micro-batch digits per column
    over the step's span. A column shows the first schedule block (not
    '-') that begins in it, else the first block that does, else the block
    covering its middle: every block's start shows unless an earlier one
    begins in the same column (a forward shorter than a column, as under
    load, would otherwise hide behind the next)."""
    begin = min(b[2] for _, bs in rows for b in bs)
    end = max(b[3] for _, bs in rows for b in bs)  # some rank has blocks
    span = max(end - begin, 1e-9)
    lines = [f"{span / 1e3:.2f} ms across, {span / width:.0f} us a column"]
    for rank, bs in rows:
        parts, numbers = [], []
        for c in range(width):
            c0, c1 = begin + c * span / width, begin + (c + 1) * span / width
            t = (c0 + c1) / 2
            begun = [b for b in bs if c0 <= b[2] < c1]
            hit = next((b for b in begun if b[0] != "-"), None) or \
                next(iter(begun), None) or \
                next((b for b in bs if b[2] <= t < b[3]), None)
            if hit is None:
                parts.append(".")
                numbers.append(" ")
            elif hit[0] == "-":
                parts.append("-")
                numbers.append(" ")
            else:
                parts.append(hit[0])
                numbers.append(DIGITS[hit[1] % len(DIGITS)])
        label = f"rank {rank}"
        lines.append(f"{label:>8} |{''.join(parts)}|")
        lines.append(f"{'':>8} |{''.join(numbers)}|")
    return "\n".join(lines)


def main(argv):
    ap = argparse.ArgumentParser(prog="pipeline_timeline.py",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--step", type=int, help="the optimizer step [the last]")
    ap.add_argument("--width", type=int, default=100, help="columns [100]")
    ap.add_argument("--order", action="store_true",
                    help="each rank's blocks in order instead of a timeline")
    a = ap.parse_args(argv)
    if a.width < 10:
        print(f"pipeline_timeline.py: --width {a.width}: at least 10", file=sys.stderr)
        return 2
    try:
        by_rank = {}
        for path in a.traces:
            for e in load(path):
                by_rank.setdefault(e.get("pid", 0), []).append(e)
    except ValueError as e:
        print(f"pipeline_timeline.py: {e}", file=sys.stderr)
        return 2
    tagged = [e for es in by_rank.values() for e in es if "micro_batch" in e["args"]]
    if not tagged:
        print(f"pipeline_timeline.py: {', '.join(a.traces)}: no event has a micro-batch "
              "(a plan without a pipeline, or a dsrun from before the tags)",
              file=sys.stderr)
        return 2
    step = a.step if a.step is not None else max(e["args"]["step"] for e in tagged)
    # A rank with nothing in the step stays as an idle row: an idle stage
    # is what a timeline is for.
    rows = [(rank, blocks(step_events(es, step))) for rank, es in sorted(by_rank.items())]
    if not any(bs for _, bs in rows):
        print(f"pipeline_timeline.py: no event of step {step}", file=sys.stderr)
        return 2
    if a.order:
        for rank, bs in rows:
            print(f"rank {rank}: {' '.join(order_names(bs))}")
    else:
        print(f"step {step}")
        print(draw(rows, a.width))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
