#!/usr/bin/env python3
"""check_metrics.py METRICS.jsonl STEPS MIN_DROP: every step is recorded with
the DESIGN.md fields, the measured peak bytes equal the predicted ones in
every category, and the loss of the last steps is at least MIN_DROP below
the first steps'."""
import json
import sys

path, steps, min_drop = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
records = [json.loads(line) for line in open(path)]
assert [r["step"] for r in records] == list(range(1, steps + 1)), "steps"
for r in records:
    for key in ("loss", "lr", "grad_norm", "loss_scale", "tokens_per_s", "step_s"):
        assert key in r, key
    assert r["peak_bytes"] == r["predicted_bytes"], (r["peak_bytes"], r["predicted_bytes"])
first = sum(r["loss"] for r in records[:3]) / 3
last = sum(r["loss"] for r in records[-3:]) / 3
print(f"loss {first:.4f} -> {last:.4f}; peak bytes equal predicted in "
      f"{len(records[0]['peak_bytes'])} categories")
assert first - last >= min_drop, f"loss fell by {first - last:.4f} only"
