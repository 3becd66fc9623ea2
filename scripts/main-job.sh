#!/usr/bin/env bash
# The main job: install, build, compile a small GPT with dsc and train it with
# dsrun on text every Debian machine has (the licenses in
# /usr/share/common-licenses, from base-files), showing progress and the
# falling loss.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
steps=${STEPS:-500}
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$build"

work=$build/main-job
mkdir -p "$work"
data=$work/licenses.txt
licenses=/usr/share/common-licenses
cat "$licenses"/Apache-2.0 "$licenses"/Artistic "$licenses"/BSD \
    "$licenses"/GFDL-1.3 "$licenses"/GPL-2 "$licenses"/GPL-3 \
    "$licenses"/LGPL-2.1 "$licenses"/LGPL-3 "$licenses"/MPL-1.1 \
    "$licenses"/MPL-2.0 > "$data"
heldout=$licenses/CC0-1.0
echo "== data: $data ($(wc -c < "$data") bytes, byte-level vocabulary of 256)"

model="gpt2:n_layer=4,n_head=4,n_embd=128,block_size=128,vocab_size=256,dropout=0"
echo "== dsc --model $model --config scripts/gpt2-char.json"
"$build/tools/dsc" --model "$model" --config "$root/scripts/gpt2-char.json" \
    -o "$work/gpt2.dsplan" --report
"$build/tools/dsc" --model "$model" --config "$root/scripts/gpt2-char.json" \
    -o "$work/gpt2.dsplan"

echo "== dsrun: $steps steps"
# Held out: a licence the model never trains on, evaluated every 10% of
# the run (val on the progress line, val_loss in the metrics).
"$build/tools/dsrun" "$work/gpt2.dsplan" --data "$data" --steps "$steps" \
    --eval-data "$heldout" --eval-every $(( steps > 10 ? steps / 10 : 1 )) \
    --metrics "$work/metrics.jsonl" --export-weights "$work/gpt2.safetensors"
echo "== metrics: $work/metrics.jsonl; weights (nanoGPT names): $work/gpt2.safetensors"
echo "== a sample of what it learned (dsrun --sample, temperature 0.8, top-k 40)"
"$build/tools/dsrun" "$work/gpt2.dsplan" --init-from "$work/gpt2.safetensors" \
    --sample 300 --prompt "This License" --temperature 0.8 --top-k 40 2>/dev/null | tail -n +2
