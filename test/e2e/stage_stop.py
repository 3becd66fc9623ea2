#!/usr/bin/env python3
"""stage_stop.py STAGE DSRUN ARGS...: a pipeline stage that stops
answering. Starts DSRUN ARGS (a pipeline's plan under --np, --metrics
M.jsonl among ARGS), waits until training is under way (M.jsonl has a
step), stops (SIGSTOP) the rank running stage STAGE of the first replica
(world rank STAGE), waits for the run to end, then kills what is left of
that rank. Prints "exit N" and the survivors' stderr lines; the run's
collective timeout (DSC_COMM_TIMEOUT) bounds how long that takes."""
import os
import signal
import subprocess
import sys
import time

# The ranks of a run by their command line: comm_faults.py's.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "unit"))
from comm_faults import rank_pids  # noqa: E402


def main():
    stage, args = int(sys.argv[1]), sys.argv[2:]
    metrics = args[args.index("--metrics") + 1]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    while True:
        try:
            with open(metrics) as f:
                if f.readline().endswith("\n"):
                    break
        except OSError:
            pass
        if proc.poll() is not None:
            print(f"the run ended before its first step: exit {proc.returncode}")
            return 1
        time.sleep(0.05)
    victims = [pid for pid, rank in rank_pids(metrics).items() if rank == stage]
    for pid in victims:
        os.kill(pid, signal.SIGSTOP)
    _, err = proc.communicate(timeout=120)
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    print(f"exit {proc.returncode}")
    for line in err.splitlines():
        if line.startswith("dsrun: rank") or " timed out " in line:
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
