#!/usr/bin/env bash
# Tensor parallelism against ZeRO on 4 ranks of this machine (CPU, MPI):
#   T = 4       "tensor_parallel": {"autotp_size": 4}, one replica
#   T = 4 + SP  the same with "sequence_parallel": true
#   T = 4 x 2   the same with "micro_batch_chunks": 2 (the forward's
#               all-reduces under the other chunk's GEMMs)
#   D = 4 ZeRO-3  4 data-parallel ranks, every matrix sharded
#   D = 4 stage 0 4 data-parallel ranks, plain all-reduce
#   2 x 2       2 replicas of T = 2 at ZeRO 1
#   S = 4       "sequence_parallel_size": 4 (Ulysses), one replica
#
#   bash bench/tensor_parallel.sh [OUT_DIR]   # default /tmp/dsc-tp-bench
#
# gpt2 n_layer=4 n_head=8 n_embd=512 block_size=128 vocab_size=256
# dropout=0, a global batch of 8 sequences a step (T = 4: micro-batch 8 on
# the one replica; D = 4: 2 a rank), AdamW, clipping 1.0. For each: dsc
# --report --machine cpu (the prediction: bytes, memory, and the collective
# time hidden under compute), dsrun for STEPS (10) steps with --metrics and
# --trace (step time, memory written, comm time hidden), then 3 steps with
# comms_logger (what each rank ran, per group); tensor_parallel_summary.py
# prints the table. Builds nothing; holds $DSC_BENCH_LOCK (lock.sh).
set -euo pipefail

source "$(dirname "$0")/lock.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
out=${1:-${TMPDIR:-/tmp}/dsc-tp-bench}
steps=${STEPS:-10}
data=${DATA:-/usr/share/common-licenses/GPL-3}
model=gpt2:n_layer=4,n_head=8,n_embd=512,block_size=128,vocab_size=256,dropout=0
mkdir -p "$out"

config() { # tag micro-batch extra-json
  cat > "$out/$1.json" <<EOF2
{
  "train_micro_batch_size_per_gpu": $2,
  "gradient_accumulation_steps": 1,
  "gradient_clipping": 1.0,
  "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.1}},
  $3
}
EOF2
  sed 's/^{$/{\n  "comms_logger": {"enabled": true},/' "$out/$1.json" > "$out/$1.comms.json"
}
config t4 8 '"tensor_parallel": {"autotp_size": 4}'
config t4sp 8 '"tensor_parallel": {"autotp_size": 4, "sequence_parallel": true}'
config t4c 8 '"tensor_parallel": {"autotp_size": 4, "micro_batch_chunks": 2}'
config z3 2 '"zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 10000}'
config z0 2 '"zero_optimization": {"stage": 0}'
config m22 4 '"tensor_parallel": {"autotp_size": 2}, "zero_optimization": {"stage": 1}'
config u4 8 '"sequence_parallel_size": 4'

for tag in ${TAGS:-t4 t4sp t4c z3 z0 m22 u4}; do
  "$build/tools/dsc" --model "$model" --config "$out/$tag.json" --world-size 4 \
    -o "$out/$tag.dsplan" --report --machine cpu > "$out/$tag.report.txt"
  "$build/tools/dsc" --model "$model" --config "$out/$tag.comms.json" --world-size 4 \
    -o "$out/$tag.comms.dsplan"
  rm -f "$out/$tag.metrics.jsonl" "$out/$tag.trace"*.json
  "$build/tools/dsrun" "$out/$tag.dsplan" --np 4 --data "$data" --steps "$steps" \
    --metrics "$out/$tag.metrics.jsonl" --trace "$out/$tag.trace.json" > "$out/$tag.log" 2>&1
  "$build/tools/dsrun" "$out/$tag.comms.dsplan" --np 4 --data "$data" --steps 3 \
    > "$out/$tag.comms.log" 2>&1
  echo "done $tag" >&2
done
python3 "$root/bench/tensor_parallel_summary.py" "$out" --steps 3
