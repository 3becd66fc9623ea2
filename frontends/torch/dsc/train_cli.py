"""dsc-train: a PyTorch user's one command, named after DeepSpeed's launcher.

    dsc-train path/to/model.py:GPT --model-args '{"n_layer": 4}' \\
        --deepspeed_config ds_config.json --data input.txt --steps 500 \\
        [--num_gpus N] [--block-size T] [--loss module|cross_entropy] \\
        [--output-dir DIR]

Exports the module (dsc.export), compiles it for N ranks (dsc.compile),
prints the report, trains with a progress line every steps_per_print steps
and writes the config's monitors; with --output-dir, the plan, the
initial weights and the trained state dict (DIR/model.safetensors, loadable
with load_state_dict(strict=True)). One rank trains in this process; N > 1
runs `dsrun --np N`, as DeepSpeed's launcher starts N processes. Bad input
is one line and exit status 2; a failed run exits 1.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

from .cli import InputError as CliInputError
from .cli import check_output, load_class, parse_model_args


def _parser():
    ap = argparse.ArgumentParser(prog="dsc-train", description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="FILE.py:ClassName")
    ap.add_argument("--model-args", default="{}", help="JSON object of keyword arguments")
    ap.add_argument("--deepspeed_config", "--deepspeed-config", dest="config", required=True,
                    help="DeepSpeed's ds_config.json")
    ap.add_argument("--data", required=True, help="text or nanoGPT .bin tokens")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--num_gpus", "--num-gpus", dest="num_gpus", type=int, default=1,
                    help="ranks (processes) to train on")
    ap.add_argument("--block-size", type=int, help="sequence length (default: the "
                    "module's config.block_size or max_position_embeddings)")
    ap.add_argument("--loss", default="module", choices=("module", "cross_entropy"))
    ap.add_argument("--seed", type=int)
    ap.add_argument("--output-dir", help="plan, initial and trained weights")
    return ap


def main(argv=None):
    args = _parser().parse_args(argv)
    import torch

    import dsc
    try:
        if args.num_gpus < 1:
            raise dsc.InputError(f"--num_gpus {args.num_gpus}: must be positive")
        if args.steps < 1:
            raise dsc.InputError(f"--steps {args.steps}: must be positive")
        if not os.path.isfile(args.data):
            raise dsc.InputError(f"--data {args.data}: no such file")
        if args.output_dir:
            if os.path.lexists(args.output_dir) and not os.path.isdir(args.output_dir):
                raise dsc.InputError(f"--output-dir {args.output_dir}: exists and is not a "
                                     "directory")
            os.makedirs(args.output_dir, exist_ok=True)
            for name in ("plan.dsplan", "init.safetensors", "model.safetensors"):
                check_output(os.path.join(args.output_dir, name), "--output-dir")
        cls = load_class(args.model)
        kwargs = parse_model_args(args.model_args)
        torch.manual_seed(args.seed if args.seed is not None else 0)
        try:
            module = cls(**kwargs)
        except TypeError as e:
            raise dsc.InputError(f"{args.model}: {e}") from None
        module.train()
        print(f"dsc-train: exporting {args.model}", flush=True)
        plan = dsc.compile(module, args.config, block_size=args.block_size, loss=args.loss,
                           world_size=args.num_gpus)
    except (CliInputError, dsc.InputError, dsc.ExportError) as e:
        print(f"dsc-train: {e}", file=sys.stderr)
        return 2
    for note in plan.notes:
        print(f"dsc: note: {note}", file=sys.stderr)
    print(plan.report_text, end="", flush=True)

    out = args.output_dir or tempfile.mkdtemp(prefix="dsc-train-")
    try:
        plan.save(os.path.join(out, "plan.dsplan"))
        if args.num_gpus == 1:
            status, weights = _train_here(plan, args)
        else:
            status, weights = _train_ranks(plan, args, out)
        if status != 0:
            return status
        if args.output_dir:
            from safetensors.torch import save_file
            state = plan.exported.state_dict_from(weights)
            module.load_state_dict(state, strict=True)  # the check users will make
            # A file per name: tied entries are written twice, as torch.save
            # would keep them apart (safetensors refuses shared storage).
            save_file({k: v.detach().clone().contiguous() for k, v in module.state_dict().items()},
                      os.path.join(out, "model.safetensors"))
            print(f"dsc-train: {os.path.join(out, 'model.safetensors')}: the trained "
                  f"state dict of {type(module).__name__}", flush=True)
    finally:
        if not args.output_dir:
            shutil.rmtree(out, ignore_errors=True)
    return 0


def _train_here(plan, args):
    import dsc
    try:
        result = dsc.train(plan, args.data, args.steps, seed=args.seed)
    except dsc.InputError:
        return 2, None  # dsrun's line is already on stderr
    except dsc.TrainingError:
        return 1, None
    except KeyboardInterrupt:
        return 130, None
    return 0, result.weights


def _dsrun():
    tools = os.environ.get("DSC_TOOLS_DIR")
    path = os.path.join(tools, "dsrun") if tools else shutil.which("dsrun")
    if not path or not os.path.exists(path):
        raise FileNotFoundError("dsrun: not found (set DSC_TOOLS_DIR or put it on PATH)")
    return path


def _train_ranks(plan, args, out):
    """`dsrun --np N`, its metrics file followed line by line into the
    monitors as the ranks write it."""
    from safetensors.torch import load_file, save_file

    from .monitor import Monitors
    init = os.path.join(out, "init.safetensors")
    save_file({k: v.detach().contiguous() for k, v in plan.exported.weights.items()}, init)
    metrics = os.path.join(out, "metrics.jsonl")
    final = os.path.join(out, "final.safetensors")
    cmd = [_dsrun(), plan.path, "--np", str(args.num_gpus), "--data", args.data,
           "--steps", str(args.steps), "--init-from", init, "--metrics", metrics,
           "--export-weights", final]
    if isinstance(plan.config.get("steps_per_print"), int) and plan.config["steps_per_print"] > 0:
        cmd += ["--print-every", str(plan.config["steps_per_print"])]
    if args.seed is not None:
        cmd += ["--seed", str(args.seed)]
    monitors = Monitors(plan.config, plan.report()["seq_len"])
    done = threading.Event()

    def follow():
        seen = 0
        while True:
            finished = done.is_set()
            if os.path.exists(metrics):
                with open(metrics) as f:
                    lines = f.read().splitlines()
                for line in lines[seen:]:
                    if line.strip():
                        monitors.write(json.loads(line))
                seen = len(lines)
            if finished:
                return
            done.wait(0.5)

    follower = threading.Thread(target=follow)
    follower.start()
    try:
        status = subprocess.call(cmd)
    finally:
        done.set()
        follower.join()
        monitors.close()
    if status != 0:
        return status, None
    return 0, load_file(final)
