#!/usr/bin/env python3
"""expect-exit.py CODE CMD...: runs CMD, passing its output through, and
succeeds only if CMD exits with status CODE (lit's shell has no $?)."""
import subprocess
import sys

want = int(sys.argv[1])
got = subprocess.call(sys.argv[2:])
if got != want:
    sys.stderr.write(f"expect-exit: {sys.argv[2]} exited {got}, expected {want}\n")
    sys.exit(1)
