#!/usr/bin/env python3
"""same_ir.py A B: the two files hold the same text up to trailing blank
lines (ds-opt ends its output with one, dsc does not). Exit 1 with the first
differing line otherwise."""
import sys

a, b = (open(p).read().rstrip("\n").split("\n") for p in sys.argv[1:3])
for n, (x, y) in enumerate(zip(a, b), 1):
    if x != y:
        print(f"line {n} differs:\n  {sys.argv[1]}: {x}\n  {sys.argv[2]}: {y}")
        sys.exit(1)
if len(a) != len(b):
    print(f"{len(a)} lines vs {len(b)}")
    sys.exit(1)
