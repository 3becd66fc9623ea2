"""dsc's Python API end to end: dsc.compile of a PyTorch module with a
DeepSpeed config, the report as data, dsc.train with a per-step callback,
the trained weights back into the module, and the config's monitors
(tensorboard read back with TensorBoard's own event reader, csv_monitor,
wandb in offline mode). Prints what it checked; exits 1 on a problem.
    python_api.py WORKDIR DATA
"""
import csv
import glob
import json
import os
import sys

import torch

import dsc
from nanogpt_model import GPT

problems = []


def expect(cond, what):
    if not cond:
        problems.append(what)


def main(work, data):
    os.environ["WANDB_MODE"] = "offline"
    os.environ["WANDB_DIR"] = work
    os.environ["WANDB_SILENT"] = "true"
    steps, micro, accum, seq = 12, 4, 2, 32
    config = {
        "train_micro_batch_size_per_gpu": micro, "gradient_accumulation_steps": accum,
        "steps_per_print": 4,
        "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.1}},
        "tensorboard": {"enabled": True, "output_path": os.path.join(work, "tb"),
                        "job_name": "gpt"},
        "csv_monitor": {"enabled": True, "output_path": os.path.join(work, "csv"),
                        "job_name": "gpt"},
        "wandb": {"enabled": True, "project": "dsc-test"},
    }
    torch.manual_seed(0)
    model = GPT(n_layer=2, n_head=2, n_embd=32, block_size=seq, vocab_size=256)
    plan = dsc.compile(model, config)

    # The report, as data and as dsc --report's text.
    r = plan.report()
    n_params = sum(p.numel() for p in model.parameters())  # ties counted once
    expect(r["parameters"] == n_params, f"report: {r['parameters']} parameters, module {n_params}")
    expect((r["micro_batch"], r["seq_len"], r["world_size"]) == (micro, seq, 1),
           f"report: batch {r['micro_batch']} x {r['seq_len']}, world {r['world_size']}")
    dev = r["memory"]["device"]
    expect(dev["params"] == 4 * n_params, f"report: params {dev['params']} bytes != 4 x {n_params}")
    expect(dev["optimizer_state"] == 8 * n_params, "report: optimizer_state is not 8 bytes/param")
    expect(f"model GPT: {n_params} parameters" in str(plan), "str(plan) is not the --report text")
    expect([p["name"] for p in r["programs"]][:2] == ["micro_step", "apply"],
           f"report: programs {[p['name'] for p in r['programs']]}")
    expect(any("$.tensorboard: written by dsc-train" in n for n in plan.notes),
           f"notes: {plan.notes}")
    print(f"report: {r['parameters']} parameters, device total {dev['total']} bytes")

    # Training with a callback per step.
    seen = []
    result = dsc.train(plan, data, steps, callback=lambda rec: seen.append(rec), quiet=True)
    expect([s["step"] for s in seen] == list(range(1, steps + 1)),
           f"callback steps {[s['step'] for s in seen]}")
    expect(result.history == seen, "history is not what the callback saw")
    losses = result.losses
    expect(losses[-1] < losses[0] - 0.5, f"loss did not fall: {losses[0]:.3f} -> {losses[-1]:.3f}")
    expect(all(k in seen[0] for k in ("loss", "lr", "grad_norm", "loss_scale", "tokens_per_s",
                                       "plan_written_bytes")), f"record keys {sorted(seen[0])}")
    fresh = GPT(n_layer=2, n_head=2, n_embd=32, block_size=seq, vocab_size=256)
    fresh.load_state_dict(result.state_dict(), strict=True)
    moved = (fresh.lm_head.weight - model.lm_head.weight).abs().max().item()
    expect(moved > 0, "the trained weights equal the initial ones")
    print(f"train: {steps} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}; "
          "state dict loads with strict=True")

    # Weights in as tensors: two more steps from the trained weights start
    # where the run ended (the first loss is below the run's first).
    more = dsc.train(plan, data, 2, init=result.weights, monitor=False, quiet=True)
    expect(more.losses[0] < losses[0] - 0.5, f"init= was ignored: {more.losses}")
    # Other sources: ds MLIR text (the exported graph) and built-in models.
    from_text = dsc.compile(plan.exported.mlir, config)
    expect(from_text.report()["parameters"] == n_params, "compile(mlir text) differs")
    builtin = dsc.compile(model="gpt2:n_layer=1,n_head=2,n_embd=16,block_size=8,vocab_size=256",
                          config={"train_micro_batch_size_per_gpu": 2})
    expect(builtin.report()["model"] == "gpt2", f"builtin report {builtin.report()['model']}")
    print("sources: module, MLIR text, built-in model; init= weights as tensors")

    # TensorBoard's own reader: tags and one point per step, x = samples.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    acc = EventAccumulator(os.path.join(work, "tb", "gpt"))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    want = ["Train/Samples/train_loss", "Train/Samples/lr", "Train/Samples/grad_norm",
            "Train/Samples/loss_scale", "Train/Samples/tokens_per_s",
            "Memory/device/params_bytes", "Memory/device/activations_bytes",
            "Memory/process_peak_bytes"]
    for tag in want:
        if tag not in tags:
            problems.append(f"tensorboard: no {tag} in {tags}")
            continue
        points = acc.Scalars(tag)
        xs = [p.step for p in points]
        expect(xs == [s * micro * accum for s in range(1, steps + 1)],
               f"tensorboard: {tag} at samples {xs}")
    tb_loss = [p.value for p in acc.Scalars("Train/Samples/train_loss")]
    expect(all(abs(a - b) <= 1e-6 * abs(b) for a, b in zip(tb_loss, losses)),
           "tensorboard: losses differ from the records")
    print(f"tensorboard: {len(tags)} tags, {steps} points each")

    # csv_monitor: a file per tag, "step,<name>" then one row per step.
    path = os.path.join(work, "csv", "gpt", "Train_Samples_train_loss.csv")
    rows = list(csv.reader(open(path))) if os.path.exists(path) else []
    expect(rows[:1] == [["step", "train_loss"]] and len(rows) == steps + 1,
           f"csv: {path} has {rows[:2]}... ({len(rows)} rows)")
    print(f"csv: {len(glob.glob(os.path.join(work, 'csv', 'gpt', '*.csv')))} files, "
          f"{len(rows) - 1} rows each")

    # wandb, offline: a run folder with its history.
    runs = glob.glob(os.path.join(work, "wandb", "offline-run-*"))
    expect(len(runs) == 1, f"wandb: runs {runs}")
    print(f"wandb: {len(runs)} offline run")

    # Errors are dsc's own lines.
    try:
        dsc.compile(model, {"optimizer": {"type": "MuAdam"}})
        problems.append("a bad config compiled")
    except dsc.InputError as e:
        print(f"bad config: {e}")
    # A callback that raises stops the run after that step.
    stopped = []

    def stop_at_3(rec):
        stopped.append(rec["step"])
        if rec["step"] == 3:
            raise RuntimeError("enough")
    try:
        dsc.train(plan, data, steps, callback=stop_at_3, monitor=False, quiet=True)
        problems.append("the raising callback did not propagate")
    except RuntimeError as e:
        expect(str(e) == "enough" and stopped == [1, 2, 3], f"stop: {e!r} after {stopped}")
        print(f"callback raised at step 3: run stopped after {len(stopped)} steps")
    # The stop is this run's alone: the next one in this process runs whole.
    again = dsc.train(plan, data, 4, monitor=False, quiet=True)
    expect(len(again.history) == 4, f"the run after a stop trained {len(again.history)} steps")
    try:
        dsc.train(plan, os.path.join(work, "missing.txt"), 2, monitor=False, quiet=True)
        problems.append("missing data trained")
    except dsc.InputError as e:
        print(f"bad data: {e}")

    for p in problems:
        print(f"python_api: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
