#!/usr/bin/env python3
"""Feeds check_metrics.py and compare_runs.py the inputs that used to slip
through, and requires each to be rejected (exit 1), under `python3 -O` too
(which strips `assert`). A good run must pass, so the test cannot succeed by
rejecting everything, and each rejection must give the expected reason. Prints one line per case; exit 1 if any case is wrong.

usage: check_helpers.py WORKDIR"""
import copy
import json
import math
import os
import subprocess
import sys

import safetensors_io as st

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20


def record(step, loss=2.0, rank=0, world=1):
    table = {"activations": 4096, "params": 1024}
    return {"step": step, "loss": loss, "lr": 1e-3, "grad_norm": 0.5,
            "loss_scale": 1.0, "skipped": False, "tokens": 64 * step, "tokens_per_s": 1000.0,
            "step_s": 0.01, "rank": rank, "world_size": world,
            "rss_baseline_bytes": 5 * MiB, "rss_peak_bytes": 9 * MiB,
            "plan_written_bytes": dict(table), "predicted_bytes": dict(table),
            "plan_written_bytes_per_space": {"device": 5120},
            "predicted_bytes_per_space": {"device": 5120}}


def good_run(steps=8, world=1):
    # A falling loss, the same on every rank.
    return [[record(s, 3.0 - 0.2 * s, rank, world) for s in range(1, steps + 1)]
            for rank in range(world)]


def write_run(path, ranks):
    for rank, records in enumerate(ranks):
        p = path if rank == 0 else path[:-len(".jsonl")] + f".rank{rank}.jsonl"
        with open(p, "w") as f:
            for r in records:
                # allow_nan: the point is to see NaN written the way a buggy
                # producer would write it.
                f.write(json.dumps(r, allow_nan=True) + "\n")


def weights(**override):
    w = {"a.weight": st.Tensor("F32", [2, 3], [0.5, -1.0, 2.0, 0.25, 1.5, -0.75]),
         "b.bias": st.Tensor("F32", [3], [0.1, 0.2, 0.3])}
    w.update(override)
    return w


def run(script, args, optimize):
    env = dict(os.environ)
    if optimize:
        env["PYTHONOPTIMIZE"] = "1"
    p = subprocess.run([sys.executable, os.path.join(HERE, script)] + args,
                       env=env, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def expect(script, args, name, want, why):
    """Runs `script` with and without -O; the number of wrong outcomes (exit
    status other than `want`, or `why` missing from what it printed)."""
    wrong = 0
    for optimize in (False, True):
        got, out = run(script, args, optimize)
        ok = got == want and why in out
        wrong += not ok
        print(f"{'ok' if ok else 'WRONG'}: {script[:-3]}, {name}"
              f"{' (-O)' if optimize else ''}: exit {got}, want {want}"
              f"{'' if ok else ' saying ' + repr(why) + '; it said: ' + out.strip()}")
    return wrong


def mutate(ranks, fn):
    ranks = copy.deepcopy(ranks)
    fn(ranks)
    return ranks


def main():
    work = sys.argv[1]
    os.makedirs(work, exist_ok=True)
    metric_cases = {
        "good run": (good_run(), 0, ""),
        "a skipped step's NaN grad norm": (mutate(good_run(), lambda r: r[0][1].update(grad_norm=math.nan, skipped=True)), 0, ""),
        "good 2-rank run": (good_run(world=2), 0, ""),
        "NaN loss at step 3": (mutate(good_run(), lambda r: r[0][2].update(loss=math.nan)), 1, "step 3: loss is nan"),
        "inf grad norm at step 5": (mutate(good_run(), lambda r: r[0][4].update(grad_norm=math.inf)), 1, "step 5: grad_norm is inf"),
        "NaN grad norm of an applied step": (mutate(good_run(), lambda r: r[0][1].update(grad_norm=math.nan, skipped=False)), 1, "step 2: grad_norm is nan"),
        "skipped missing": (mutate(good_run(), lambda r: r[0][2].pop("skipped")), 1, "step 3: skipped is None"),
        "a step missing": (mutate(good_run(), lambda r: r[0].pop(4)), 1, "are not 1..8"),
        "empty byte table": (mutate(good_run(), lambda r: r[0][1].update(plan_written_bytes={}, predicted_bytes={})), 1, "'plan_written_bytes' is missing or empty"),
        "category missing from the written table": (mutate(good_run(), lambda r: r[0][1]["plan_written_bytes"].pop("params")), 1, "but predicted"),
        "written != predicted": (mutate(good_run(), lambda r: r[0][6]["plan_written_bytes"].update(activations=4000)), 1, "but predicted"),
        "resident set far above the plan": (mutate(good_run(), lambda r: r[0][7].update(rss_peak_bytes=40 * MiB)), 1, "of runtime overhead"),
        "resident set below the plan": (mutate(good_run(), lambda r: [x["predicted_bytes"].update(activations=64 * MiB) or x["plan_written_bytes"].update(activations=64 * MiB) for x in r[0]]), 1, "reserved but never used"),
        "no resident-set reading": (mutate(good_run(), lambda r: r[0][0].pop("rss_peak_bytes")), 1, "readings"),
        "rank 1's file missing": (mutate(good_run(world=2), lambda r: r.pop(1)), 1, "rank1.jsonl: missing"),
        "rank 1 with a NaN loss": (mutate(good_run(world=2), lambda r: r[1][3].update(loss=math.nan)), 1, "rank1.jsonl: step 4: loss is nan"),
        "empty file": ([[]], 1, "no records"),
    }
    failures = 0
    for name, (ranks, want, why) in metric_cases.items():
        path = os.path.join(work, name.replace(" ", "_").replace("'", "") + ".jsonl")
        write_run(path, ranks)
        args = [path, str(len(good_run()[0])), "0.5"]
        failures += expect("check_metrics.py", args, name, want, why)

    ref_metrics = os.path.join(work, "ref.jsonl")
    write_run(ref_metrics, good_run())
    ref_weights = os.path.join(work, "ref.safetensors")
    st.write(ref_weights, weights())
    weight_cases = {
        "same weights": (weights(), 0, ""),
        "NaN weight": (weights(**{"b.bias": st.Tensor("F32", [3], [0.1, math.nan, 0.3])}), 1, "b.bias: non-finite"),
        "half-size tensor": (weights(**{"a.weight": st.Tensor("F32", [3], [0.5, -1.0, 2.0])}), 1, "a.weight: F32 [3] vs F32 [2, 3]"),
        "other shape, same values": (weights(**{"a.weight": st.Tensor("F32", [3, 2], [0.5, -1.0, 2.0, 0.25, 1.5, -0.75])}), 1, "a.weight: F32 [3, 2] vs F32 [2, 3]"),
        "other dtype": (weights(**{"b.bias": st.Tensor("F64", [3], [0.1, 0.2, 0.3])}), 1, "b.bias: F64"),
        "a tensor missing": ({"a.weight": weights()["a.weight"]}, 1, "in one file only"),
        "a value off by 1%": (weights(**{"b.bias": st.Tensor("F32", [3], [0.1, 0.2, 0.303])}), 1, "b.bias: weights differ"),
    }
    for name, (w, want, why) in weight_cases.items():
        path = os.path.join(work, name.replace(" ", "_").replace(",", "") + ".safetensors")
        st.write(path, w)
        args = [ref_metrics, path, ref_metrics, ref_weights, "1e-5"]
        failures += expect("compare_runs.py", args, name, want, why)
    nan_loss = os.path.join(work, "nan-loss-run.jsonl")
    write_run(nan_loss, mutate(good_run(), lambda r: r[0][2].update(loss=math.nan)))
    args = [nan_loss, ref_weights, ref_metrics, ref_weights, "1e-5"]
    failures += expect("compare_runs.py", args, "NaN loss at step 3", 1,
                       "step 3: loss is nan")
    print(f"{failures} wrong")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
