#!/usr/bin/env bash
# ZeRO stages 0, 1, 2, 3 at 1, 2 and 4 ranks on the CPU (one machine).
#
#   bash bench/zero_cpu.sh [OUT_DIR]      # default OUT_DIR: /tmp/dsc-zero-cpu-bench
#
# gpt2 n_layer=4 n_head=4 n_embd=256 block_size=128 vocab_size=256 dropout=0,
# micro-batch 4 per rank, no gradient accumulation, AdamW, clipping 1.0,
# "zero_optimization": {"stage": S, "reduce_bucket_size": 500000} and, at
# stage 3, "stage3_param_persistence_threshold": 10000 (only the biases and
# layer norms stay whole; DeepSpeed's 1e5 would keep this small model's
# 256x256 matrices whole too).
# For each (S, N): dsc --world-size N --report, then dsrun --np N for STEPS
# (12) steps with --metrics and --trace; bench/zero_summary.py prints the
# table. Builds nothing. Holds $DSC_BENCH_LOCK (default /tmp/dsc-build.lock)
# for the whole sweep (set it empty if you already hold it).
set -euo pipefail

source "$(dirname "$0")/lock.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
out=${1:-${TMPDIR:-/tmp}/dsc-zero-cpu-bench}
steps=${STEPS:-12}
data=${DATA:-/usr/share/common-licenses/GPL-3}
model=gpt2:n_layer=4,n_head=4,n_embd=256,block_size=128,vocab_size=256,dropout=0
mkdir -p "$out"

for s in 0 1 2 3; do
  cat > "$out/ds_config.s$s.json" <<EOF2
{
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 1,
  "gradient_clipping": 1.0,
  "optimizer": {
    "type": "AdamW",
    "params": {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}
  },
  "zero_optimization": {"stage": $s, "reduce_bucket_size": 500000,
                        "stage3_param_persistence_threshold": 10000}
}
EOF2
  for n in 1 2 4; do
    tag=s$s.n$n
    "$build/tools/dsc" --model "$model" --config "$out/ds_config.s$s.json" \
      --world-size "$n" -o "$out/$tag.dsplan" --report > "$out/$tag.report.txt"
    rm -f "$out/$tag.metrics.jsonl" "$out/$tag.trace"*.json
    "$build/tools/dsrun" "$out/$tag.dsplan" --np "$n" --data "$data" --steps "$steps" \
      --metrics "$out/$tag.metrics.jsonl" --trace "$out/$tag.trace.json" > "$out/$tag.log" 2>&1
    echo "done $tag" >&2
  done
done
python3 "$root/bench/zero_summary.py" "$out" --first-step 3
