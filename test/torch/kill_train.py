"""kill_train.py SIGNAL -- CMD...: starts CMD (a dsc-train run on several
ranks), waits until it prints a progress line ("step N/M"), notes every
process under it, sends SIGNAL (TERM, INT or KILL) to CMD alone, and waits
until CMD and every one of those processes are gone (a process counts as
gone once its pid is free or taken by another process). Prints how CMD
ended and what was running; exits 1 if a process outlives its deadline.
Waits for states (a line, an exit, a pid gone), never for a duration: the
deadlines only end a run that would otherwise hang.
"""
import os
import re
import signal
import subprocess
import sys
import threading
import time

DEADLINE_S = 300


def stat_of(pid):
    """(ppid, start time, name) of a live process, None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    name = text[text.index("(") + 1:text.rindex(")")]
    fields = text[text.rindex(")") + 2:].split()
    if fields[0] == "Z":  # a zombie has ended; only its parent's wait is left
        return None
    return int(fields[1]), fields[19], name


def descendants(root):
    """{pid: (start time, name)} of every process under `root`."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = stat_of(int(entry))
            if st is not None:
                parents[int(entry)] = st
    found, frontier = {}, [root]
    while frontier:
        pid = frontier.pop()
        for child, (ppid, start, name) in parents.items():
            if ppid == pid and child not in found:
                found[child] = (start, name)
                frontier.append(child)
    return found


def main():
    sig = getattr(signal, "SIG" + sys.argv[1])
    cmd = sys.argv[sys.argv.index("--") + 1:]
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True)
    started = threading.Event()

    def drain():  # the job must never block on a full pipe
        for line in job.stdout:
            if re.match(r"step \d+/\d+", line):
                started.set()
        started.set()
    threading.Thread(target=drain, daemon=True).start()
    if not started.wait(DEADLINE_S) or job.poll() is not None:
        print(f"kill_train: the job printed no progress line (status {job.poll()})")
        return 1
    under = descendants(job.pid)
    names = sorted(name for _, name in under.values())
    print(f"running under it: {names.count('dsrun')} dsrun (launcher and ranks), "
          f"{len(under) - names.count('dsrun')} other")
    job.send_signal(sig)
    try:
        status = job.wait(DEADLINE_S)
    except subprocess.TimeoutExpired:
        print("kill_train: the job did not end")
        return 1
    print(f"the job ended: {'killed by signal ' + str(-status) if status < 0 else 'exit ' + str(status)}")
    deadline = time.monotonic() + DEADLINE_S
    while True:
        left = {pid: name for pid, (start, name) in under.items()
                if (stat_of(pid) or (0, None, ""))[1] == start}
        if not left:
            print("every process under it is gone")
            return 0
        if time.monotonic() > deadline:
            print(f"kill_train: still running: {sorted(left.items())}")
            for pid in left:  # leave nothing behind for the next test
                os.kill(pid, signal.SIGKILL)
            return 1
        time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main())
