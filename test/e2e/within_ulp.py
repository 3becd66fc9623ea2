"""Compares the val_loss of two `dsrun --eval-only` outputs: prints
"val_loss within one float ulp" when they are at most one float32 ulp
apart, else both values and their distance in ulps (and exits 1)."""
import re
import struct
import sys


def val_loss(path):
    match = re.search(r"val_loss ([0-9.eE+-]+)", open(path).read())
    if not match:
        sys.exit(f"within_ulp: {path}: no val_loss line")
    return struct.unpack("<f", struct.pack("<f", float(match.group(1))))[0]


def ulp(x):
    bits = struct.unpack("<I", struct.pack("<f", abs(x)))[0]
    return struct.unpack("<f", struct.pack("<I", bits + 1))[0] - abs(x)


a, b = (val_loss(p) for p in sys.argv[1:3])
step = ulp(max(abs(a), abs(b)))
if abs(a - b) <= step:
    print("val_loss within one float ulp")
else:
    print(f"val_loss {a} and {b} are {abs(a - b) / step:.1f} ulp apart")
    sys.exit(1)
