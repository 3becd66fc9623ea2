#!/usr/bin/env python3
"""truncate_data.py FILE DSRUN ARGS...: starts DSRUN ARGS (training on
FILE), truncates FILE to nothing once the first progress line ("step ...")
is out, and prints dsrun's exit status ("exit 2", or "killed by SIGBUS")
and its stderr."""
import signal
import subprocess
import sys


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    path = argv[1]
    p = subprocess.Popen(argv[2:], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    for line in p.stdout:
        if line.startswith("step "):
            open(path, "w").close()
            break
    p.stdout.read()
    err = p.stderr.read()
    p.wait()
    rc = p.returncode
    print(f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exit {rc}")
    sys.stdout.write(err)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
