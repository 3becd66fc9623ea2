"""The compiled half of the package (_dsc_native, built by CMake from
frontends/torch/native and installed next to the package), loaded on first
use so that export works without it; and where the installed tools are."""
import os
import shutil
import sys


class InputError(ValueError):
    """Bad input to dsc or dsrun (exit status 2 in the tools): the message
    is their one-line description, a line per problem."""


class TrainingError(RuntimeError):
    """Training failed (dsrun's exit status 1): a non-finite loss that loss
    scaling cannot handle, a failing kernel."""


_module = None


def native():
    global _module
    if _module is None:
        try:
            import _dsc_native
        except ImportError as e:
            raise ImportError(
                "dsc's native module is not installed next to the package: "
                "install dsc with `pip install .` from its checkout (docs/install.md)") from e
        _module = _dsc_native
    return _module


def tool_path(name):
    """The tool `name` (dsrun, dsc): from DSC_TOOLS_DIR when it is set, else
    the one installed with this Python (pip puts the tools in the scripts
    folder next to the interpreter), else PATH's; None when there is none."""
    folder = os.environ.get("DSC_TOOLS_DIR")
    if folder:
        path = os.path.join(folder, name)
        return path if os.access(path, os.X_OK) else None
    path = os.path.join(os.path.dirname(sys.executable), name)
    if os.access(path, os.X_OK):
        return path
    return shutil.which(name)


_CONTINUATIONS = ("note:", "did you mean", "(")


def error_lines(text):
    """The problems an error message holds, a line each: a line that only
    continues the one before it (indented, a note, a "Did you mean")
    joins it."""
    lines = []
    for raw in str(text).splitlines():
        line = raw.strip()
        if not line:
            continue
        if lines and (raw[:1].isspace() or line.lower().startswith(_CONTINUATIONS)):
            lines[-1] += " " + line
        else:
            lines.append(line)
    if not lines:  # an exception raised without a message: its class
        lines.append(str(text) if isinstance(text, str) else type(text).__name__)
    return lines


def one_line(text):
    """A message of any number of lines as one: its problems joined."""
    return "; ".join(error_lines(text))
