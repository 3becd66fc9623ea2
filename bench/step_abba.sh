#!/usr/bin/env bash
# One training step's time and peak RSS, two builds against each other:
#
#   bash bench/step_abba.sh OLD_BUILD_DIR NEW_BUILD_DIR [ROUNDS]
#
# Each build's own dsc compiles the benchmark plan of bench/gpt2_cpu.sh
# (gpt2 n_layer=4 n_head=4 n_embd=256 block_size=128, micro-batch 8, AdamW,
# clipping 1.0: plans of different schema versions cannot be shared), then
# the two dsruns train it 30 steps on 4 MB of seeded random bytes in ABBA
# order (old, new, new, old, ...: on this shared machine the second of two
# back-to-back runs is measurably slower, so plain alternation is biased),
# ROUNDS times (default 2), through bench/dsrun_abba.sh. Prints each run's
# median step_s over steps 6-30, the medians per build and the peak RSS.
# Holds $DSC_BENCH_LOCK.
set -euo pipefail

source "$(dirname "$0")/lock.sh"

old=${1:?old build dir}
new=${2:?new build dir}
rounds=${3:-2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cat > "$out/ds_config.json" <<'JSON'
{
  "train_micro_batch_size_per_gpu": 8,
  "gradient_clipping": 1.0,
  "optimizer": {"type": "AdamW",
                "params": {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8,
                           "weight_decay": 0.1}}
}
JSON
model=gpt2:n_layer=4,n_head=4,n_embd=256,block_size=128,vocab_size=256,dropout=0
for side in old new; do
  dir=${!side}
  "$dir/tools/dsc" --model "$model" --config "$out/ds_config.json" -o "$out/$side.dsplan"
done

NEW_PLAN="$out/new.dsplan" SKIP=5 bash "$(dirname "$0")/dsrun_abba.sh" \
  "$old/tools/dsrun" "$new/tools/dsrun" "$out/old.dsplan" 30 "$rounds"
