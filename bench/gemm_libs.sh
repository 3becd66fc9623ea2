#!/usr/bin/env bash
# Issue 32's GEMM measurement (bench/gemm_libs.cpp): fp32 and bf16 GEMM
# rates at dsc's plan shapes with OpenBLAS, BLIS, oneDNN (Debian) and oneMKL
# (the Python index), on 2 threads. Installs libdnnl-dev and libblis-dev,
# fetches the mkl wheels into a temporary folder, and sets OPENBLAS_CORETYPE
# as dsrun's CPU backend does (Blas.cpp: Debian's OpenBLAS 0.3.21 takes
# some Xeons for a "Prescott" and runs SSE3 kernels).
#   bash bench/gemm_libs.sh [THREADS]     (prints a Markdown table)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threads=${1:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
apt-get install -y -q libdnnl-dev libblis-dev > "$work/apt.log"
python3 -m pip download -q --no-deps -d "$work/wheels" mkl mkl-include \
  "intel-openmp<2027,>=2025" "tbb==2023.*"
for w in "$work"/wheels/*.whl; do python3 -m zipfile -e "$w" "$work/mkl"; done
libs=$(find "$work/mkl" -name '*.so*' -printf '%h\n' | sort -u | paste -sd:)
c++ -O2 -std=c++17 "$root/bench/gemm_libs.cpp" -o "$work/gemm_libs" -ldnnl -ldl
core=Haswell
grep -q avx512f /proc/cpuinfo && core=SkylakeX
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores;" \
  "$(grep -o -E 'avx512[a-z_0-9]*|amx[a-z_0-9]*' /proc/cpuinfo | sort -u | paste -sd' ');" \
  "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$core}"
OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$core} OMP_NUM_THREADS=$threads LD_LIBRARY_PATH=$libs \
  "$work/gemm_libs" --mkl "$(find "$work/mkl" -name 'libmkl_rt.so.*' | head -1)" --threads "$threads"
