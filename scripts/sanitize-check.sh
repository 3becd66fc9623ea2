#!/usr/bin/env bash
# The runtime's unit tests under AddressSanitizer and UndefinedBehavior-
# Sanitizer: a build of the runtime alone (no MLIR; GCC's sanitizers) in its
# own folder, then ctest on every test that runs in one process (the
# kernel conformance suite, plans and sessions, dsrun's tooling, the
# reference kernels, the local communicator). The mpirun-launched cases
# are left to the normal build: OpenMPI's own allocations would drown the
# leak report. Exit status: ctest's.
#
#   bash scripts/sanitize-check.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SANITIZE_BUILD_DIR:-$root/build-asan}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" -DDSC_BUILD_COMPILER=OFF \
    -DDSC_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
ninja -C "$build" -j "${DSC_JOBS:-$(nproc)}"
cd "$build"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --output-on-failure -j "$(nproc)" --timeout 600 -E '^CommTest\.np|^CommFaults$'
