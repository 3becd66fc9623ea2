#!/usr/bin/env bash
# Makes the virtual environment of dsc's PyTorch frontend (frontends/torch)
# with Debian's python3 and the packages of frontends/torch/requirements.txt
# from the Python index (torch 2.5 brings its CUDA libraries from the index
# too, ~4 GiB; pip's cache keeps the next install short), and those of the
# source checks (scripts/check-requirements.txt: lizard). Skips the install
# when the folder was made from the same requirements.
# Usage: scripts/install-python.sh [VENV]   (default: build/venv)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-$root/build/venv}
req=$root/frontends/torch/requirements.txt
checks=$root/scripts/check-requirements.txt
stamp=$venv/.dsc-requirements
if [ -f "$stamp" ] && cat "$req" "$checks" | cmp -s "$stamp" -; then
  exit 0
fi
/usr/bin/python3 -m venv "$venv"
start=$(date +%s)
"$venv/bin/pip" install -q --disable-pip-version-check -r "$req" -r "$checks"
cat "$req" "$checks" > "$stamp"
echo "install-python: $venv ready in $(($(date +%s) - start)) s"
