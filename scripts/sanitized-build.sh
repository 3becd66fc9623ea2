#!/usr/bin/env bash
# Configures (once) and builds targets of the sanitized build: clang-19,
# ASan + UBSan everywhere, libFuzzer's coverage instrumentation (DSC_FUZZ),
# Release-level optimization with debug info, in FUZZ_BUILD_DIR (default
# build-fuzz). The fuzz targets (scripts/fuzz.sh) and the runtime's unit
# tests under the sanitizers (scripts/sanitize-check.sh) share it, so CI
# compiles the runtime sanitized once.
#
#   bash scripts/sanitized-build.sh TARGET...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
if ! command -v clang++-19 >/dev/null ||
   [ ! -f /usr/lib/llvm-19/lib/clang/19/lib/linux/libclang_rt.fuzzer-x86_64.a ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get install -y -qq --no-install-recommends clang-19 libclang-rt-19-dev
fi
if [ ! -f "$build/build.ninja" ]; then
  CC=clang-19 CXX=clang++-19 cmake -G Ninja -S "$root" -B "$build" \
    -DDSC_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
ninja -C "$build" -j "${DSC_JOBS:-$(nproc)}" "$@"
