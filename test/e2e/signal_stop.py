#!/usr/bin/env python3
"""signal_stop.py SIG COUNT DSRUN ARGS...: starts DSRUN ARGS, waits for its
first progress line ("step ..."), sends it COUNT signals SIG (INT or TERM),
50 ms apart, and prints its exit status ("exit 130", or "killed by SIGINT"
when the signal's default action ended it) and its stdout and stderr."""
import signal
import subprocess
import sys
import threading
import time


def main(argv):
    if len(argv) < 4:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    sig = getattr(signal, "SIG" + argv[1])
    count = int(argv[2])
    p = subprocess.Popen(argv[3:], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    out, started = [], threading.Event()

    def read():
        for line in p.stdout:
            out.append(line)
            if line.startswith("step "):
                started.set()
        started.set()
    reader = threading.Thread(target=read)
    reader.start()
    started.wait()
    for _ in range(count):
        p.send_signal(sig)
        time.sleep(0.05)
    err = p.stderr.read()
    p.wait()
    reader.join()
    rc = p.returncode
    print(f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exit {rc}")
    sys.stdout.write("".join(out))
    sys.stdout.write(err)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
