"""`python -m dsc export FILE.py:Class ...`: a PyTorch module to ds MLIR and
its initial weights. Bad input (the file, the class, --model-args, an op
with no mapping, an output path) is one line on stderr and exit status 2,
with nothing written."""
import argparse
import importlib.util
import json
import os
import sys

from .files import check_output, write_outputs
from .native import InputError as _InputError

USAGE_ERROR = 2


# Bad input, one line: the package's own (dsc.InputError).
InputError = _InputError


def load_class(spec):
    """'path/to/model.py:ClassName' -> the class."""
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise InputError(f"{spec}: expected FILE.py:ClassName")
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file")
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
    if not isinstance(args, dict):
        raise InputError("--model-args: expected a JSON object of keyword arguments")
    return args


def export_main(argv):
    ap = argparse.ArgumentParser(prog="python -m dsc export",
                                 description="Export a PyTorch module to ds MLIR.")
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
        for value, flag in ((args.batch_size, "--batch-size"), (args.block_size, "--block-size")):
            if value <= 0:
                raise InputError(f"{flag} {value}: must be positive")
        check_output(args.output, "-o")
        if args.weights:
            check_output(args.weights, "--weights")
            if os.path.abspath(args.weights) == os.path.abspath(args.output):
                raise InputError(f"--weights {args.weights}: the same file as -o")
        module = build_module(args.model, args.model_args)
        exported = export(module, args.batch_size, args.block_size, loss=args.loss)

        def write_mlir(tmp):
            with open(tmp, "w") as f:
                f.write(exported.mlir)
        writers = [(args.output, write_mlir)]
        if args.weights:
            from safetensors.torch import save_file
            writers.append((args.weights, lambda tmp: save_file(
                {k: v.detach().contiguous() for k, v in exported.weights.items()}, tmp)))
        write_outputs(writers)
    except (InputError, ExportError) as e:
        print(f"dsc export: {e}", file=sys.stderr)
        return USAGE_ERROR
    print(f"dsc export: {args.output}: {len(exported.weights)} parameters, "
          f"{sum(v.numel() for v in exported.weights.values())} elements", file=sys.stderr)
    return 0


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


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("export", "train"):
        print("usage: python -m dsc export FILE.py:Class --batch-size B --block-size T "
              "-o OUT.mlir [--weights OUT.safetensors]\n"
              "       python -m dsc train FILE.py:Class --deepspeed_config ds_config.json "
              "--data FILE [...] (dsc-train)", file=sys.stderr)
        return USAGE_ERROR
    if argv[0] == "train":
        from .train_cli import main as train_main
        return train_main(argv[1:])
    return export_main(argv[1:])
