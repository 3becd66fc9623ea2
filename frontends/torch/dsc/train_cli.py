"""dsc-train: a PyTorch user's one command, named after DeepSpeed's launcher.

    dsc-train path/to/model.py:GPT --model-args '{"n_layer": 4}' \\
        --deepspeed_config ds_config.json --data input.txt --steps 500 \\
        [--num_gpus N] [--block-size T] [--loss module|cross_entropy] \\
        [--output-dir DIR] [dsrun's --backend, --init-from, --eval-data,
        --eval-split, --eval-every, --save-dir, --save-every, --resume]

Exports the module (dsc.export), compiles it for N ranks (dsc.compile),
prints the report, trains with a progress line every steps_per_print steps
and writes the config's monitors; with --output-dir, the plan, the
initial weights and the trained state dict (DIR/model.safetensors, loadable
with load_state_dict(strict=True)). One rank trains in this process; N > 1
runs `dsrun --np N`, as DeepSpeed's launcher starts N processes. Bad input
is one line and exit status 2; a failed run exits 1.
"""
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading

from .command_line import ArgumentParser, build_module, last_resort, model_file, print_error
from .files import (CONFIG_LIMIT, check_distinct, check_output, check_output_folder, read_input,
                    work_folder, write_outputs, write_safetensors)
from .native import one_line

USAGE_ERROR = 2


def _parser():
    ap = ArgumentParser(prog="dsc-train", description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="FILE.py:ClassName")
    ap.add_argument("--model-args", default="{}", help="JSON object of keyword arguments")
    ap.add_argument("--model-config", default=None,
                    help="JSON object of the fields of the config object the class takes "
                         "(nanoGPT's GPT(GPTConfig(...)), a Hugging Face model's config_class)")
    ap.add_argument("--deepspeed_config", "--deepspeed-config", dest="config", required=True,
                    help="DeepSpeed's ds_config.json")
    ap.add_argument("--data", required=True, help="text or nanoGPT .bin tokens")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--num_gpus", "--num-gpus", dest="num_gpus", type=int, default=1,
                    help="ranks (processes) to train on")
    ap.add_argument("--hostfile", help="with --num_gpus N: mpirun's hostfile, the hosts the "
                    "ranks start on (dsrun --hostfile)")
    ap.add_argument("--oversubscribe", action="store_true",
                    help="start more ranks than this machine's cores or memory hold "
                         "(dsrun --oversubscribe)")
    ap.add_argument("--block-size", type=int, help="sequence length (default: the "
                    "module's config.block_size or max_position_embeddings)")
    ap.add_argument("--loss", default="module", choices=("module", "cross_entropy"))
    ap.add_argument("--seed", type=int)
    ap.add_argument("--output-dir", help="plan, initial and trained weights")
    # dsrun's flags, passed on (docs/dsrun.md).
    ap.add_argument("--backend", help="dsrun's backend: cpu or cuda[:K=V,...]")
    ap.add_argument("--init-from", help="initial weights (safetensors, dsc's or the "
                    "module's names) instead of the module's own")
    ap.add_argument("--eval-data", help="held-out data for the validation loss")
    ap.add_argument("--eval-split", type=float,
                    help="hold out the last fraction of --data instead")
    ap.add_argument("--eval-every", type=int, help="evaluate every K steps and after the last")
    ap.add_argument("--save-dir", help="checkpoints (dsrun --save-dir)")
    ap.add_argument("--save-every", type=int, help="a checkpoint every K steps")
    ap.add_argument("--resume", action="store_true",
                    help="continue from the latest checkpoint in --save-dir")
    return ap


# dsc-train's flags that dsrun takes as they are: (argparse dest, dsrun flag).
DSRUN_FLAGS = (("backend", "--backend"), ("init_from", "--init-from"),
               ("eval_data", "--eval-data"), ("eval_split", "--eval-split"),
               ("eval_every", "--eval-every"), ("save_dir", "--save-dir"),
               ("save_every", "--save-every"))


def _dsrun_flags(args):
    """The dsrun flags the run's own dsc-train flags ask for."""
    flags = []
    for dest, flag in DSRUN_FLAGS:
        value = getattr(args, dest)
        if value is not None:
            flags += [flag, str(value)]
    if args.resume:
        flags.append("--resume")
    return flags


OUTPUTS = ("plan.dsplan", "init.safetensors", "model.safetensors", "config.json",
           "metrics.jsonl", "final.safetensors")


class _Terminated(BaseException):
    """SIGTERM outside training: unwinds through every `finally` (the work
    folder is removed) to main, which exits 143."""


def _on_sigterm(signum, frame):
    raise _Terminated()


def main(argv=None):
    args = _parser().parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return last_resort("dsc-train", lambda: _run(args))
    except _Terminated:
        print("dsc-train: SIGTERM: stopped", file=sys.stderr)
        return 143
    finally:
        signal.signal(signal.SIGTERM, previous)


def _check_inputs_and_outputs(args):
    """Everything dsc-train will read or write, checked before anything is
    exported, compiled or written: numbers, input files, the output folder
    and its files, the monitors. Returns the config as a dict."""
    import dsc

    from .api import _read_config
    from .monitor import check_monitors
    if args.num_gpus < 1:
        raise dsc.InputError(f"--num_gpus {args.num_gpus}: must be positive")
    if args.steps < 1:
        raise dsc.InputError(f"--steps {args.steps}: must be positive")
    if args.hostfile is not None and args.num_gpus == 1:
        raise dsc.InputError("--hostfile goes with --num_gpus N (N > 1): it says where the "
                             "ranks start")
    if not os.path.exists(args.data):
        raise dsc.InputError(f"--data {args.data}: no such file")
    if not os.path.isfile(args.data):
        raise dsc.InputError(f"--data {args.data}: cannot read: not a regular file")
    if not args.config.lstrip().startswith("{"):
        read_input(args.config, CONFIG_LIMIT)  # a FIFO or /dev/zero: refused, not read
    config, _, config_name = _read_config(args.config)
    inputs = [("the model", model_file(args.model)), ("--deepspeed_config", args.config),
              ("--data", args.data), ("--init-from", args.init_from),
              ("--eval-data", args.eval_data), ("--hostfile", args.hostfile)]
    out = args.output_dir
    if out is not None:
        check_output_folder(out, "--output-dir")
        outputs = [("--output-dir", os.path.join(out, name)) for name in OUTPUTS]
        if os.path.isdir(out):
            for flag, path in outputs:
                check_output(path, flag)
        check_distinct(inputs, outputs)
    check_monitors(config, inputs, config_name, resume=args.resume)
    return config


def _run(args):
    import dsc
    try:
        _check_inputs_and_outputs(args)
        module = build_module(args.model, args.model_args, args.model_config)
        print(f"dsc-train: exporting {args.model}", flush=True)
        plan = dsc.compile(module, args.config, block_size=args.block_size, loss=args.loss,
                           world_size=args.num_gpus)
        # Only now, with every input checked, does anything get written.
        if args.output_dir:
            os.makedirs(args.output_dir, exist_ok=True)
    except (dsc.InputError, dsc.ExportError) as e:
        print_error("dsc-train", e)
        return USAGE_ERROR
    for note in plan.notes:
        print(f"dsc: note: {note}", file=sys.stderr)
    print(plan.report_text, end="", flush=True)
    out = args.output_dir
    try:
        if args.num_gpus == 1:
            status, weights = _train_here(plan, args)
        else:
            with (contextlib.nullcontext() if out else work_folder()) as work:
                status, weights = _train_ranks(plan, args, out or work.path,
                                               work.lock_fd if work else None)
        if status != 0:
            return status
        if out:
            # N ranks wrote the initial weights for dsrun before training;
            # a run from --init-from or a checkpoint did not start from them.
            _write_trained(plan, module, weights, out,
                           with_init=args.num_gpus == 1 and _from_module_weights(args))
    except dsc.InputError as e:
        print_error("dsc-train", e)
        return USAGE_ERROR
    return 0


def _write_trained(plan, module, weights, out, with_init):
    module.load_state_dict(plan.exported.state_dict_from(weights), strict=True)
    path = os.path.join(out, "model.safetensors")
    # A file per name: tied entries are written twice, as torch.save
    # would keep them apart (safetensors refuses shared storage).
    state = {k: v.detach().clone().contiguous() for k, v in module.state_dict().items()}
    writers = [(os.path.join(out, "plan.dsplan"), lambda t: _write_bytes(t, plan.data)),
               (path, lambda t: write_safetensors(state, t))]
    if with_init:
        writers.append((os.path.join(out, "init.safetensors"),
                        lambda t: _write_initial_weights(plan, t)))
    # A Hugging Face model's config beside its weights: the folder is one
    # from_pretrained loads.
    hf_config = getattr(module, "config", None)
    if hasattr(hf_config, "to_json_string"):
        text = hf_config.to_json_string()
        writers.append((os.path.join(out, "config.json"), lambda t: _write_bytes(t, text.encode())))
    write_outputs(writers)
    print(f"dsc-train: {path}: the trained state dict of {type(module).__name__}",
          flush=True)


def _from_module_weights(args):
    """Whether the run starts from the module's own initial weights (not
    --init-from's, not a checkpoint's)."""
    return args.init_from is None and not args.resume


def _write_initial_weights(plan, path):
    """The plan's initial weights (the exported module's, dsc's names), the
    --init-from file that replays this run."""
    write_safetensors({k: v.detach().contiguous() for k, v in plan.exported.weights.items()},
                      path)


def _write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)


def _train_here(plan, args):
    import dsc
    try:
        result = dsc.train(plan, args.data, args.steps, seed=args.seed, init=args.init_from,
                           eval_data=args.eval_data, eval_split=args.eval_split,
                           eval_every=args.eval_every, save_dir=args.save_dir,
                           save_every=args.save_every, resume=args.resume,
                           backend=args.backend)
    except dsc.InputError:
        return 2, None  # dsrun's line is already on stderr
    except dsc.TrainingError:
        return 1, None
    except KeyboardInterrupt as e:  # dsrun stopped after a step: its line is out
        return getattr(e, "status", 130), None
    return 0, result.weights


def _dsrun():
    import dsc
    from .native import tool_path
    path = tool_path("dsrun")
    if not path:
        raise dsc.InputError("--num_gpus: dsrun is not found (install dsc with pip, set "
                             "DSC_TOOLS_DIR or put dsrun on PATH)")
    return path


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _dies_with_this_process():
    """A preexec_fn for a child that must not outlive this process, however
    it ends (a SIGKILL runs no handler here): the kernel sends it SIGTERM
    when this process dies, which dsrun's launcher takes as a stop (the
    ranks stop after their step and mpirun cleans up). Resolved before the
    fork, so the child only makes two system calls."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def preexec():
        if prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0 or os.getppid() != parent:
            os._exit(1)  # or this process is already gone
    return preexec


def _metrics_follower(metrics, monitors, done, failures):
    """A thread feeding the monitors dsrun's metrics file as the ranks
    write it, whole lines only; what goes wrong lands in `failures`."""

    def follow():
        offset = 0
        try:
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
        except Exception as e:  # reported once the run ends; training goes on
            failures.append(e)
    return threading.Thread(target=follow)


def _train_ranks(plan, args, out, lock_fd):
    """`dsrun --np N`, its metrics file followed line by line into the
    monitors as the ranks write it. The launcher runs in a process group of
    its own: SIGINT and SIGTERM reach it from here, once (it stops every
    rank after the step, a second one at once), and it dies with this
    process (_dies_with_this_process). It holds the work folder's lock, so
    a next run removes the folder only once the launcher is gone too."""
    import dsc
    from safetensors.torch import load_file

    from .monitor import Monitors
    plan_path = os.path.join(out, "plan.dsplan")
    init = os.path.join(out, "init.safetensors")
    writers = [(plan_path, lambda t: _write_bytes(t, plan.data))]
    if _from_module_weights(args):
        writers.append((init, lambda t: _write_initial_weights(plan, t)))
    write_outputs(writers)
    metrics = os.path.join(out, "metrics.jsonl")
    final = os.path.join(out, "final.safetensors")
    if os.path.isfile(metrics):
        os.unlink(metrics)  # a previous run's lines are not this run's
    cmd = [_dsrun(), plan_path, "--np", str(args.num_gpus), "--data", args.data,
           "--steps", str(args.steps), "--metrics", metrics, "--export-weights", final,
           "--quiet-export"]
    if not args.output_dir:  # the work folder's plan: gone when the run ends
        cmd += ["--plan-name", "the compiled plan"]
    if _from_module_weights(args):
        cmd += ["--init-from", init]
    cmd += _dsrun_flags(args)
    if isinstance(plan.config.get("steps_per_print"), int) and plan.config["steps_per_print"] > 0:
        cmd += ["--print-every", str(plan.config["steps_per_print"])]
    if args.oversubscribe:
        cmd.append("--oversubscribe")
    if args.hostfile is not None:
        cmd += ["--hostfile", args.hostfile]
    if args.seed is not None:
        cmd += ["--seed", str(args.seed)]
    monitors = Monitors(plan.config, plan.report()["seq_len"], config_name=plan.config_name,
                        resume=args.resume)
    monitors.open()  # here: wandb.init wants the main thread
    done, failures = threading.Event(), []
    follower = _metrics_follower(metrics, monitors, done, failures)
    try:
        launcher = subprocess.Popen(cmd, process_group=0, preexec_fn=_dies_with_this_process(),
                                    pass_fds=(lock_fd,) if lock_fd is not None else ())
    except OSError as e:
        raise dsc.InputError(f"--num_gpus {args.num_gpus}: cannot start {cmd[0]}: "
                             f"{e.strerror}") from None
    follower.start()

    def forward(signum, frame):
        launcher.send_signal(signum)
    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        status = launcher.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if launcher.poll() is None:  # this process is failing: the job goes with it
            launcher.terminate()
            launcher.wait()
        done.set()
        follower.join()
        monitors.close()
    for e in failures:
        print(f"dsc-train: monitors: {type(e).__name__}: {one_line(str(e))}",
              file=sys.stderr)
    if status != 0:
        return status, None
    return 0, load_file(final)
