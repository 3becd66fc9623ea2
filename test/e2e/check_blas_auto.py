"""DSC_BLAS=auto's choice against the CPU's vendor (test/e2e/dsc-blas.test).

    check_blas_auto.py FAKE_MKL.log AUTO.jsonl OPENBLAS.jsonl

On an Intel CPU the run must have taken the stand-in oneMKL (its log: the
threading and interface layers set, then the first product) and trained to
OpenBLAS's losses within 1e-5 (another summation order); on any other CPU
it must not have called it and must match OpenBLAS bitwise. One line.
"""
import json
import os
import sys

log_path, auto_path, openblas_path = sys.argv[1:4]


def losses(path):
    return [json.loads(line)["loss"] for line in open(path)]


def intel():
    with open("/proc/cpuinfo") as f:
        return any(line.startswith("vendor_id") and "GenuineIntel" in line for line in f)


calls = open(log_path).read().split("\n") if os.path.exists(log_path) else []
calls = [c for c in calls if c]
auto, ref = losses(auto_path), losses(openblas_path)
assert len(auto) == len(ref) == 3, (auto, ref)
if intel():
    assert calls == ["threading 3", "interface 0", "sgemm 101"], calls
    worst = max(abs(a - b) / abs(b) for a, b in zip(auto, ref))
    assert worst <= 1e-5, (auto, ref)
    print("auto: oneMKL on an Intel CPU: threading 3, interface 0, then sgemm; "
          "losses within 1e-5 of OpenBLAS's")
else:
    assert calls == [], calls
    assert auto == ref, (auto, ref)
    print("auto: OpenBLAS on a non-Intel CPU: no oneMKL call; the same losses")
