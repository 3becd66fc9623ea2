"""The files dsc's Python side reads and writes, by the tools' rules, in one
place (the C++ side's are runtime/core/InputFile.h, OutputPath.h and
PathRules.h; the messages are theirs).

- Inputs read whole are regular files under a size limit: a FIFO would
  block and /dev/zero would never end, so the file is opened non-blocking
  and refused unless fstat says regular.
- Outputs are regular files (through a symbolic link, its target) or
  /dev/null. A FIFO or another device is refused, and so is an output that
  is the same file as an input or as another output of the run (same device
  and inode; for a path not there yet, its resolved folder and name), all
  before anything is opened for writing.
- A file is written to a temporary beside it and renamed into place, so a
  failure leaves what was there.
- Each output's folder must take new files, checked before the work starts.
- Work folders (`work_folder`) are removed when the run ends, also on
  SIGTERM; one left by a SIGKILLed run is removed by the next run.
"""
import contextlib
import errno
import fcntl
import os
import shutil
import stat
import tempfile

from .native import InputError

CONFIG_LIMIT = 16 << 20  # a ds_config.json: compiler/Compile.cpp's limit
MLIR_LIMIT = 1 << 30  # a model's MLIR holds no weights


def _limit_text(limit):
    units = ("bytes", "KiB", "MiB", "GiB", "TiB")
    unit = 0
    while unit < len(units) - 1 and limit >= 1024 and limit % 1024 == 0:
        limit //= 1024
        unit += 1
    return f"{limit} {units[unit]}"


def read_input(path, limit):
    """The bytes of the regular file `path`, at most `limit` of them.
    InputError: "PATH: cannot open: REASON" or "PATH: cannot read: REASON"
    (not a regular file, larger than the limit)."""
    path = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise InputError(f"{path}: cannot open: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{path}: cannot read: not a regular file")
        if st.st_size > limit:
            raise InputError(f"{path}: cannot read: larger than {_limit_text(limit)}")
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > limit:  # grew while read
                raise InputError(f"{path}: cannot read: larger than {_limit_text(limit)}")
            chunks.append(chunk)
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None
    finally:
        os.close(fd)


def read_text(path, limit):
    """read_input as text; bytes that are not UTF-8 become U+FFFD, for the
    parser to report where they are."""
    return read_input(path, limit).decode("utf-8", errors="replace")


def is_null_device(st):
    """By device number, so /dev/./null and links to it count."""
    try:
        null = os.stat(os.devnull)
    except OSError:
        return False
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == null.st_rdev


def _identity(path):
    """What `path` names, for comparison (PathRules.h's identifyPath): None
    for nothing comparable ("-", /dev/null, unreachable), ("inode", dev,
    ino) for an existing file, ("path", resolved folder/name) otherwise."""
    path = os.fspath(path)
    if not path or path == "-":
        return None
    try:
        st = os.stat(path)
    except OSError:
        pass
    else:
        return None if is_null_device(st) else ("inode", st.st_dev, st.st_ino)
    folder, name = os.path.split(path)
    if not name:
        return None
    try:
        resolved = os.path.realpath(folder or ".", strict=True)
    except OSError:
        return None  # the write itself will say what is wrong
    return ("path", os.path.join(resolved, name))


def check_distinct(inputs, outputs):
    """inputs, outputs: [(what, path)], `what` a flag ("--data") or a phrase
    for a positional argument ("the model"); None paths are skipped.
    InputError if an output is the same file as an input or an earlier
    output (PathRules.h's checkOutputsDistinct, its lines)."""
    inputs = [(w, os.fspath(p)) for w, p in inputs if p is not None]
    outputs = [(w, os.fspath(p)) for w, p in outputs if p is not None]
    input_ids = [_identity(p) for _, p in inputs]
    output_ids = []
    for what, path in outputs:
        ident = _identity(path)
        if ident is not None:
            for (in_what, in_path), in_id in zip(inputs, input_ids):
                if ident == in_id:
                    raise InputError(f"{what} {path}: is the same file as {in_what} {in_path}; "
                                     "refusing to overwrite an input")
            for (out_what, out_path), out_id in zip(outputs, output_ids):
                if ident == out_id:
                    raise InputError(f"{what} {path}: is the same file as {out_what} {out_path}; "
                                     "give each output its own file")
        output_ids.append(ident)


def check_output(path, what):
    """InputError unless `path` may be written as an output: /dev/null, or
    nothing or a regular file (through a link, its target) in a folder that
    takes new files (the write goes through a temporary beside it)."""
    path = os.fspath(path)
    if not path:
        raise InputError(f"{what}: an empty path")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.lexists(path):
            raise InputError(f"{what} {path}: a symbolic link to nothing; "
                             "refusing to replace it") from None
        st = None
    except OSError as e:
        raise InputError(f"{what} {path}: {e.strerror}") from None
    if st is not None:
        if is_null_device(st):
            return
        if stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
            kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device"
            raise InputError(f"{what} {path}: is {kind}; outputs must be regular files or "
                             "/dev/null")
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise InputError(f"{what} {path}: is {kind}; refusing to replace it")
    parent = os.path.dirname(_target(path))
    if not os.path.isdir(parent):
        raise InputError(f"{what} {path}: no such directory {parent}")
    check_folder_writable(parent, what, path)


def check_folder_writable(folder, what, path):
    """InputError unless a file can be made in `folder` (the one `path`
    goes to): tried with a temporary folder made and removed, since
    permission bits say nothing for root or a read-only mount."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".dsc-probe-", dir=folder))
    except OSError as e:
        raise InputError(f"{what} {path}: cannot create files in {folder}: "
                         f"{e.strerror}") from None


def check_output_folder(path, what, parents=False):
    """A folder that outputs go into, created if absent: InputError unless
    it is or can become a folder taking files. Its parent must exist, or,
    with `parents`, its nearest existing ancestor be a folder."""
    path = os.fspath(path)
    if not path:
        raise InputError(f"{what}: an empty path")
    if os.path.isdir(path):
        check_folder_writable(path, what, path)
        return
    if os.path.lexists(path):
        raise InputError(f"{what} {path}: exists and is not a directory")
    parent = os.path.dirname(os.path.abspath(path))
    while parents and not os.path.lexists(parent) and parent != os.path.dirname(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        problem = "its parent is not a directory" if not parents else f"{parent} is not a directory"
        raise InputError(f"{what} {path}: {problem}")
    check_folder_writable(parent, what, path)


def _target(path):
    """What a write to `path` replaces: a link's target, else the path."""
    return os.path.realpath(path) if os.path.lexists(path) else os.path.abspath(path)


def _direct(path):
    try:
        return is_null_device(os.stat(path))
    except OSError:
        return False


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


def write_safetensors(tensors, path):
    """Writes `tensors` to `path` as safetensors, through a plain open().
    safetensors' own save_file writes a temporary and renames it over its
    path (0.8 does), which replaced /dev/null itself with a regular file:
    here the bytes are made in memory and write_outputs' rules (our own
    temporary beside the target, /dev/null written as it is) hold."""
    from safetensors.torch import save
    # {"format": "pt"}: Hugging Face's from_pretrained refuses a file
    # without it (safetensors' save_file writes none by itself).
    data = save(tensors, metadata={"format": "pt"})
    with open(path, "wb") as f:
        f.write(data)


def write_outputs(writers):
    """writers: [(path, write(path_to_write))]. Each file is written to a
    temporary beside its target first, and all are renamed into place only
    once every one was written: all or none. /dev/null is written as it is.
    OSError becomes InputError naming the path."""
    done = []
    try:
        for path, write in writers:
            if _direct(path):
                direct = path
                try:
                    write(direct)
                except OSError as e:
                    raise InputError(f"cannot write {path}: {e.strerror or e}") from None
                continue
            tmp = temporary_beside(_target(path))
            done.append((tmp, _target(path)))
            try:
                write(tmp)
            except OSError as e:
                raise InputError(f"cannot write {path}: {e.strerror or e}") from None
        for tmp, target in done:
            os.replace(tmp, target)
        done = []
    except OSError as e:
        raise InputError(f"cannot write {e.filename}: {e.strerror}") from None
    finally:
        for tmp, _ in done:
            if os.path.exists(tmp):
                os.unlink(tmp)


WORK_PREFIX = "dsc-train-"
_LOCK = ".lock"


def _sweep_abandoned(root):
    """Removes the work folders under `root` whose run is gone: a live run
    holds an exclusive lock on its folder's .lock, which the kernel drops
    when the process dies, however it dies."""
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        folder = os.path.join(root, name)
        if not name.startswith(WORK_PREFIX) or os.path.islink(folder):
            continue
        try:
            fd = os.open(os.path.join(folder, _LOCK), os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue  # not one of ours, or not ours to remove
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
        else:
            shutil.rmtree(folder, ignore_errors=True)
        finally:
            os.close(fd)


class WorkFolder:
    """`path`: the folder; `lock_fd`: the descriptor holding its lock, for a
    child process that should keep the folder alive as long as it runs
    (subprocess's pass_fds)."""

    def __init__(self, path, lock_fd):
        self.path = path
        self.lock_fd = lock_fd


@contextlib.contextmanager
def work_folder():
    """A temporary WorkFolder for one run (plan, initial and final weights,
    metrics), removed when the block ends. It holds a lock for as long as
    this process (or a child given the lock) lives, so the next run removes
    it if a SIGKILL kept this one from doing so (`_sweep_abandoned`)."""
    root = tempfile.gettempdir()
    _sweep_abandoned(root)
    folder = tempfile.mkdtemp(prefix=WORK_PREFIX, dir=root)
    # Locked before it gets its name: a sweep never sees an unlocked .lock.
    fd, pending = tempfile.mkstemp(prefix=".lock.", dir=folder)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(pending, os.path.join(folder, _LOCK))
        yield WorkFolder(folder, fd)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.close(fd)
