"""dsc.compile and dsc.train: the dsc and dsrun tools as Python calls, over
the same libraries (the _dsc_native module).

    plan = dsc.compile(model, "ds_config.json", block_size=256)
    print(plan)                      # dsc --report
    result = dsc.train(plan, "input.txt", steps=200,
                       callback=lambda r: print(r["step"], r["loss"]))
    model.load_state_dict(result.state_dict())
"""
import contextlib
import json
import os
import re

from .files import (CONFIG_LIMIT, MLIR_LIMIT, check_distinct, check_output, read_text,
                    work_folder, write_outputs)
from .native import InputError, TrainingError, native

DEFAULT_MICRO_BATCH = 4  # dsc's, when the config gives no batch sizes


def _excerpt(text, width=40):
    text = " ".join(text.split())
    return repr(text if len(text) <= width else text[:width] + "...")


def _read_config(config):
    """(dict, text, name) from None, a dict, a path or JSON text. Text that
    is not a JSON object reads as {} here: dsc's own parser reports it."""
    if config is None:
        return {}, None, "ds_config.json"
    if isinstance(config, dict):
        return config, json.dumps(config), "ds_config.json"
    text, name = os.fspath(config), "ds_config.json"
    if not text.lstrip().startswith("{"):
        name, text = text, read_text(text, CONFIG_LIMIT)
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        parsed = {}
    return (parsed if isinstance(parsed, dict) else {}), text, name


def _micro_batch(config, world_size):
    """train_micro_batch_size_per_gpu, or what DeepSpeed's batch triple
    implies over the data-parallel replicas (a tensor-parallel or Ulysses
    group shares one batch); dsc's parser checks the triple itself."""
    micro = config.get("train_micro_batch_size_per_gpu")
    if isinstance(micro, int):
        return micro
    total = config.get("train_batch_size")
    accum = config.get("gradient_accumulation_steps", 1)
    def size(v):  # a group size as written; anything else is 1 here
        return v if isinstance(v, int) and v > 0 else 1
    tp = config.get("tensor_parallel")
    group = size((tp if isinstance(tp, dict) else {}).get("autotp_size"))
    group *= size(config.get("sequence_parallel_size"))
    replicas = max(1, world_size // group)
    if isinstance(total, int) and isinstance(accum, int) and accum > 0:
        return max(1, total // (accum * replicas))
    return DEFAULT_MICRO_BATCH


def _block_size(module):
    cfg = getattr(module, "config", None)
    for name in ("block_size", "max_position_embeddings", "n_positions"):
        value = getattr(cfg, name, None)
        if isinstance(value, int):
            return value
    return None


class Plan:
    """A compiled training step: the plan file's bytes, what --report says
    (`report()` as data, `str(plan)` as text), and, for a PyTorch module,
    what maps dsrun's weights back to its state dict (`exported`)."""

    def __init__(self, data, report, report_text, notes, config, exported=None):
        self.data = data
        self._report = report
        self.report_text = report_text
        self.notes = notes
        self.config = config
        self.exported = exported
        self.path = None
        self.config_name = "ds_config.json"  # the config's name in messages

    def report(self):
        return json.loads(json.dumps(self._report))  # a copy

    def __str__(self):
        return self.report_text

    def save(self, path):
        """Writes the plan file (only over a regular file, all or nothing)."""
        path = os.fspath(path)
        check_output(path, "plan")

        def write(tmp):
            with open(tmp, "wb") as f:
                f.write(self.data)
        write_outputs([(path, write)])
        self.path = path
        return path


def compile(source=None, config=None, *, model=None, block_size=None, loss="module",
            world_size=1, remat=None, activation_memory=None, device_memory=None,
            no_decay=None):
    """Compiles a training step.

    source: a torch.nn.Module (exported with dsc.export at the config's
    micro-batch and `block_size`, default the module's config.block_size or
    max_position_embeddings; `loss` as in dsc.export), an Exported, ds MLIR
    text, or the path of a .mlir file. model: a built-in model instead
    ("gpt2:n_layer=2,..."). config: a ds_config.json path, its text, or a
    dict. no_decay: parameter names that take no weight decay, every other
    parameter decaying (DeepSpeed's parameter groups); None: the parameters
    of rank >= 2 decay (nanoGPT's rule). Raises dsc.InputError with dsc's
    message on bad input."""
    from .export import Exported, export
    cfg, cfg_text, cfg_name = _read_config(config)
    exported = None
    if model is not None:
        if source is not None:
            raise InputError("give a source or model=, not both")
        text, is_spec, name = model, True, model
    elif isinstance(source, Exported):
        exported = source
        text, is_spec, name = source.mlir, False, "model.mlir"
    elif isinstance(source, (str, os.PathLike)):
        text = os.fspath(source)
        if "\n" in text or re.match(r"\s*module\s*(@|\{|attributes\b)", text):
            name = "model.mlir"
        elif os.path.lexists(text):
            name, text = text, read_text(text, MLIR_LIMIT)
        else:
            raise InputError(f"{_excerpt(text)}: neither an existing file nor ds MLIR text "
                             "(a module: 'module @name {...}')")
        is_spec = False
    else:
        import torch
        if not isinstance(source, torch.nn.Module):
            raise InputError(f"cannot compile a {type(source).__name__}: give a torch.nn.Module, "
                             "an Exported, ds MLIR or model=")
        block = block_size or _block_size(source)
        if block is None:
            raise InputError("block_size: the module's config does not say its sequence "
                             "length; pass block_size=")
        exported = export(source, _micro_batch(cfg, world_size), block, loss=loss)
        text, is_spec, name = exported.mlir, False, type(source).__name__ + ".mlir"
    try:
        data, report, report_text, notes = native().compile(
            text, is_spec, name, cfg_text, cfg_name, world_size, remat or "",
            activation_memory, device_memory or "",
            None if no_decay is None else [str(n) for n in no_decay])
    except native().InputError as e:
        raise InputError(str(e)) from None
    plan = Plan(data, report, report_text, notes, cfg, exported)
    plan.config_name = cfg_name or plan.config_name
    return plan


class TrainResult:
    """What dsc.train returns: the per-step records (`history`, as dsrun's
    --metrics lines), the final weights under the plan's parameter names,
    and `state_dict()` for the exported module (tied and buffer entries
    filled in, so load_state_dict(strict=True) accepts it)."""

    def __init__(self, history, weights, exported):
        self.history = history
        self.weights = weights
        self._exported = exported

    @property
    def losses(self):
        return [r["loss"] for r in self.history]

    def state_dict(self):
        if self._exported is None:
            return dict(self.weights)
        return self._exported.state_dict_from(self.weights)


@contextlib.contextmanager
def _fd_into(fd, path):
    """File descriptor `fd` (1 or 2, where dsrun's C++ writes) goes to
    `path` while the block runs."""
    import ctypes
    import sys
    (sys.stdout if fd == 1 else sys.stderr).flush()
    saved = os.dup(fd)
    with open(path, "wb") as f:
        os.dup2(f.fileno(), fd)
    try:
        yield
    finally:
        ctypes.CDLL(None).fflush(None)  # C's buffered output, into `path`
        os.dup2(saved, fd)
        os.close(saved)


def _plan_args(plan, tmp):
    """dsrun's plan argument: a Plan's file, or one written into `tmp`,
    which dsrun's messages then call "the compiled plan" (the file is gone
    when they are read)."""
    if not isinstance(plan, Plan):
        return [os.fspath(plan)]
    if plan.path is not None:
        return [plan.path]
    path = os.path.join(tmp, "plan.dsplan")
    with open(path, "wb") as f:
        f.write(plan.data)
    return [path, "--plan-name", "the compiled plan"]


def _init_args(init, exported, tmp):
    """--init-from: `init` (a path, or tensors written into `tmp`), else
    the exported module's own weights (none when `exported` is None)."""
    from safetensors.torch import save_file
    if init is not None and not isinstance(init, dict):
        return ["--init-from", os.fspath(init)]
    if init is not None:
        weights = {k: v.detach().float().contiguous() for k, v in init.items()}
    elif exported is not None:
        weights = {k: v.detach().contiguous() for k, v in exported.weights.items()}
    else:
        return []
    path = os.path.join(tmp, "init.safetensors")
    save_file(weights, path)
    return ["--init-from", path]


def _is_array(data):
    """A numpy array (a memmap too) or a torch tensor, not a path."""
    return hasattr(data, "dtype") and hasattr(data, "shape")


def _data_path(data, tmp, name):
    """dsrun's --data for `data`: a path as it is; a numpy memmap of a
    nanoGPT .bin file (uint16, the whole file) by its file, without a copy;
    any other array of integers (numpy or torch) saved as a .npy file in
    the work folder, flattened in C order."""
    if data is None or not _is_array(data):
        return None if data is None else os.fspath(data)
    import numpy as np
    if hasattr(data, "detach"):  # a torch tensor
        data = data.detach().cpu().numpy()
    filename = getattr(data, "filename", None)
    if (filename and str(filename).endswith(".bin") and data.dtype == np.uint16
            and getattr(data, "offset", 0) == 0 and data.flags["C_CONTIGUOUS"]
            and data.nbytes == os.path.getsize(filename)):
        return os.fspath(filename)
    if not np.issubdtype(data.dtype, np.integer):
        raise InputError(f"{name}: an array of {data.dtype}; tokens are integers")
    path = os.path.join(tmp, name.lstrip("-") + ".npy")
    np.save(path, np.ascontiguousarray(data).reshape(-1))
    return path


def train(plan, data=None, steps=100, callback=None, *, init=None, seed=None,
          eval_data=None, eval_split=None, eval_every=None, save_dir=None, save_every=None,
          resume=False,
          metrics=None, trace=None, monitor=True, backend=None, quiet=False):
    """Trains `plan` (a Plan, or the path of a .dsplan) in this process, as
    `dsrun PLAN --data DATA --steps STEPS ...` does, calling callback(record)
    after every optimizer step with the record dsrun's --metrics writes.
    `data` and `eval_data`: a file's path (dsrun --data: .bin, .npy or
    bytes), or an array of token ids (numpy, a numpy memmap, or a torch
    tensor; any shape, read in C order).
    Initial weights: `init` (a safetensors path or a dict of tensors), else
    the exported module's own. The config's tensorboard, csv_monitor and
    wandb sections are written unless monitor=False (dsc.monitor). Raises
    InputError (bad input), TrainingError (a failed run) or
    KeyboardInterrupt (SIGINT: the step in flight finishes and, with
    save_dir, is saved first)."""
    from safetensors.torch import load_file

    from .monitor import Monitors
    exported = plan.exported if isinstance(plan, Plan) else None
    config = plan.config if isinstance(plan, Plan) else {}
    # What this call writes is checked before anything is: the outputs
    # dsrun writes by its own rule as well (PathRules.h), the monitors'
    # folders and files by monitor.check_monitors.
    inputs = [("the plan", plan.path if isinstance(plan, Plan) else plan),
              ("--data", None if _is_array(data) else data),
              ("--init-from", None if isinstance(init, dict) else init),
              ("--eval-data", None if _is_array(eval_data) else eval_data)]
    outputs = [("--metrics", metrics), ("--trace", trace)]
    for flag, path in outputs:
        if path is not None:
            check_output(path, flag)
    check_distinct(inputs, outputs)
    seq_len = plan.report()["seq_len"] if isinstance(plan, Plan) else None
    config_name = getattr(plan, "config_name", "ds_config.json")
    monitors = Monitors(config, seq_len, inputs, config_name, resume) if monitor else None
    with work_folder() as work:
        tmp = work.path
        args = _plan_args(plan, tmp) + ["--steps", str(steps)]
        if data is not None:
            args += ["--data", _data_path(data, tmp, "--data")]
        eval_data = _data_path(eval_data, tmp, "--eval-data")
        args += _init_args(init, None if resume else exported, tmp)
        for flag, value in (("--seed", seed), ("--eval-data", eval_data),
                            ("--eval-split", eval_split),
                            ("--eval-every", eval_every), ("--save-dir", save_dir),
                            ("--save-every", save_every), ("--metrics", metrics),
                            ("--trace", trace), ("--backend", backend)):
            if value is not None:
                args += [flag, os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
        if resume:
            args.append("--resume")
        if isinstance(config.get("steps_per_print"), int) and config["steps_per_print"] > 0:
            args += ["--print-every", str(config["steps_per_print"])]
        final = os.path.join(tmp, "final.safetensors")
        args += ["--export-weights", final, "--quiet-export"]

        history = []

        def on_step(record):
            history.append(record)
            if monitors is not None:
                monitors.write(record)
            if callback is not None:
                callback(record)

        log = os.path.join(tmp, "stderr")
        lines = []
        try:
            with contextlib.ExitStack() as stack:
                if quiet:
                    stack.enter_context(_fd_into(1, os.devnull))
                stack.enter_context(_fd_into(2, log))
                status = native().train(args, on_step)
        finally:
            if monitors is not None:
                monitors.close()
            # dsrun's lines, also when the callback raised.
            lines = [line for line in open(log, errors="replace").read().splitlines() if line]
            if not quiet:
                import sys
                for line in lines:
                    print(line, file=sys.stderr)
        message = next((line for line in reversed(lines) if line.startswith("dsrun:")),
                       f"dsrun exited with status {status}")
        if status == 2:
            raise InputError(message)
        if status == 1:
            raise TrainingError(message)
        if status in (130, 143):
            interrupted = KeyboardInterrupt(message)
            interrupted.status = status  # 143: SIGTERM
            raise interrupted
        if status != 0:
            raise TrainingError(message)
        weights = load_file(final) if os.path.exists(final) else {}
    return TrainResult(history, weights, exported)
