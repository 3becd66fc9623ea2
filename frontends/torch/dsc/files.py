"""Output files as dsc's tools write them: only over a regular file (or
nothing), through a temporary file in the same folder renamed into place,
so a failure leaves what was there (runtime/core/OutputPath.h's rules)."""
import os
import tempfile

from .native import InputError


def check_output(path, what):
    """Raises InputError unless `path` is absent or a regular file in an
    existing folder; `what` names the flag in the message."""
    if os.path.islink(path) or (os.path.lexists(path) and not os.path.isfile(path)):
        raise InputError(f"{what} {path}: exists and is not a regular file")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise InputError(f"{what} {path}: no such directory {parent}")


def temporary_beside(path):
    """A new empty file next to `path`, with the mode a plain open() would
    give it (mkstemp's is 0600)."""
    parent = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    return tmp


def write_outputs(writers):
    """writers: [(path, write(tmp_path))]. Every file is written to a
    temporary first and renamed only once all were written: all or none.
    OSError becomes InputError naming the path."""
    done = []
    try:
        for path, write in writers:
            tmp = temporary_beside(path)
            done.append((tmp, path))
            try:
                write(tmp)
            except OSError as e:
                raise InputError(f"cannot write {path}: {e.strerror or e}") from None
        for tmp, path in done:
            os.replace(tmp, path)
        done = []
    except OSError as e:
        raise InputError(f"cannot write {e.filename}: {e.strerror}") from None
    finally:
        for tmp, _ in done:
            if os.path.exists(tmp):
                os.unlink(tmp)
