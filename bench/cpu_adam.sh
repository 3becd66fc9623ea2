#!/usr/bin/env bash
# The host optimizer of offload against PyTorch's and DeepSpeed's CPU Adam.
#
#   bash bench/cpu_adam.sh [THREADS...]     # default: 1 and 2
#
# For each thread count T: build/bench/dsc-bench-adam (dsc's ds.adamw, the
# CPU kernel the host runs) and bench/torch_adam.py (torch.optim.AdamW with
# foreach=False and True; DeepSpeedCPUAdam when the deepspeed package
# imports and builds its extension) on one flat fp32 tensor of 1M, 16M and
# 128M elements, both with DSC_CPU_THREADS=T (torch.set_num_threads(T)).
# dsc-bench-adam also prints the machine's STREAM-like copy and triad
# bandwidth, an in-place a += s b (Adam's access pattern) and each dsc
# kernel's bytes per second as a share of the in-place rate.
# JSON lines on stdout. PYTHON picks the interpreter with torch (default
# /usr/bin/python3, Debian's python3-torch); DeepSpeedCPUAdam needs a
# deepspeed that builds against that torch (docs in bench/RESULTS.md).
# Holds $DSC_BENCH_LOCK like the other benchmarks.
set -euo pipefail

source "$(dirname "$0")/lock.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
python=${PYTHON:-/usr/bin/python3}
threads=("$@")
[[ ${#threads[@]} -gt 0 ]] || threads=(1 2)
for t in "${threads[@]}"; do
  DSC_CPU_THREADS=$t "$build/bench/dsc-bench-adam"
  DSC_CPU_THREADS=$t "$python" "$root/bench/torch_adam.py"
done
