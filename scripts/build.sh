#!/usr/bin/env bash
# Configures (once) and builds dsc in Release with Ninja and ccache.
# Usage: scripts/build.sh [BUILD_DIR] [extra cmake args...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "$@"
fi
# Two cores: MLIR translation units need ~1 GiB each; -j2 fits in memory.
ninja -C "$build" -j "${DSC_JOBS:-$(nproc)}"
