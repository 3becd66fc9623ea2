#!/usr/bin/env bash
# Offload on the CPU backend: device-space peak and step time with and
# without each offload, and the largest gpt2 that fits a 1 GiB device.
#
#   bash bench/offload.sh [OUT_DIR]      # default OUT_DIR: /tmp/dsc-offload-bench
#
# Part 1: gpt2 n_layer=4 n_head=4 n_embd=256 block_size=128 vocab_size=256,
# bf16, ZeRO stage 3 (stage3_param_persistence_threshold 10000), micro-batch
# 4, on 2 ranks, with no offload, offload_optimizer, offload_param and both;
# dsrun --np 2 for STEPS (12) steps with --metrics. Part 2: for gpt2 at
# n_embd 1024 (16 heads, block 256, vocab 256, bf16, micro-batch 4, one
# rank, stage 3), the most layers for which dsc --device-memory 1GiB accepts
# the plan, without offload and with both offloads (dsc only: the plan's
# predicted device peak, which dsrun's measured peaks equal). On the CPU the
# copies are memcpy: step times show the copies' cost on this machine's
# memory, not PCIe. bench/offload_summary.py prints the tables. Holds
# $DSC_BENCH_LOCK like the other benchmarks.
set -euo pipefail

source "$(dirname "$0")/lock.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
out=${1:-${TMPDIR:-/tmp}/dsc-offload-bench}
steps=${STEPS:-12}
data=${DATA:-/usr/share/common-licenses/GPL-3}
mkdir -p "$out"

offload() { # none | optimizer | param | both
  case $1 in
  none) echo '' ;;
  optimizer) echo ', "offload_optimizer": {"device": "cpu"}' ;;
  param) echo ', "offload_param": {"device": "cpu"}' ;;
  both) echo ', "offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}' ;;
  esac
}

model=gpt2:n_layer=4,n_head=4,n_embd=256,block_size=128,vocab_size=256,dropout=0
for o in none optimizer param both; do
  cat > "$out/step.$o.json" <<EOF2
{"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true},
 "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
 "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 10000$(offload $o)}}
EOF2
  "$build/tools/dsc" --model "$model" --config "$out/step.$o.json" --world-size 2 \
    -o "$out/step.$o.dsplan" --report > "$out/step.$o.report.txt"
  rm -f "$out/step.$o.metrics"*.jsonl
  "$build/tools/dsrun" "$out/step.$o.dsplan" --np 2 --data "$data" --steps "$steps" \
    --metrics "$out/step.$o.metrics.jsonl" > "$out/step.$o.log" 2>&1
  echo "done step $o" >&2
done

# Part 2: the deepest model each setting fits in 1 GiB (doubling, then
# bisection on n_layer).
fit_model() { echo "gpt2:n_layer=$1,n_head=16,n_embd=1024,block_size=256,vocab_size=256,dropout=0"; }
fits() { # offload n_layer
  "$build/tools/dsc" --model "$(fit_model "$2")" --config "$out/fit.$1.json" \
    --device-memory 1GiB -o "$out/fit.dsplan" > /dev/null 2> "$out/fit.err"
}
for o in none both; do
  cat > "$out/fit.$o.json" <<EOF2
{"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true},
 "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
 "zero_optimization": {"stage": 3$(offload $o)}}
EOF2
  lo=0 hi=1
  while fits "$o" "$hi"; do lo=$hi; hi=$((hi * 2)); done
  while ((hi - lo > 1)); do
    mid=$(((lo + hi) / 2))
    if fits "$o" "$mid"; then lo=$mid; else hi=$mid; fi
  done
  echo "{\"offload\": \"$o\", \"n_embd\": 1024, \"max_n_layer\": $lo}" > "$out/fit.$o.result.json"
  if ((lo > 0)); then
    "$build/tools/dsc" --model "$(fit_model "$lo")" --config "$out/fit.$o.json" \
      --report > "$out/fit.$o.report.txt"
  fi
  echo "done fit $o: $lo layers" >&2
done
python3 "$root/bench/offload_summary.py" "$out"
