#!/usr/bin/env bash
# dsc's compile time and peak memory against model depth, and for GPT-3
# 175B's shape at ZeRO-3 on 1024 ranks (compile only: nothing is allocated
# for the tensors, so a laptop can compile it).
#
#   bash bench/compile_time.sh [REPEATS]     # default 3; the best run counts
#
# gpt2 n_embd=256 n_head=4 block_size=64 vocab_size=256 at 12, 48, 200,
# 400 and 800 layers, default config, full pipeline to a plan file; then
# gpt2 n_layer=96 n_embd=12288 n_head=96 block_size=2048 vocab_size=50304
# with zero_optimization.stage 3 and --world-size 1024. Prints one row per
# model: wall seconds (best of REPEATS), ms per layer, peak RSS. Builds
# nothing. Holds $DSC_BENCH_LOCK (default /tmp/dsc-build.lock) throughout.
set -euo pipefail

source "$(dirname "$0")/lock.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
dsc=${BUILD_DIR:-$root/build}/tools/dsc
repeats=${1:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}' \
  > "$tmp/zero3.json"

# run LABEL LAYERS DSC-ARGS...: best wall time and its peak RSS.
run() {
  local label=$1 layers=$2
  shift 2
  local best="" rss=""
  for _ in $(seq "$repeats"); do
    /usr/bin/time -f "%e %M" -o "$tmp/time" "$dsc" "$@" -o "$tmp/out.dsplan"
    read -r t m < "$tmp/time"
    if [[ -z "$best" ]] || python3 -c "import sys; sys.exit(not $t < $best)"; then
      best=$t rss=$m
    fi
  done
  python3 -c "print(f'{\"$label\":<44} {$best:8.2f} s {1000*$best/$layers:8.2f} ms/layer {$rss/1024:8.1f} MiB')"
}

echo "dsc compile time, best of $repeats ($(nproc) cores, $(date -u +%F))"
for layers in 12 48 200 400 800; do
  run "gpt2 n_embd=256, $layers layers" "$layers" \
    --model gpt2:n_layer=$layers,n_embd=256,n_head=4,block_size=64,vocab_size=256
done
run "GPT-3 175B shape, ZeRO-3, world 1024" 96 \
  --model gpt2:n_layer=96,n_embd=12288,n_head=96,block_size=2048,vocab_size=50304 \
  --config "$tmp/zero3.json" --world-size 1024
