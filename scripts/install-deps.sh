#!/usr/bin/env bash
# Installs dsc's build and test dependencies from Debian's packages
# (python3-torch: PyTorch as the training oracle in test/e2e and the
# benchmark's baseline; flatc: the plan-listing and mutation tests).
# Safe to re-run; needs root (or sudo).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
pkgs=(
  build-essential cmake ninja-build ccache clang-format
  libmlir-19-dev mlir-19-tools llvm-19-dev llvm-19-tools
  libflatbuffers-dev flatbuffers-compiler-dev
  libgtest-dev libopenblas-dev libdnnl-dev
  libopenmpi-dev openmpi-bin
  nlohmann-json3-dev libboost-dev iproute2 libxxhash-dev
  python3 python3-numpy python3-torch python3-venv python3-dev pybind11-dev time
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
