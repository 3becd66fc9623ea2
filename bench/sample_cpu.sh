#!/usr/bin/env bash
# dsrun --sample's time a token at GPT-2 size: the plan with dsc's one-row
# sampling programs (sample_T, the default) against the same plan without
# them (--sample-programs=false: every token runs eval's whole [micro-batch,
# block] window), fp32 and bf16, from the same weights, for a short prompt
# and a 300-byte one, interleaved ROUNDS times.
#
#   bash bench/sample_cpu.sh [OUT_DIR]
#
# Model: GPT-2 124M (12 layers, d 768, vocabulary 50257) at block 512,
# micro-batch 2, AdamW (bench/bf16_cpu.sh's SIZE=gpt2 plans). The weights
# are one step's from the seeded initialization (the time a token does not
# depend on them). Prints dsrun's own `sampled N tokens in ...` line for
# each run: the sampling alone, start-up excluded, each program's first run
# included. Builds nothing; holds $DSC_BENCH_LOCK (bench/lock.sh). Knobs:
# TOKENS (8), ROUNDS (2), BUILD_DIR.
set -euo pipefail

source "$(dirname "$0")/lock.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
out=${1:-${TMPDIR:-/tmp}/dsc-sample-cpu-bench}
tokens=${TOKENS:-8}
rounds=${ROUNDS:-2}
dsc=$build/tools/dsc
dsrun=$build/tools/dsrun
mkdir -p "$out"

model=gpt2:n_layer=12,n_head=12,n_embd=768,block_size=512,vocab_size=50257,dropout=0
adamw='"optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}}'
echo "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_clipping\": 1.0, $adamw}" > "$out/fp32.json"
echo "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_clipping\": 1.0, $adamw, \"bf16\": {\"enabled\": true}}" > "$out/bf16.json"
for precision in fp32 bf16; do
  "$dsc" --model "$model" --config "$out/$precision.json" \
         -o "$out/$precision-sample.dsplan"
  "$dsc" --model "$model" --config "$out/$precision.json" \
         --sample-programs=false -o "$out/$precision-eval.dsplan"
done
"$dsrun" "$out/fp32-sample.dsplan" --steps 1 \
         --export-weights "$out/weights.safetensors" > /dev/null

long=$(head -c 300 /usr/share/common-licenses/GPL-3 | tr -c 'a-zA-Z .' ' ')
for round in $(seq "$rounds"); do
  for precision in fp32 bf16; do
    for kind in sample eval; do
      for prompt in "Hello" "$long"; do
        line=$("$dsrun" "$out/$precision-$kind.dsplan" \
                 --init-from "$out/weights.safetensors" --sample "$tokens" \
                 --prompt "$prompt" --temperature 0 2>&1 > /dev/null |
                 grep '^dsrun: sampled' || echo "failed")
        echo "round $round $precision $kind, ${#prompt}-byte prompt: $line"
      done
    done
  done
done
