#!/usr/bin/env bash
# Prepares what scripts/device-check.sh needs on the GPU machine, which has
# CUDA, CMake, ninja and PyTorch but no MLIR, flatc, OpenMPI, OpenBLAS,
# GoogleTest or network: into device/ (git-ignored; `run` carries it with
# carry=["device"]) go the headers and sources the runtime build needs, the
# plans compiled here by dsc, the data, and the CPU backend's losses for the
# same runs (the equivalence references).
# Usage: scripts/device-prepare.sh [BUILD_DIR]   (after scripts/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=$root/device
dsc=$build/tools/dsc
dsrun=$build/tools/dsrun
[ -x "$dsc" ] && [ -x "$dsrun" ] || {
  echo "device-prepare: no dsc/dsrun in $build (run scripts/build.sh)" >&2
  exit 2
}
rm -rf "$out"
mkdir -p "$out/include" "$out/share/cmake" "$out/plans"

# Build inputs: FlatBuffers' headers with the plan_generated.h their flatc
# wrote, nlohmann/json (headers and CMake package), xxHash, GoogleTest's
# sources.
cp -r /usr/include/flatbuffers /usr/include/nlohmann "$out/include/"
# xxHash (checkpoint checksums): its header and static library, which
# find_library finds under device/lib through CMAKE_PREFIX_PATH.
mkdir -p "$out/lib"
cp /usr/include/xxhash.h "$out/include/"
cp "$(pkg-config --variable=libdir libxxhash)/libxxhash.a" "$out/lib/"
# NCCL's header (the CUDA toolkit there may not have it; the library is
# opened at run time, and only by multi-rank runs).
for nccl in /usr/local/cuda/include/nccl.h /usr/include/nccl.h; do
  if [ -f "$nccl" ]; then cp "$nccl" "$out/include/"; break; fi
done
cp -r /usr/share/cmake/nlohmann_json "$out/share/cmake/"
cp -r /usr/src/googletest "$out/googletest"
cp "$build/runtime/schema/plan_generated.h" "$out/plan_generated.h"

# The data: the main job's text (README), 200 KB of it.
licenses=/usr/share/common-licenses
cat "$licenses"/GPL-3 "$licenses"/GPL-2 "$licenses"/LGPL-2.1 \
    "$licenses"/Apache-2.0 | head -c 200000 > "$out/plans/corpus.txt"

adamw='{"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}}'
sgd='{"type": "SGD", "params": {"lr": 0.05, "momentum": 0.9, "nesterov": true, "weight_decay": 0.01}}'
lion='{"type": "Lion", "params": {"lr": 3e-4, "betas": [0.9, 0.99], "weight_decay": 0.1}}'
# Adagrad's first step moves every weight by about lr: at lr 0.02 the small
# GPT's loss jumps to 10.9 at step 4 and the rounding of any two backends
# (or of fp32 against bf16 on one) drifts apart by 3-4%; at 0.002 the loss
# falls smoothly and the runs compare.
adagrad='{"type": "Adagrad", "params": {"lr": 0.002, "lr_decay": 0.01, "weight_decay": 0.01}}'
lamb='{"type": "Lamb", "params": {"lr": 0.01, "weight_decay": 0.01}}'
muon='{"type": "Muon", "params": {"lr": 0.01, "weight_decay": 0.01}}'
config() { # micro-batch, extra JSON members[, optimizer section]
  echo "{\"train_micro_batch_size_per_gpu\": $1, \"gradient_clipping\": 1.0,
  \"optimizer\": ${3:-$adamw}$2}"
}
config 8 "" > "$out/plans/fp32.json"
config 8 ', "bf16": {"enabled": true}' > "$out/plans/bf16.json"
# SGD, Lion, Adagrad, Lamb and Muon: their CUDA kernels in training (fp32,
# and bf16 reading the 16-bit gradients).
config 8 "" "$sgd" > "$out/plans/fp32-sgd.json"
config 8 ', "bf16": {"enabled": true}' "$lion" > "$out/plans/bf16-lion.json"
config 8 ', "bf16": {"enabled": true}' "$adagrad" > "$out/plans/bf16-adagrad.json"
config 8 "" "$adagrad" > "$out/plans/fp32-adagrad.json"
config 8 "" "$lamb" > "$out/plans/fp32-lamb.json"
config 8 "" "$muon" > "$out/plans/fp32-muon.json"
config 8 ', "bf16": {"enabled": true}' "$muon" > "$out/plans/bf16-muon.json"

gpt2=gpt2:n_layer=2,n_head=4,n_embd=128,block_size=128,vocab_size=256
sample_prompt="This program is free software: you can r"
llama=llama:dim=128,n_layer=2,n_head=4,vocab_size=256,block_size=128
# name | model | config
runs=(
  "gpt2-fp32|$gpt2,dropout=0|fp32"
  "gpt2-dropout-fp32|$gpt2,dropout=0.1|fp32"
  "llama-fp32|$llama|fp32"
  "gpt2-bf16|$gpt2,dropout=0|bf16"
  "llama-bf16|$llama|bf16"
  "gpt2-sgd-fp32|$gpt2,dropout=0|fp32-sgd"
  "llama-lion-bf16|$llama|bf16-lion"
  "gpt2-adagrad-bf16|$gpt2,dropout=0|bf16-adagrad"
  "gpt2-adagrad-fp32|$gpt2,dropout=0|fp32-adagrad"
  "gpt2-lamb-fp32|$gpt2,dropout=0|fp32-lamb"
  "llama-muon-fp32|$llama|fp32-muon"
  "gpt2-muon-bf16|$gpt2,dropout=0|bf16-muon"
)
steps=20
for r in "${runs[@]}"; do
  IFS='|' read -r name model cfg <<< "$r"
  "$dsc" --model "$model" --config "$out/plans/$cfg.json" \
         -o "$out/plans/$name.dsplan"
  echo "$name $steps $cfg" >> "$out/plans/runs.txt"
  "$dsrun" "$out/plans/$name.dsplan" --data "$out/plans/corpus.txt" \
           --steps "$steps" --seed 7 --metrics "$out/plans/$name.cpu.jsonl" \
           > /dev/null
done
# Text drawn (temperature 1, seed 7) from gpt2-fp32 after 100 steps
# through its one-row sampling programs (sample_64, then sample_128), for
# device-check to draw on CUDA from the same weights.
"$dsrun" "$out/plans/gpt2-fp32.dsplan" --data "$out/plans/corpus.txt" \
         --steps 100 --export-weights "$out/plans/gpt2-fp32.sample.safetensors" \
         > /dev/null
"$dsrun" "$out/plans/gpt2-fp32.dsplan" \
         --init-from "$out/plans/gpt2-fp32.sample.safetensors" --sample 96 \
         --prompt "$sample_prompt" --temperature 1 --seed 7 \
         2> "$out/plans/gpt2-fp32.sample.cpu.err" |
  tail -n +2 > "$out/plans/gpt2-fp32.sample.cpu.txt"

# The benchmark's plans: GPT-2 124M, bf16, block 1024, at micro-batches
# 16 to 128, with the device memory dsc predicts for each (bench.txt:
# "batch bytes"); the device check runs the largest that fits its GPU.
: > "$out/plans/bench.txt"
for batch in 16 32 64 128; do
  config "$batch" ', "bf16": {"enabled": true}' > "$out/plans/bench.json"
  "$dsc" --model gpt2:n_layer=12,n_head=12,n_embd=768,block_size=1024,vocab_size=50304,dropout=0 \
         --config "$out/plans/bench.json" --report \
         -o "$out/plans/gpt2-124m-bf16-b$batch.dsplan" > "$out/plans/bench-b$batch.report"
  echo "$batch $(awk '$1 == "total" && $3 == "bytes" { print $2; exit }' "$out/plans/bench-b$batch.report")" \
    >> "$out/plans/bench.txt"
done

# The fused LM head and loss (issue 32) on the GPU, with ds-fuse-lm-head
# and without: GPT-2 124M, block 1024, fp32 at micro-batch 16 and bf16 at
# 128 (fused.txt: one pair a line).
: > "$out/plans/fused.txt"
for pair in "fp32-mb16|16|" "bf16-mb128|128|, \"bf16\": {\"enabled\": true}"; do
  IFS='|' read -r name batch extra <<< "$pair"
  config "$batch" "$extra" > "$out/plans/fused.json"
  for fuse in true false; do
    "$dsc" --model gpt2:n_layer=12,n_head=12,n_embd=768,block_size=1024,vocab_size=50304,dropout=0 \
           --config "$out/plans/fused.json" --fuse-lm-head=$fuse \
           -o "$out/plans/gpt2-124m-$name-fuse-$fuse.dsplan"
  done
  echo "gpt2-124m-$name" >> "$out/plans/fused.txt"
done

du -sh "$out"
echo "device-prepare: $out ready (carry it: run ... carry=[\"device\"])"
