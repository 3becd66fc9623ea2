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
import signal
import subprocess
import sys
import tempfile
import threading

from .cli import build_module
from .files import check_output, write_outputs


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


OUTPUTS = ("plan.dsplan", "init.safetensors", "model.safetensors", "metrics.jsonl",
           "final.safetensors")


def main(argv=None):
    args = _parser().parse_args(argv)
    import dsc
    try:
        if args.num_gpus < 1:
            raise dsc.InputError(f"--num_gpus {args.num_gpus}: must be positive")
        if args.steps < 1:
            raise dsc.InputError(f"--steps {args.steps}: must be positive")
        if not os.path.isfile(args.data):
            raise dsc.InputError(f"--data {args.data}: no such file")
        out = args.output_dir
        if out:
            if os.path.lexists(out) and not os.path.isdir(out):
                raise dsc.InputError(f"--output-dir {out}: exists and is not a directory")
            if not os.path.isdir(os.path.dirname(os.path.abspath(out))):
                raise dsc.InputError(f"--output-dir {out}: its parent is not a directory")
            if os.path.isdir(out):
                for name in OUTPUTS:
                    check_output(os.path.join(out, name), "--output-dir")
        module = build_module(args.model, args.model_args)
        print(f"dsc-train: exporting {args.model}", flush=True)
        plan = dsc.compile(module, args.config, block_size=args.block_size, loss=args.loss,
                           world_size=args.num_gpus)
        # Only now, with every input checked, does anything get written.
        if out:
            os.makedirs(out, exist_ok=True)
    except (dsc.InputError, dsc.ExportError) as e:
        print(f"dsc-train: {e}", file=sys.stderr)
        return 2
    for note in plan.notes:
        print(f"dsc: note: {note}", file=sys.stderr)
    print(plan.report_text, end="", flush=True)

    work = out or tempfile.mkdtemp(prefix="dsc-train-")
    try:
        if args.num_gpus == 1:
            status, weights = _train_here(plan, args)
        else:
            status, weights = _train_ranks(plan, args, work)
        if status != 0:
            return status
        if out:
            from safetensors.torch import save_file
            module.load_state_dict(plan.exported.state_dict_from(weights), strict=True)
            path = os.path.join(out, "model.safetensors")
            # A file per name: tied entries are written twice, as torch.save
            # would keep them apart (safetensors refuses shared storage).
            state = {k: v.detach().clone().contiguous() for k, v in module.state_dict().items()}
            write_outputs([(os.path.join(out, "plan.dsplan"), lambda t: _write_bytes(t, plan.data)),
                           (path, lambda t: save_file(state, t))])
            print(f"dsc-train: {path}: the trained state dict of {type(module).__name__}",
                  flush=True)
    except dsc.InputError as e:
        print(f"dsc-train: {e}", file=sys.stderr)
        return 2
    finally:
        if not out:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def _write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)


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
    plan_path = os.path.join(out, "plan.dsplan")
    init = os.path.join(out, "init.safetensors")
    write_outputs([(plan_path, lambda t: _write_bytes(t, plan.data)),
                   (init, lambda t: save_file({k: v.detach().contiguous()
                                               for k, v in plan.exported.weights.items()}, t))])
    metrics = os.path.join(out, "metrics.jsonl")
    final = os.path.join(out, "final.safetensors")
    cmd = [_dsrun(), plan_path, "--np", str(args.num_gpus), "--data", args.data,
           "--steps", str(args.steps), "--init-from", init, "--metrics", metrics,
           "--export-weights", final]
    if isinstance(plan.config.get("steps_per_print"), int) and plan.config["steps_per_print"] > 0:
        cmd += ["--print-every", str(plan.config["steps_per_print"])]
    if args.seed is not None:
        cmd += ["--seed", str(args.seed)]
    monitors = Monitors(plan.config, plan.report()["seq_len"])
    done = threading.Event()

    def follow():
        offset = 0
        while True:
            finished = done.is_set()
            if os.path.exists(metrics):
                with open(metrics) as f:
                    f.seek(offset)
                    text = f.read()
                # Whole lines only: the ranks may be writing the next one.
                complete = text[:text.rfind("\n") + 1]
                offset += len(complete.encode())
                for line in complete.splitlines():
                    if line.strip():
                        monitors.write(json.loads(line))
            if finished:
                return
            done.wait(0.5)

    follower = threading.Thread(target=follow)
    follower.start()
    # Ctrl-C reaches the launcher from the terminal; it stops every rank
    # after the step (and a second one at once). Here it must not kill it.
    launcher = subprocess.Popen(cmd)  # before SIG_IGN, which it would inherit
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        status = launcher.wait()
    finally:
        signal.signal(signal.SIGINT, previous)
        done.set()
        follower.join()
        monitors.close()
    if status != 0:
        return status, None
    return 0, load_file(final)
