"""`python -m dsc export FILE.py:Class ...`: a PyTorch module to ds MLIR and
its initial weights. Bad input (the file, the class, --model-args, an op
with no mapping, an output path) is one line on stderr and exit status 2,
with nothing written."""
import argparse
import importlib.util
import json
import os
import sys

from .files import check_distinct, check_output
from .native import InputError as _InputError
from .native import error_lines, one_line

USAGE_ERROR = 2


# Bad input, one line: the package's own (dsc.InputError).
InputError = _InputError


class ArgumentParser(argparse.ArgumentParser):
    """argparse with dsc's errors: one line, "PROG: MESSAGE (see --help)",
    exit status 2, instead of a usage block."""

    def error(self, message):
        print(f"{self.prog}: {one_line(message)} (see --help)", file=sys.stderr)
        sys.exit(USAGE_ERROR)


def print_error(prog, error):
    """An error as dsc's tools print it: a line per problem, each naming
    the program."""
    for line in error_lines(error):
        print(f"{prog}: {line}", file=sys.stderr)


# A micro-batch's token count: dsc's plans index tokens in 32 bits
# (compiler/Compile.cpp's kMaxBatch).
MAX_TOKENS = 1 << 31


def check_batch(batch_size, block_size):
    """InputError unless --batch-size x --block-size is a batch dsc can
    trace and run."""
    for value, flag in ((batch_size, "--batch-size"), (block_size, "--block-size")):
        if value <= 0:
            raise InputError(f"{flag} {value}: must be positive")
        if value > MAX_TOKENS:
            raise InputError(f"{flag} {value}: at most {MAX_TOKENS}")
    if batch_size * block_size > MAX_TOKENS:
        raise InputError(f"--batch-size {batch_size} x --block-size {block_size}: "
                         f"{batch_size * block_size} tokens a micro-batch, at most {MAX_TOKENS}")


def load_class(spec):
    """'path/to/model.py:ClassName' -> the class."""
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise InputError(f"{spec}: expected FILE.py:ClassName")
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file")
    if not os.path.isfile(path):  # a FIFO would block the import
        raise InputError(f"{path}: cannot read: not a regular file")
    module_name = "dsc_user_model_" + os.path.splitext(os.path.basename(path))[0]
    loader = importlib.util.spec_from_file_location(module_name, path)
    if loader is None:
        raise InputError(f"{path}: not a Python file")
    mod = importlib.util.module_from_spec(loader)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    sys.modules[module_name] = mod
    try:
        loader.loader.exec_module(mod)
    except Exception as e:
        raise InputError(f"{path}: importing it failed: {type(e).__name__}: {e}") from None
    cls = getattr(mod, name, None)
    if cls is None:
        raise InputError(f"{path}: defines no {name}")
    return cls


def parse_model_args(text):
    try:
        args = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"--model-args: not JSON: {e.msg} at column {e.colno}") from None
    except RecursionError:
        raise InputError("--model-args: nested too deeply for Python's JSON reader") from None
    if not isinstance(args, dict):
        raise InputError("--model-args: expected a JSON object of keyword arguments")
    return args


def export_main(argv):
    ap = ArgumentParser(prog="dsc export", description="Export a PyTorch module to ds MLIR.")
    ap.add_argument("model", help="FILE.py:ClassName")
    ap.add_argument("--model-args", default="{}", help="JSON object of keyword arguments")
    ap.add_argument("--batch-size", type=int, required=True)
    ap.add_argument("--block-size", type=int, required=True)
    ap.add_argument("--loss", default="module", choices=("module", "cross_entropy"),
                    help="module: module(tokens, targets) returns the loss; "
                         "cross_entropy: module(tokens) returns logits")
    ap.add_argument("-o", "--output", required=True, help="the ds MLIR file")
    ap.add_argument("--weights", help="initial weights (safetensors)")
    args = ap.parse_args(argv)
    from .export import ExportError, export
    try:
        check_batch(args.batch_size, args.block_size)
        outputs = [("-o", args.output), ("--weights", args.weights)]
        for flag, path in outputs:
            if path is not None:
                check_output(path, flag)
        check_distinct([("the model", model_file(args.model))], outputs)
        module = build_module(args.model, args.model_args)
        exported = export(module, args.batch_size, args.block_size, loss=args.loss)
        exported.save(args.output, args.weights)
    except (InputError, ExportError) as e:
        print_error("dsc export", e)
        return USAGE_ERROR
    print(f"dsc export: {args.output}: {len(exported.weights)} parameters, "
          f"{sum(v.numel() for v in exported.weights.values())} elements", file=sys.stderr)
    return 0


def model_file(spec):
    """The FILE.py of FILE.py:ClassName (an input of the run)."""
    return spec.rpartition(":")[0] or None


def build_module(spec, model_args):
    """The module FILE.py:Class(**json(model_args)) in training mode, seeded
    for reproducible initial weights; its failures as InputError."""
    import torch
    cls = load_class(spec)
    kwargs = parse_model_args(model_args)
    torch.manual_seed(0)
    try:
        module = cls(**kwargs)
    except Exception as e:  # the user's constructor: any failure is bad input
        raise InputError(f"{spec}: constructing it failed: {type(e).__name__}: {e}") from None
    if not isinstance(module, torch.nn.Module):
        raise InputError(f"{spec}: not a torch.nn.Module")
    module.train()
    return module


def last_resort(prog, run):
    """run() with what nothing else caught as one line: Ctrl-C (exit
    130) or an unexpected exception (exit 1; DSC_TRACEBACK=1 raises it,
    for a bug report)."""
    try:
        return run()
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a defect here or in the user's module
        if os.environ.get("DSC_TRACEBACK") == "1":
            raise
        print(f"{prog}: {type(e).__name__}: {one_line(str(e))} "
              "(DSC_TRACEBACK=1 shows where)", file=sys.stderr)
        return 1


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("export", "train"):
        got = f"'{argv[0]}'" if argv else "nothing"
        print(f"python -m dsc: expected export or train, got {got} "
              "(see python -m dsc export --help, python -m dsc train --help)", file=sys.stderr)
        return USAGE_ERROR
    if argv[0] == "train":
        from .train_cli import main as train_main
        return train_main(argv[1:])
    return last_resort("dsc export", lambda: export_main(argv[1:]))
