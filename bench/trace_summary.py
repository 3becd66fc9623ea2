#!/usr/bin/env python3
"""Where a dsrun step's time goes, from a `dsrun --trace` file.

    python3 bench/trace_summary.py t.json [--skip-steps 1] [--top 10]
                                   [--gemm-gflop G] [--markdown]

The trace holds one complete ("X") event per executed kernel instruction:
name = kernel ("ds.matmul"), cat = program ("micro_step" or "apply"),
args.step = optimizer step, args.loc = the model location. This sums the
durations per kernel name over the kept steps and reports, per optimizer
step: the GEMM share (ds.matmul and the fused matmuls, whose bias, GELU
and bias-gradient epilogues count with the GEMM), the attention share
(ds.attention and
ds.attention_grad) and the rest; the top kernels; GEMM time per model
location (layer index dropped); and how much of each step's wall span the
kernels cover (the remainder is dispatch and waiting between kernels).

Step 1 is skipped by default: it first-touches every activation page and is
slower than the steady state. --gemm-gflop G (GEMM GFLOP per optimizer step,
known from the model) adds the achieved GEMM rate.
"""

import argparse
import collections
import json
import re
import sys

GEMM = ("ds.matmul", "ds.matmul_bias", "ds.matmul_bias_gelu",
        "ds.matmul_gelu_grad")
ATTENTION = ("ds.attention", "ds.attention_grad")


def load_events(path):
    """The trace's events; accepts the array form without its closing
    bracket (what a run that died leaves) and the {"traceEvents": ...} form."""
    with open(path) as f:
        text = f.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = json.loads(text.rstrip().rstrip(",") + "\n]")
    if isinstance(data, dict):
        data = data.get("traceEvents", [])
    return data


def group_of(name):
    if name in GEMM:
        return "GEMM (ds.matmul*)"
    if name in ATTENTION:
        return "attention (ds.attention[_grad])"
    return "rest"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace")
    p.add_argument("--skip-steps", type=int, default=1,
                   help="leave out steps 1..N (default 1)")
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--gemm-gflop", type=float, default=None,
                   help="GEMM GFLOP per optimizer step, for the achieved rate")
    p.add_argument("--markdown", action="store_true",
                   help="print markdown tables")
    args = p.parse_args()

    events = [e for e in load_events(args.trace)
              if e.get("ph") == "X" and "dur" in e]
    if not events:
        sys.exit("trace_summary: %s: no complete events" % args.trace)
    all_steps = sorted({e.get("args", {}).get("step", 0) for e in events})
    kept = [s for s in all_steps if s > args.skip_steps] or all_steps
    kept_set = set(kept)
    events = [e for e in events if e.get("args", {}).get("step", 0) in kept_set]
    n = len(kept)

    per_name = collections.Counter()
    calls = collections.Counter()
    per_group = collections.Counter()
    per_phase = collections.Counter()
    gemm_loc = collections.Counter()
    span = {}
    for e in events:
        a = e.get("args", {})
        dur = float(e["dur"]) / 1000.0  # ms
        name = e.get("name", "?")
        per_name[name] += dur
        calls[name] += 1
        per_group[group_of(name)] += dur
        per_phase[e.get("cat", "?")] += dur
        if name in GEMM:
            loc = re.sub(r"\.h\.\d+\.", ".h.*.", a.get("loc", "?"))
            gemm_loc[loc] += dur
        s = a.get("step", 0)
        t0, t1 = float(e["ts"]), float(e["ts"]) + float(e["dur"])
        lo, hi = span.get(s, (t0, t1))
        span[s] = (min(lo, t0), max(hi, t1))

    busy = sum(per_name.values()) / n
    wall = sum((hi - lo) / 1000.0 for lo, hi in span.values()) / n
    md = args.markdown

    def table(title, header, rows):
        print()
        if md:
            print("**%s**" % title)
            print()
            print("| " + " | ".join(header) + " |")
            print("|" + "|".join("---" for _ in header) + "|")
            for r in rows:
                print("| " + " | ".join(str(c) for c in r) + " |")
        else:
            print(title)
            widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
            for r in [header] + rows:
                print("  " + "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                                       for i, (c, w) in enumerate(zip(r, widths))))

    print("trace %s: steps %s kept (%d of %d; first %d skipped)"
          % (args.trace, "%d-%d" % (kept[0], kept[-1]), n, len(all_steps),
             args.skip_steps))
    print("per optimizer step: kernels %.2f ms, wall span %.2f ms "
          "(kernels cover %.1f%%; the rest is dispatch/waiting)"
          % (busy, wall, 100.0 * busy / wall if wall else 0.0))

    order = ["GEMM (ds.matmul*)", "attention (ds.attention[_grad])", "rest"]
    table("time per step by group", ["group", "ms/step", "share"],
          [[g, "%.2f" % (per_group[g] / n), "%.1f%%" % (100 * per_group[g] / n / busy)]
           for g in order])
    if args.gemm_gflop:
        gemm_ms = per_group[order[0]] / n
        print("GEMM rate: %.2f GFLOP in %.2f ms = %.0f GFLOP/s"
              % (args.gemm_gflop, gemm_ms, args.gemm_gflop / gemm_ms * 1e3))

    table("time per step by program", ["program", "ms/step", "share"],
          [[k, "%.2f" % (v / n), "%.1f%%" % (100 * v / n / busy)]
           for k, v in per_phase.most_common()])

    top = per_name.most_common(args.top)
    table("top %d kernels" % len(top),
          ["kernel", "ms/step", "share", "calls/step", "us/call"],
          [[k, "%.2f" % (v / n), "%.1f%%" % (100 * v / n / busy),
            "%g" % (calls[k] / n), "%.0f" % (1000 * v / calls[k])]
           for k, v in top])
    rest = busy - sum(v for _, v in top) / n
    print("  (other %d kernels: %.2f ms/step, %.1f%%)"
          % (len(per_name) - len(top), rest, 100 * rest / busy))

    table("ds.matmul* by location (forward + both backward GEMMs)",
          ["location", "ms/step", "share of GEMM"],
          [[k, "%.2f" % (v / n), "%.1f%%" % (100 * v / per_group[order[0]])]
           for k, v in gemm_loc.most_common()])


if __name__ == "__main__":
    main()
