"""What dsc's command-line programs share (`python -m dsc export`,
`dsc-train`): argparse with one-line errors, errors printed a line per
problem, loading the user's FILE.py:Class and building the module, and the
last resort that turns anything uncaught into one line."""
import argparse
import importlib.util
import json
import os
import sys

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


def _is_module_name(path):
    """'transformers' or 'pkg.models': an installed module, not a file."""
    return (not os.path.exists(path) and not path.endswith(".py")
            and all(part.isidentifier() for part in path.split(".")))


def load_class(spec):
    """'path/to/model.py:ClassName' or 'module:ClassName' (an installed
    module: transformers:LlamaForCausalLM) -> the class."""
    import importlib
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise InputError(f"{spec}: expected FILE.py:ClassName or module:ClassName")
    if _is_module_name(path):
        try:
            mod = importlib.import_module(path)
        except ImportError as e:
            raise InputError(f"{path}: no such file, and importing it as a module failed: "
                             f"{e}") from None
        cls = getattr(mod, name, None)
        if cls is None:
            raise InputError(f"{path}: module defines no {name}")
        return cls
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


def parse_model_args(text, flag="--model-args"):
    try:
        args = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{flag}: not JSON: {e.msg} at column {e.colno}") from None
    except RecursionError:
        raise InputError(f"{flag}: nested too deeply for Python's JSON reader") from None
    if not isinstance(args, dict):
        raise InputError(f"{flag}: expected a JSON object of keyword arguments")
    return args


def config_class(cls):
    """The class of the config object cls's constructor takes, or None:
    its first argument's annotation, Hugging Face's cls.config_class, or
    nanoGPT's convention, a class named <cls>Config beside cls."""
    import inspect
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        params = []
    annotation = params[0].annotation if params else inspect.Parameter.empty
    if annotation is not inspect.Parameter.empty and inspect.isclass(annotation):
        return annotation
    if inspect.isclass(getattr(cls, "config_class", None)):
        return cls.config_class
    named = getattr(sys.modules.get(cls.__module__), cls.__name__ + "Config", None)
    return named if inspect.isclass(named) else None


def model_file(spec):
    """The FILE.py of FILE.py:ClassName (an input of the run); None for an
    installed module's class."""
    path = spec.rpartition(":")[0]
    return None if not path or _is_module_name(path) else path


def build_module(spec, model_args, model_config=None):
    """The module FILE.py:Class(**json(model_args)), or with model_config
    Class(ConfigClass(**json(model_config))) (config_class finds it), in
    training mode, seeded for reproducible initial weights; its failures
    as InputError."""
    import torch
    cls = load_class(spec)
    kwargs = parse_model_args(model_args)
    config = None
    if model_config is not None:
        if kwargs:
            raise InputError("--model-args and --model-config: give one of them")
        fields = parse_model_args(model_config, "--model-config")
        made = config_class(cls)
        if made is None:
            raise InputError(f"{spec}: --model-config: found no config class (the annotation "
                             f"of the constructor's first argument, {cls.__name__}.config_class, "
                             f"or {cls.__name__}Config beside it)")
        try:
            config = made(**fields)
        except Exception as e:
            raise InputError(f"{spec}: --model-config: {made.__name__}(...) failed: "
                             f"{type(e).__name__}: {e}") from None
    torch.manual_seed(0)
    try:
        module = cls(config) if config is not None else cls(**kwargs)
    except Exception as e:  # the user's constructor: any failure is bad input
        hint = ""
        if config is None and kwargs and isinstance(e, TypeError) and config_class(cls):
            hint = (f" (it takes a {config_class(cls).__name__}: pass these as --model-config)")
        raise InputError(f"{spec}: constructing it failed: {type(e).__name__}: {e}{hint}") from None
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
