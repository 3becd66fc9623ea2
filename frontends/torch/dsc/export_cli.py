"""`python -m dsc export FILE.py:Class ...`: a PyTorch module to ds MLIR and
its initial weights. Bad input (the file, the class, --model-args, an op
with no mapping, an output path) is one line on stderr and exit status 2,
with nothing written."""
import sys

from .command_line import (USAGE_ERROR, ArgumentParser, InputError, build_module, model_file,
                           print_error)
from .files import check_distinct, check_output


def check_batch(batch_size, block_size):
    """InputError unless --batch-size x --block-size is a batch dsc can
    trace and run (export.py's MAX_TOKENS, read here to name the flags)."""
    from .export import MAX_TOKENS
    for value, flag in ((batch_size, "--batch-size"), (block_size, "--block-size")):
        if value <= 0:
            raise InputError(f"{flag} {value}: must be positive")
        if value > MAX_TOKENS:
            raise InputError(f"{flag} {value}: at most {MAX_TOKENS}")
    if batch_size * block_size > MAX_TOKENS:
        raise InputError(f"--batch-size {batch_size} x --block-size {block_size}: "
                         f"{batch_size * block_size} tokens a micro-batch, at most {MAX_TOKENS}")


def export_main(argv):
    ap = ArgumentParser(prog="dsc export", description="Export a PyTorch module to ds MLIR.")
    ap.add_argument("model", help="FILE.py:ClassName")
    ap.add_argument("--model-args", default="{}", help="JSON object of keyword arguments")
    ap.add_argument("--model-config", default=None,
                    help="JSON object of the fields of the config object the class takes "
                         "(nanoGPT's GPT(GPTConfig(...)), a Hugging Face model's config_class)")
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
        module = build_module(args.model, args.model_args, args.model_config)
        exported = export(module, args.batch_size, args.block_size, loss=args.loss)
        exported.save(args.output, args.weights)
    except (InputError, ExportError) as e:
        print_error("dsc export", e)
        return USAGE_ERROR
    print(f"dsc export: {args.output}: {len(exported.weights)} parameters, "
          f"{sum(v.numel() for v in exported.weights.values())} elements", file=sys.stderr)
    return 0
