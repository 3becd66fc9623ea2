"""DSC_BLAS=auto's choice against the CPU (test/e2e/dsc-blas.test).

    check_blas_auto.py MKL|NOMKL FAKE_MKL.log AUTO OPENBLAS ONEDNN

AUTO, OPENBLAS and ONEDNN name runs: NAME.jsonl (losses) and
NAME.safetensors (the weights after training). ONEDNN.safetensors is absent
where DSC_BLAS=onednn could not run (no oneDNN). MKL: the stand-in oneMKL is
where dsrun looks.

On an Intel CPU with oneMKL present the run must have taken it (its log:
the threading and interface layers set, then the first product) and
trained to OpenBLAS's losses within 1e-5 (another summation order). On an
AMD CPU with AVX-512 and oneDNN it must have trained on oneDNN's f32
matmul: its weights bitwise those of DSC_BLAS=onednn, which differ from
OpenBLAS's. Anywhere else: OpenBLAS's weights bitwise. In the last two
cases the stand-in oneMKL is never called. One line.
"""
import json
import os
import sys

mode, log_path, auto, openblas, onednn = sys.argv[1:6]


def losses(name):
    return [json.loads(line)["loss"] for line in open(name + ".jsonl")]


def weights(name):
    with open(name + ".safetensors", "rb") as f:
        return f.read()


def cpu_is(vendor, flag=None):
    text = open("/proc/cpuinfo").read()
    flags = next((l for l in text.splitlines() if l.startswith("flags")), "")
    return vendor in text and (flag is None or flag in flags.split())


calls = open(log_path).read().split("\n") if os.path.exists(log_path) else []
calls = [c for c in calls if c]
got, ref = losses(auto), losses(openblas)
assert len(got) == len(ref) == 3, (got, ref)
if mode == "MKL" and cpu_is("GenuineIntel"):
    assert calls == ["threading 3", "interface 0", "sgemm 101"], calls
    worst = max(abs(a - b) / abs(b) for a, b in zip(got, ref))
    assert worst <= 1e-5, (got, ref)
    print("auto: oneMKL on an Intel CPU: threading 3, interface 0, then sgemm; "
          "losses within 1e-5 of OpenBLAS's")
    sys.exit(0)
assert calls == [], calls
if cpu_is("AuthenticAMD", "avx512f") and os.path.exists(onednn + ".safetensors"):
    assert weights(auto) == weights(onednn), "auto is not oneDNN's run"
    assert weights(onednn) != weights(openblas), "oneDNN's run is OpenBLAS's"
    print("auto: oneDNN on an AMD CPU with AVX-512, not oneMKL: "
          "oneDNN's weights bitwise")
else:
    assert weights(auto) == weights(openblas), "auto is not OpenBLAS's run"
    print("auto: OpenBLAS here, not oneMKL: OpenBLAS's weights bitwise")
