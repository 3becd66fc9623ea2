"""The compiled half of the package (_dsc_native, built by CMake from
frontends/torch/native into <build>/python), loaded on first use so that export
works without it."""


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
                "dsc's native module is not built or not on the path: build dsc "
                "with python3-dev and pybind11-dev installed (scripts/build.sh) "
                "and put BUILD/python on PYTHONPATH") from e
        _module = _dsc_native
    return _module


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
