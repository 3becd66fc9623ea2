#!/usr/bin/env python3
"""offload_summary.py OUT_DIR: the tables of bench/offload.sh. Per offload
setting: the predicted device and host bytes per rank (each equal to what
dsrun measured: the script says so when not), the median step time over
the last 8 steps, and its ratio to no offload; then the deepest gpt2
(n_embd 1024) each setting fits in a 1 GiB device, with its parameters."""
import json
import os
import re
import statistics
import sys


def mib(b):
    return f"{b / 2**20:8.2f} MiB"


def main():
    out = sys.argv[1]
    rows, base = [], None
    for o in ("none", "optimizer", "param", "both"):
        path = os.path.join(out, f"step.{o}.metrics.jsonl")
        records = [json.loads(line) for line in open(path) if line.strip()]
        last = records[-1]
        dev = last["predicted_bytes_per_space"].get("device", 0)
        host = last["predicted_bytes_per_space"].get("host", 0)
        same = last["plan_written_bytes_per_space"] == last["predicted_bytes_per_space"]
        step = statistics.median(r["step_s"] for r in records[-8:])
        base = base or step
        rows.append((o, dev, host, step, same))
    print("| offload | device per rank | host per rank | step (median of 8) | vs none | measured = predicted |")
    print("|---|---|---|---|---|---|")
    for o, dev, host, step, same in rows:
        print(f"| {o} | {mib(dev)} | {mib(host)} | {step * 1e3:.1f} ms | "
              f"{step / base:.2f}x | {'yes' if same else 'NO'} |")
    print()
    print("| offload | deepest gpt2 (n_embd 1024) in 1 GiB | parameters |")
    print("|---|---|---|")
    for o in ("none", "both"):
        fit = json.load(open(os.path.join(out, f"fit.{o}.result.json")))
        params = "-"
        report = os.path.join(out, f"fit.{o}.report.txt")
        if os.path.exists(report):
            m = re.search(r": (\d+) parameters", open(report).read())
            if m:
                params = f"{int(m.group(1)) / 1e6:.1f}M"
        print(f"| {o} | {fit['max_n_layer']} layers | {params} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
