#!/usr/bin/env python3
"""signal_when.py SIG FILE CMD...: starts CMD, waits until FILE exists and
is not empty (a state the run reaches, such as its first --dump-batch
bytes: never a duration), sends CMD one signal SIG (INT or TERM), and
prints CMD's exit status ("exit 130", or "killed by SIGINT") and then its
stdout and stderr. Gives up (status 1) if CMD ends before FILE appears."""
import os
import signal
import subprocess
import sys
import time


def main(argv):
    if len(argv) < 4:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    sig = getattr(signal, "SIG" + argv[1])
    marker = argv[2]
    p = subprocess.Popen(argv[3:], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    # Polls the file; the command's own progress decides when it appears.
    while not (os.path.exists(marker) and os.path.getsize(marker) > 0):
        if p.poll() is not None:
            out, err = p.communicate()
            sys.stdout.write(out + err)
            print(f"signal_when: {argv[3]} exited {p.returncode} before "
                  f"{marker} appeared", file=sys.stderr)
            return 1
        time.sleep(0.01)
    p.send_signal(sig)
    out, err = p.communicate()
    rc = p.returncode
    print(f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exit {rc}")
    sys.stdout.write(out)
    sys.stdout.write(err)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
