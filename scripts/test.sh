#!/usr/bin/env bash
# Installs dependencies, builds, and runs every test suite (GoogleTest and
# lit) through ctest. Exit status is ctest's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/scripts/install-deps.sh"
"$root/scripts/install-python.sh" "$build/venv"
"$root/scripts/build.sh" "$build"
cd "$build"
ctest --output-on-failure -j "$(nproc)" --timeout 1500
