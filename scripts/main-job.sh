#!/usr/bin/env bash
# The main job: install, build, and compile a small GPT into its training
# step. (Training it with dsrun arrives with the plan + CPU runtime.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$build"
model="gpt2:n_layer=4,n_head=4,n_embd=128,block_size=128,vocab_size=256,batch_size=8"
out=$(mktemp -d)/gpt2-train.mlir
echo "== dsc --model $model --compile-to=train"
"$build/tools/dsc" --model "$model" --compile-to=train -o "$out"
for f in forward micro_step apply; do
  n=$(awk -v f="@$f(" 'index($0, f) {on=1; next} on && /^  }/ {on=0} on && /= ds\./ {n++} END {print n+0}' "$out")
  echo "  @$f: $n ds ops"
done
echo "  variables: $(grep -c 'ds.variable param' "$out") params, $(grep -c 'ds.variable grad' "$out") grads, $(grep -c 'ds.variable opt_state' "$out") moments"
echo "  training step written to $out"
