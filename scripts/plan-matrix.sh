#!/usr/bin/env bash
# Compiles the plans a structural change must leave byte-identical: gpt2,
# llama and mlp x ZeRO 0-3 x fp32/fp16/bf16 x optimizer offload x remat
# none/layers/selective x 1 and 2 ranks, WarmupDecayLR, WarmupCosineLR,
# static fp16, Lamb at ZeRO-2 with offload, Muon at ZeRO-2, no config, and
# test/e2e/Inputs/*.json. Compile with the dsc
# before and after the change into two folders and compare:
#   scripts/plan-matrix.sh OLD_DSC /tmp/old; scripts/plan-matrix.sh build/tools/dsc /tmp/new
#   for f in /tmp/old/*.dsplan; do cmp -s "$f" /tmp/new/${f##*/} || echo "$f"; done
# A combination dsc refuses is listed in OUT/failures (the same on both
# sides when nothing changed). Prints the number of plans written.
# Usage: scripts/plan-matrix.sh DSC OUT
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: scripts/plan-matrix.sh DSC OUT" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
dsc=$(realpath "$1")
out=$2
mkdir -p "$out/cfg"
: > "$out/failures"
config() { echo "$2" > "$out/cfg/$1.json"; }
for stage in 0 1 2 3; do
  for prec in fp32 fp16 bf16; do
    for off in none cpu; do
      [ $stage = 0 ] && [ $off = cpu ] && continue
      p=""
      [ $prec = fp16 ] && p='"fp16": {"enabled": true, "initial_scale_power": 12, "hysteresis": 3},'
      [ $prec = bf16 ] && p='"bf16": {"enabled": true},'
      o=""
      [ $off = cpu ] && o=', "offload_optimizer": {"device": "cpu"}'
      config "s${stage}_${prec}_${off}" "{\"train_micro_batch_size_per_gpu\": 2, \"gradient_accumulation_steps\": 2, $p \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 3e-4, \"weight_decay\": 0.1}}, \"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"warmup_num_steps\": 5, \"total_num_steps\": 50, \"warmup_max_lr\": 3e-4}}, \"gradient_clipping\": 1.0, \"zero_optimization\": {\"stage\": $stage $o}}"
    done
  done
done
config cosine '{"train_micro_batch_size_per_gpu": 2, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}, "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 100, "warmup_num_steps": 10, "cos_min_ratio": 0.01}}}'
config lamb_s2_bf16 '{"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true}, "optimizer": {"type": "Lamb", "params": {"lr": 1e-3, "weight_decay": 0.01}}, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}'
config muon_s2_bf16 '{"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true}, "optimizer": {"type": "Muon", "params": {"lr": 1e-3, "weight_decay": 0.01}}, "zero_optimization": {"stage": 2}}'
config static16 '{"train_micro_batch_size_per_gpu": 2, "fp16": {"enabled": true, "loss_scale": 128}}'
for f in "$root"/test/e2e/Inputs/*.json; do
  cp "$f" "$out/cfg/in_$(basename "$f")"
done
models=("gpt2:n_layer=2,n_head=2,n_embd=16,block_size=16,vocab_size=64"
        "llama:dim=16,n_layer=2,n_head=2,hidden_dim=24,vocab_size=64,block_size=16"
        "mlp")
for model in "${models[@]}"; do
  m=${model%%:*}
  for c in "$out"/cfg/*.json; do
    n=$(basename "$c" .json)
    for ws in 1 2; do
      "$dsc" --model "$model" --config "$c" --world-size $ws \
        -o "$out/$m.$n.ws$ws.dsplan" > /dev/null 2>&1 ||
        echo "$m $n world size $ws" >> "$out/failures"
    done
    for r in layers selective; do
      "$dsc" --model "$model" --config "$c" --remat=$r \
        -o "$out/$m.$n.$r.dsplan" > /dev/null 2>&1 ||
        echo "$m $n remat $r" >> "$out/failures"
    done
  done
  "$dsc" --model "$model" -o "$out/$m.noconfig.dsplan" > /dev/null 2>&1 ||
    echo "$m no config" >> "$out/failures"
done
ls "$out"/*.dsplan | wc -l
