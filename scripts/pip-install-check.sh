#!/usr/bin/env bash
# `pip install .` as a user runs it (issue 33): a fresh virtual environment,
# this checkout installed into it (scikit-build-core drives the CMake build,
# pyproject.toml), then the installed commands run from outside the checkout
# with nothing of the build on the environment: `dsc --help`, `dsrun
# --help`, `ds-opt --help`, `python -c "import dsc"`, one training step
# through dsc.initialize, one through dsc-train; and `python -m build
# --wheel` makes a wheel from the same build folder.
#
# Usage: scripts/pip-install-check.sh [WORK]   (default /tmp/dsc-pip-check)
# The build folder is build-wheel/ next to build/: ccache's base_dir
# (CMakeLists.txt) makes its compiles hits of the main build's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/dsc-pip-check}
say() { echo "pip-install-check: $*"; }
case "$work" in
/ | "" | "$root" | "$root"/*) echo "pip-install-check: refusing WORK '$work'" >&2; exit 2 ;;
esac
rm -rf "$work"
mkdir -p "$work/run"
start=$(date +%s)
/usr/bin/python3 -m venv "$work/venv"
pip=("$work/venv/bin/pip" install -q --disable-pip-version-check)
# The main build's compilers by the names CMake gave them there: ccache
# hashes the compiler's name, and pip's build would otherwise take Python's
# (x86_64-linux-gnu-g++), the same compiler under another name.
export CC=/usr/bin/cc CXX=/usr/bin/c++
"${pip[@]}" "$root" --config-settings build-dir="$root/build-wheel"
say "pip install . in $(($(date +%s) - start)) s"

# From here on: the venv's commands only, from a folder outside the checkout.
cd "$work/run"
export PATH="$work/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
unset PYTHONPATH DSC_TOOLS_DIR
for tool in dsc dsrun ds-opt dsc-train dsc-launch; do
  path=$(command -v "$tool")
  [ "$path" = "$work/venv/bin/$tool" ] || { echo "pip-install-check: $tool is $path" >&2; exit 1; }
done
for tool in dsc dsrun ds-opt dsc-train dsc-launch; do
  "$tool" --help > help.txt  # whole: a pipe into head would end it with SIGPIPE
  echo "$tool --help: $(head -1 help.txt)"
done
python -c "import dsc, _dsc_native; print('import dsc:', dsc.__file__)"
python "$root/test/install/one_step.py" "$root/test/torch/nanogpt_model.py" \
  /usr/share/common-licenses/GPL-3
echo '{"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}' > ds.json
dsc-train "$root/test/torch/nanogpt_model.py:GPT" \
  --model-args '{"n_layer": 1, "n_head": 2, "n_embd": 32, "block_size": 16, "vocab_size": 256}' \
  --deepspeed_config ds.json --data /usr/share/common-licenses/GPL-3 --steps 1 --output-dir out
test -s out/model.safetensors

# A wheel from the same build folder (python -m build, as a release would).
"${pip[@]}" build
python -m build --wheel -C build-dir="$root/build-wheel" --outdir "$work/dist" "$root" > "$work/build.log" 2>&1 ||
  { tail -20 "$work/build.log" >&2; exit 1; }
ls "$work"/dist/dsc-*.whl
say "passed in $(($(date +%s) - start)) s"
