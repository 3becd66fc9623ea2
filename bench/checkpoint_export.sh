#!/usr/bin/env bash
# Weights out of a checkpoint: peak resident memory and time of the
# streamed export (`dsrun --resume --steps 0 --export-weights`: mapped rank
# files, one variable at a time, no session) against the session's export
# of the same checkpoint (forced by --metrics, which the streamed path does
# not take: the whole plan's arenas, parameters, gradients and Adam state,
# then every parameter gathered). Checks that both files hold the same bytes.
#
#   bash bench/checkpoint_export.sh [OUT_DIR]
#
# gpt2 n_layer=8 n_head=8 n_embd=512 block_size=64 vocab_size=256 (25.5M
# parameters, 102 MB of fp32 weights), one rank, one step saved. Needs
# build/tools/{dsc,dsrun} (BUILD_DIR to change) and GNU time (/usr/bin/time,
# Debian's `time`). Holds $DSC_BENCH_LOCK like the other benchmarks.
set -euo pipefail

source "$(dirname "$0")/lock.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
out=${1:-${TMPDIR:-/tmp}/dsc-export-bench}
rm -rf "$out" && mkdir -p "$out"
dsc=$build/tools/dsc dsrun=$build/tools/dsrun
model=gpt2:n_layer=8,n_head=8,n_embd=512,block_size=64,vocab_size=256,batch_size=2
"$dsc" --model "$model" -o "$out/big.dsplan"
"$dsrun" "$out/big.dsplan" --data /usr/share/common-licenses/GPL-3 --steps 1 \
  --save-dir "$out/ck" > /dev/null
measure() { # NAME ARGS...: prints "NAME peak_MiB seconds"
  local name=$1; shift
  /usr/bin/time -f "%M %e" -o "$out/$name.time" "$dsrun" "$out/big.dsplan" \
    --save-dir "$out/ck" --resume --steps 0 "$@" > /dev/null 2>&1
  read -r kib secs < "$out/$name.time"
  printf '%-10s %8.1f MiB %6.2f s\n' "$name" "$(echo "$kib / 1024" | bc -l)" "$secs"
}
echo "checkpoint: $(( $(stat -c %s "$out"/ck/step-*/rank-*.safetensors) / 1048576 )) MiB of state (weights and Adam moments) in one rank file"
measure streamed --export-weights "$out/streamed.safetensors"
measure session --export-weights "$out/session.safetensors" --metrics /dev/null
cmp "$out/streamed.safetensors" "$out/session.safetensors" && echo "same bytes"
