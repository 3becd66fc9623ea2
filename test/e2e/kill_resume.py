#!/usr/bin/env python3
"""kill_resume.py [--prune] DSRUN PLAN DATA STEPS OUT [ARGS...]: trains PLAN for
STEPS steps with --save-every 3, SIGKILLing dsrun at random moments (seeded, so
a run is repeatable) and resuming each time, until it finishes; then trains it
once without interruption and checks that every step's loss, as each
attempt reported it, and the final weights are bitwise the uninterrupted
run's. Some kills land during a save (the .partial directory is left
behind): the next attempt must ignore it and resume from the previous
commit. ARGS go to every dsrun (--np 3: the launcher is what is killed,
and its mpirun and ranks must die with it before the next attempt; the
script waits until every process under the launcher is gone).

--prune: saves every step with --keep 2, so every save prunes, and each kill
lands while a prune is under way: when the checkpoint directory gets a
step-N.pruning entry (inotify), at a random moment in the next half
millisecond (before, during or after the deletion). A kill must never
leave a step-N that resuming takes for a commit and cannot load. Prints the
kills (and how many left a .pruning behind) and `ok`; exit 1 on a
difference."""
import ctypes
import json
import os
import random
import select
import signal
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from signal_stop import descendants, status_field  # noqa: E402

IN_MOVED_TO = 0x80
IN_CREATE = 0x100
# A guard against a hung attempt, never a synchronization.
LIMIT_S = 300


def losses(path):
    """step -> [losses] of one attempt's metrics. A SIGKILL can land in the
    middle of writing a line: a torn last line is no step."""
    out = {}
    if not os.path.exists(path):
        return out  # killed before it opened its metrics
    with open(path) as f:
        lines = [l for l in f if l.strip()]
    for i, line in enumerate(lines):
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break
            raise
        out.setdefault(r["step"], []).append(r["loss"])
    return out


class PruneWatch:
    """Calls `on_prune` from a thread each time an entry named *.pruning
    appears in `directory` (inotify: the rename that starts a prune)."""

    def __init__(self, directory, on_prune):
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_CLOEXEC)
        if self.fd < 0 or libc.inotify_add_watch(
                self.fd, directory.encode(), IN_MOVED_TO | IN_CREATE) < 0:
            raise OSError(ctypes.get_errno(), "inotify")
        self.on_prune, self.done = on_prune, False
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        while not self.done:
            if not select.select([self.fd], [], [], 0.1)[0]:
                continue
            data, at = os.read(self.fd, 65536), 0
            while at < len(data):
                _, _, _, size = struct.unpack_from("iIII", data, at)
                name = data[at + 16:at + 16 + size].rstrip(b"\0")
                at += 16 + size
                if name.endswith(b".pruning"):
                    self.on_prune()

    def close(self):
        self.done = True
        self.thread.join()
        os.close(self.fd)


def wait_gone(pids):
    """Until every process in `pids` has exited (or is a zombie)."""
    deadline = time.monotonic() + LIMIT_S
    while any(status_field(pid, "State") is not None for pid in pids):
        if time.monotonic() > deadline:
            sys.exit(f"kill_resume: processes {pids} outlived their launcher")
        time.sleep(0.01)


def same_as_reference(out, attempt, steps):
    """Every step's loss in every attempt and the final weights against the
    uninterrupted run's; prints what differs."""
    ref = losses(f"{out}/ref.jsonl")
    seen = {}
    for a in range(1, attempt + 1):
        for step, ls in losses(f"{out}/a{a}.jsonl").items():
            seen.setdefault(step, []).extend(ls)
    bad = [s for s in range(1, steps + 1)
           if s not in seen or any(l != ref[s][0] for l in seen[s])]
    if bad:
        print(f"kill_resume: steps {bad[:10]} differ from (or are missing in) "
              f"the uninterrupted run")
        return False
    with open(f"{out}/ref.safetensors", "rb") as f, \
            open(f"{out}/final.safetensors", "rb") as g:
        if f.read() != g.read():
            print("kill_resume: the final weights differ")
            return False
    return True


def main(argv):
    prune = len(argv) > 1 and argv[1] == "--prune"
    if prune:
        argv = argv[:1] + argv[2:]
    if len(argv) < 6:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    dsrun, plan, data, steps, out = argv[1], argv[2], argv[3], int(argv[4]), argv[5]
    extra = argv[6:]
    os.makedirs(out, exist_ok=True)
    ckpt = os.path.join(out, "ck")
    os.makedirs(ckpt, exist_ok=True)  # watched from the start
    rng = random.Random(7)
    base = [dsrun, plan, "--data", data, "--steps", str(steps)] + extra
    saving = ["--save-every", "1", "--keep", "2"] if prune else \
        ["--save-every", "3"]
    # The uninterrupted run, timed to choose kill moments within it.
    t0 = time.monotonic()
    subprocess.run(base + ["--metrics", f"{out}/ref.jsonl", "--export-weights",
                           f"{out}/ref.safetensors"], check=True,
                   stdout=subprocess.DEVNULL)
    span = time.monotonic() - t0
    kills, attempt, partials, prunings = 0, 0, 0, 0
    while True:
        attempt += 1
        cmd = base + ["--save-dir", ckpt, "--resume", "--metrics",
                      f"{out}/a{attempt}.jsonl", "--export-weights",
                      f"{out}/final.safetensors"] + saving
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        # Killed once it has committed 1-3 more checkpoints (or begun 1-3
        # prunes), a random moment later: mid-step, mid-save, mid-prune.
        target, seen, lines = rng.randint(1, 3), threading.Event(), []
        delay = rng.uniform(0, 0.2) * span / steps * 3
        if prune:
            delay = rng.uniform(0, 0.0005)
        events = [0]

        def on_prune():
            events[0] += 1
            if events[0] == target:
                seen.set()

        def read():
            saves = 0
            for line in p.stdout:
                lines.append(line)
                saves += line.startswith("dsrun: saved ")
                if saves >= target and not prune:
                    seen.set()
            seen.set()
        watch = PruneWatch(ckpt, on_prune) if prune else None
        reader = threading.Thread(target=read)
        reader.start()
        if attempt <= (12 if prune else 6):
            seen.wait()
            # The kill's moment: random on purpose, not a synchronization.
            until = time.perf_counter() + delay
            while time.perf_counter() < until:
                pass
            family = descendants(p.pid)
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                kills += 1
                wait_gone(family)  # no rank writes under the next attempt
        p.wait()
        reader.join()
        if watch:
            watch.close()
        text = "".join(lines)
        names = os.listdir(ckpt) if os.path.isdir(ckpt) else []
        partials += any(n.endswith(".partial") for n in names)
        prunings += any(n.endswith(".pruning") for n in names)
        if p.returncode == 0:
            break
        if p.returncode != -signal.SIGKILL:
            print(f"kill_resume: attempt {attempt} exited {p.returncode}:\n{text}")
            return 1
        if attempt > 50:
            print("kill_resume: no attempt finished")
            return 1
    print(f"{kills} kills, {attempt} attempts" +
          (f", {prunings} left a .pruning" if prune else ""))
    if not same_as_reference(out, attempt, steps):
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
