#!/usr/bin/env python3
"""signal_stop.py SIG COUNT DSRUN ARGS...: starts DSRUN ARGS, waits for its
first progress line ("step ..."), sends it COUNT signals SIG (INT or TERM)
and prints its exit status ("exit 130", or "killed by SIGINT" when the
signal's default action ended it) and its stdout and stderr.

No step of it waits for a duration: each waits for the state it needs.
COUNT 2 tests that the second signal ends the run before it saves, so the
run must not be able to finish its step between the two signals, however
fast the machine:
- one process: the test fills dsrun's stdout pipe (through a second open
  file description of it) and waits until dsrun's main thread is blocked
  writing its next progress line (/proc/PID/wchan), which comes before the
  stop check and the save; then the first signal, acknowledged on stderr
  (its handler's line; dsrun's handlers restart the blocked write); the
  second is sent after that line, and the pipe drained only then.
- `--np N` (a launcher, mpirun and N ranks): the test stops (SIGSTOP) every
  rank before the first signal, waits until the launcher has acknowledged
  it and every rank holds the user signal it becomes, sends the second,
  and continues the ranks only once each holds both user signals (the
  second request; or is gone): a stopped rank cannot run a step, let alone
  save, and a continued one handles both before it runs on."""
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time

# A guard against a hung run, never a synchronization.
LIMIT_S = 300


def wait_for(what, check):
    deadline = time.monotonic() + LIMIT_S
    while not check():
        if time.monotonic() > deadline:
            sys.exit(f"signal_stop: timed out waiting for {what}")
        time.sleep(0.01)


def children():
    """pid -> [child pids] of every process."""
    tree = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def descendants(pid):
    """Every process under `pid` (children, theirs, ...)."""
    tree, out, todo = children(), [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            todo.append(child)
            out.append(child)
    return out


def ranks_of(launcher, exe):
    """The processes under `launcher` running `exe` (the ranks)."""
    out = []
    for pid in descendants(launcher):
        try:
            if os.path.samefile(f"/proc/{pid}/exe", exe):
                out.append(pid)
        except OSError:
            pass
    return out


def status_field(pid, field):
    """A /proc/PID/status field, None once the process is gone (or a
    zombie)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            lines = dict(l.split(":", 1) for l in f if ":" in l)
    except OSError:
        return None
    if lines.get("State", "").strip().startswith("Z"):
        return None
    return lines.get(field, "").strip()


def holds(pid, sig):
    """Whether `pid` has `sig` pending (or is gone)."""
    pending = [status_field(pid, f) for f in ("SigPnd", "ShdPnd")]
    if None in pending:
        return True
    return any(int(p, 16) >> (sig - 1) & 1 for p in pending)


def blocked_writing(pid):
    """Whether `pid`'s main thread is blocked writing to a pipe (its
    stdout, which the test has filled)."""
    try:
        with open(f"/proc/{pid}/wchan") as f:
            if "pipe_write" in f.read():
                return True
        with open(f"/proc/{pid}/syscall") as f:
            call = f.read().split()
    except OSError:
        return False
    # Kernels that hide wchan: write(1, ...) (x86-64: 1, arm64: 64).
    return len(call) > 1 and call[0] in ("1", "64") and call[1] == "0x1"


def drain(fd, out):
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        out.append(chunk)


def main(argv):
    if len(argv) < 4:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    sig = getattr(signal, "SIG" + argv[1])
    count = int(argv[2])
    cmd = argv[3:]
    ranked = any(a == "--np" or a.startswith("--np=") for a in cmd)
    read_end, write_end = os.pipe()
    p = subprocess.Popen(cmd, stdout=write_end, stderr=subprocess.PIPE)
    # A second open file description of the same pipe: O_NONBLOCK on it
    # leaves dsrun's own writes blocking.
    filler = os.open(f"/proc/self/fd/{write_end}", os.O_WRONLY | os.O_NONBLOCK)
    os.close(write_end)

    err, acknowledged = [], threading.Event()

    def read_err():
        for line in p.stderr:
            err.append(line)
            if b"again to stop now" in line:
                acknowledged.set()
        acknowledged.set()
    err_reader = threading.Thread(target=read_err)
    err_reader.start()

    # The filler holds the pipe open: the end of dsrun's output is its exit.
    out, pending = [], b""
    while b"\nstep " not in b"\n" + pending and p.poll() is None:
        if select.select([read_end], [], [], 0.1)[0]:
            pending += os.read(read_end, 65536)
    out.append(pending)
    if p.poll() is not None:
        count = 0  # it ended by itself: nothing to signal

    drainer = None
    if count < 2 or ranked:
        # Nothing here needs dsrun blocked: its output is read as it comes.
        os.close(filler)
        filler = None
        drainer = threading.Thread(target=drain, args=(read_end, out))
        drainer.start()
    if count == 1:
        p.send_signal(sig)
    elif ranked:
        ranks = ranks_of(p.pid, shutil.which(cmd[0]))
        if not ranks:
            sys.exit(f"signal_stop: no {cmd[0]} ranks under the launcher")
        for r in ranks:
            os.kill(r, signal.SIGSTOP)
        wait_for("the ranks to stop",
                 lambda: all(status_field(r, "State") in (None, "") or
                             status_field(r, "State").startswith("T")
                             for r in ranks))
        p.send_signal(sig)
        wait_for("the launcher's acknowledgement", acknowledged.is_set)
        wait_for("SIGUSR1 at every rank",
                 lambda: all(holds(r, signal.SIGUSR1) or
                             holds(r, signal.SIGUSR2) for r in ranks))
        p.send_signal(sig)
        wait_for("the second request at every rank",
                 lambda: all(holds(r, signal.SIGUSR1) and
                             holds(r, signal.SIGUSR2) for r in ranks))
        for r in ranks:
            try:
                os.kill(r, signal.SIGCONT)
            except ProcessLookupError:
                pass
    else:
        try:
            while True:
                os.write(filler, b"\0" * 4096)
        except BlockingIOError:
            pass
        try:
            while True:
                os.write(filler, b"\0")
        except BlockingIOError:
            pass
        wait_for("dsrun to block on its stdout",
                 lambda: blocked_writing(p.pid) or p.poll() is not None)
        p.send_signal(sig)
        wait_for("dsrun's acknowledgement", acknowledged.is_set)
        p.send_signal(sig)
    if filler is not None:
        os.close(filler)
        drain(read_end, out)
    else:
        drainer.join()
    p.wait()
    err_reader.join()
    rc = p.returncode
    print(f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exit {rc}")
    sys.stdout.write(b"".join(out).replace(b"\0", b"").decode(errors="replace"))
    sys.stdout.write(b"".join(err).decode(errors="replace"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
