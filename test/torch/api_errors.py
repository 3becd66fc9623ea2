"""dsc's Python API on bad input (issue 34, items 1, 2 and 8): each call
must raise dsc.InputError or dsc.ExportError with one line, before it
writes anything; prints "CASE: LINE" per call, and "CASE: no error" when a
call wrongly succeeds.
    api_errors.py WORKDIR DATA
"""
import os
import sys

import dsc
from nanogpt_model import GPT


def attempt(case, call):
    try:
        call()
    except (dsc.InputError, dsc.ExportError) as e:
        lines = str(e).splitlines()
        print(f"{case}: {lines[0]}" + (f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""))
        return
    print(f"{case}: no error")


def main(work, data):
    os.environ["WANDB_MODE"] = "offline"
    fifo = os.path.join(work, "fifo")
    os.mkfifo(fifo)
    model = GPT(n_layer=1, n_head=2, n_embd=16, block_size=16, vocab_size=256)
    config = {"train_micro_batch_size_per_gpu": 2}
    attempt("config fifo", lambda: dsc.compile(model, fifo))
    plan = dsc.compile(model, config)
    attempt("plan fifo", lambda: plan.save(fifo))
    exported = dsc.export(model, 2, 16)
    mlir = os.path.join(work, "m.mlir")
    attempt("same file twice", lambda: exported.save(mlir, os.path.join(work, ".", "m.mlir")))
    attempt("metrics is data", lambda: dsc.train(plan, data, 2, metrics=data, quiet=True))
    attempt("trace fifo", lambda: dsc.train(plan, data, 2, trace=fifo, quiet=True))
    csv_plan = dsc.compile(model, dict(config, csv_monitor={
        "enabled": True, "output_path": "/sys/dsc-csv", "job_name": "j"}))
    attempt("csv unwritable", lambda: dsc.train(csv_plan, data, 2, quiet=True))
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "Inputs"))
    from bad_models import TinyLlama
    attempt("hugging face", lambda: dsc.compile(TinyLlama(), config))
    if os.listdir(work) != ["fifo"]:
        print(f"written: {sorted(os.listdir(work))}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
