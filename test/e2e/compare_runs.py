#!/usr/bin/env python3
"""compare_runs.py A.jsonl A.safetensors B.jsonl B.safetensors TOL: two runs
that should be the same training (e.g. N ranks vs. one rank with the same
global batch) have per-step losses and final weights equal within a
relative tolerance TOL. Both runs' measured peak bytes must also equal the
compiler's prediction in every memory category.

Losses are compared one by one. Weights are compared per tensor as
||a - b|| / ||b||: AdamW divides each element's update by its own gradient
scale, so an element whose gradient is mostly rounding noise takes
noise-driven full-size steps under any change of summation order, and an
element-wise bound would measure that noise rather than the training."""
import json
import struct
import sys


def weights(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        raw = data[8 + n + lo:8 + n + hi]
        out[name] = struct.unpack(f"<{len(raw) // 4}f", raw)
    return out


def main():
    a_metrics, a_weights, b_metrics, b_weights, tol = sys.argv[1:6]
    tol = float(tol)
    la = [json.loads(l)["loss"] for l in open(a_metrics)]
    lb = [json.loads(l)["loss"] for l in open(b_metrics)]
    assert len(la) == len(lb) and la, (len(la), len(lb))
    for path in (a_metrics, b_metrics):
        for line in open(path):
            r = json.loads(line)
            assert r["peak_bytes"] == r["predicted_bytes"], (
                path, r["step"], r["peak_bytes"], r["predicted_bytes"])
    worst_loss = max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(la, lb))
    wa, wb = weights(a_weights), weights(b_weights)
    assert wa.keys() == wb.keys(), (sorted(wa), sorted(wb))
    worst_w = 0.0
    for name in wa:
        norm = max(sum(v * v for v in wb[name]) ** 0.5, 1e-12)
        diff = sum((x - y) ** 2 for x, y in zip(wa[name], wb[name])) ** 0.5
        worst_w = max(worst_w, diff / norm)
    print(f"{len(la)} steps: max loss rel diff {worst_loss:.2e}, "
          f"max weight rel diff {worst_w:.2e}")
    sys.exit(0 if worst_loss <= tol and worst_w <= tol else 1)


if __name__ == "__main__":
    main()
