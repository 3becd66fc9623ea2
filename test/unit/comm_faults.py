#!/usr/bin/env python3
"""comm_faults.py COMMTEST DSRUN: a rank lost in the middle of a 3-rank run.

Trains CommTest's data-parallel bigram plan with `dsrun --np 3` and, once
training is under way (the metrics file has a step), either kills rank 1
(SIGKILL: mpirun notices and stops the others with SIGTERM) or stops it
(SIGSTOP: it stops answering, the others' next collective times out). Either
way every surviving rank must say which collective it was in, dsrun must exit
1, and nothing may outlive the run or take much longer than the collective
timeout. A third run kills rank 1 as soon as the ranks exist, while MPI may
still be starting (seconds, on a host whose own name does not resolve): the
survivors must still say so.
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

TIMEOUT_S = 3  # DSC_COMM_TIMEOUT for the runs
START_TIMEOUT_S = 60  # kMinStartTimeoutS (runtime/comm/Communicator.h)
RANKS = 3
VICTIM = 1


def plan_pids(plan):
    """pid -> command line (a list) of every process naming `plan`: the
    launcher (mpirun) and the ranks."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().split(b"\0")
        except OSError:
            continue
        if plan.encode() in cmdline:
            found[int(entry)] = cmdline
    return found


def rank_pids(plan):
    """pid -> OMPI_COMM_WORLD_RANK of the ranks running `plan`."""
    found = {}
    for pid, cmdline in plan_pids(plan).items():
        if b"mpirun" in cmdline[0]:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        for var in env:
            if var.startswith(b"OMPI_COMM_WORLD_RANK="):
                found[pid] = int(var.split(b"=")[1])
    return found


def kill_all(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:  # ended meanwhile
            pass


def training(metrics):
    try:
        with open(metrics) as f:
            return f.readline().endswith("\n")
    except OSError:
        return False


def run(dsrun, plan, sig, mid_run=True):
    env = dict(os.environ, DSC_COMM_TIMEOUT=str(TIMEOUT_S))
    metrics = plan + f".{sig}.{mid_run}.metrics"
    proc = subprocess.Popen(
        [dsrun, plan, "--np", str(RANKS), "--steps", "4000000000",
         "--metrics", metrics],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    victim = None
    deadline = time.monotonic() + 60
    while victim is None and time.monotonic() < deadline:
        time.sleep(0.05)
        pids = rank_pids(plan)
        if len(pids) == RANKS and (not mid_run or training(metrics)):
            victim = next(p for p, r in pids.items() if r == VICTIM)
    if victim is None:
        proc.kill()
        kill_all(plan_pids(plan))
        return None, "the ranks did not start", 0
    if mid_run:
        time.sleep(0.5)
    start = time.monotonic()
    os.kill(victim, sig)
    try:
        _, err = proc.communicate(timeout=START_TIMEOUT_S + 30)
    except subprocess.TimeoutExpired:
        # The ranks and mpirun too: a stopped rank that outlives dsrun
        # would hold its end of the stderr pipe, and communicate() would
        # wait forever; an mpirun hung in its own start-up would outlive
        # the test (seen once in CI).
        proc.kill()
        kill_all(plan_pids(plan))
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            err = b""
        err += b"\ncomm_faults: the run did not end\n"
    took = time.monotonic() - start
    # Nothing may survive the run. A rank that gave up leaves a guard that
    # watches mpirun every 0.1 s (MpiCommunicator.cpp): let it see.
    settle = time.monotonic() + 1.0
    while plan_pids(plan) and time.monotonic() < settle:
        time.sleep(0.05)
    leftovers = plan_pids(plan)
    kill_all(leftovers)
    for pid, cmdline in leftovers.items():
        err += (f"\ncomm_faults: pid {pid} ({os.path.basename(cmdline[0])}) "
                "outlived the run\n").encode()
    return proc.returncode, err.decode(errors="replace"), took


def check(name, status, err, took, want_line, max_s, min_s=0.0):
    problems = []
    if status != 1:
        problems.append(f"dsrun exited {status}, expected 1")
    survivors = [r for r in range(RANKS) if r != VICTIM]
    silent = [r for r in survivors if not re.search(want_line(r), err, re.M)]
    # mpirun forwards a rank's output only while it still runs the job, so
    # the line of a rank it stops last is occasionally lost.
    if len(silent) == len(survivors):
        problems.append("no line from any surviving rank")
    elif silent:
        print(f"comm_faults: {name}: note: mpirun dropped the line of rank "
              f"{silent}")
    if not min_s <= took <= max_s:
        problems.append(f"took {took:.1f} s, expected {min_s}..{max_s} s")
    if "outlived" in err or "did not end" in err:
        problems.append("processes outlived the run")
    print(f"--- {name}: exit {status} after {took:.1f} s")
    print(err)
    for p in problems:
        print(f"comm_faults: {name}: {p}")
    return not problems


def main():
    commtest, dsrun = sys.argv[1], sys.argv[2]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        plan = os.path.join(tmp, "faults.dsplan")
        subprocess.check_call([commtest, "--write-plan", plan, str(RANKS)])

        # Killed: mpirun stops the survivors at once; each names the
        # collective it was in (or the last one it finished).
        status, err, took = run(dsrun, plan, signal.SIGKILL)
        ok &= check(
            "kill -9 rank 1", status, err, took,
            lambda r: (rf"^rank {r}: (\w+ #\d+ interrupted|stopped) by "
                       rf"signal 15"),
            max_s=TIMEOUT_S + 5)
        ok &= "a rank was killed by signal 9" in err

        # Stopped: the survivors time out in their collective. A survivor
        # may instead be stopped by mpirun once the first one has exited.
        status, err, took = run(dsrun, plan, signal.SIGSTOP)
        ok &= check(
            "kill -STOP rank 1", status, err, took,
            lambda r: (rf"rank {r}: \w+ #\d+ (timed out after {TIMEOUT_S} s "
                       rf"\(a rank stopped answering\)|interrupted by)"),
            min_s=TIMEOUT_S, max_s=TIMEOUT_S + 10)
        ok &= bool(re.search(r"timed out after", err))

        # Killed at once: the survivors may still be inside MPI's start-up.
        # mpirun stops them at once; it may then hang ("PMIX ERROR:
        # UNREACHABLE", OpenMPI 4.1), and the survivors' guards end it 5 s
        # later; or it never signals them, and they wait in MPI's start-up
        # until its deadline.
        status, err, took = run(dsrun, plan, signal.SIGKILL, mid_run=False)
        ok &= check(
            "kill -9 rank 1 at start-up", status, err, took,
            lambda r: (rf"^rank {r}: ((\w+ #\d+ interrupted|stopped) by "
                       rf"signal 15|MPI start-up did not finish within "
                       rf"{START_TIMEOUT_S} s)"),
            max_s=START_TIMEOUT_S + 10)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
