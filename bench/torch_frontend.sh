#!/usr/bin/env bash
# What the PyTorch frontend's graph costs against dsc's own model of the
# same network: Hugging Face's LlamaForCausalLM exported with dsc.export
# (its RMSNorm and rotary embedding fused back into ds.rms_norm and
# ds.rotary by frontends/torch/dsc/patterns.py) against the built-in
# llama:dim=128,n_layer=4,n_head=4 (ds.rotary), one rank, micro-batch 8 x
# 128 tokens, fp32. Runs the two alternately, ROUNDS (3) times STEPS (30)
# steps each, and prints each run's median step time and the ratio
# exported / built-in per round. Holds $DSC_BENCH_LOCK like the others.
#
#   bash bench/torch_frontend.sh [OUT_DIR]   # default /tmp/dsc-torch-frontend
set -euo pipefail

source "$(dirname "$0")/lock.sh"

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
out=${1:-${TMPDIR:-/tmp}/dsc-torch-frontend}
steps=${STEPS:-30}
rounds=${ROUNDS:-3}
data=${DATA:-/usr/share/common-licenses/GPL-3}
mkdir -p "$out"
unset PYTHONPATH  # dsc as the build installed it into build/venv (docs/install.md)
cfg="$out/config.json"
echo '{"train_micro_batch_size_per_gpu": 8, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}' > "$cfg"

"$build/venv/bin/python" - "$out" <<'PY'
import sys
import torch
from transformers import LlamaConfig, LlamaForCausalLM
import dsc
torch.manual_seed(0)
m = LlamaForCausalLM(LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=352,
                                 num_hidden_layers=4, num_attention_heads=4,
                                 num_key_value_heads=4, max_position_embeddings=128,
                                 rms_norm_eps=1e-5, attn_implementation="sdpa"))
dsc.export(m, 8, 128, loss="cross_entropy").save(f"{sys.argv[1]}/hf.mlir",
                                                 f"{sys.argv[1]}/hf.safetensors")
PY
"$build/tools/dsc" "$out/hf.mlir" --config "$cfg" -o "$out/hf.dsplan"
"$build/tools/dsc" --model llama:dim=128,n_layer=4,n_head=4,vocab_size=256,block_size=128 \
  --config "$cfg" -o "$out/builtin.dsplan"

median_step() { # METRICS.jsonl -> median step_s over steps 3.. (warm)
  python3 -c "import json,sys,statistics as s; r=[json.loads(l)['step_s'] for l in open(sys.argv[1])][2:]; print(s.median(r))" "$1"
}
for r in $(seq 1 "$rounds"); do
  "$build/tools/dsrun" "$out/hf.dsplan" --data "$data" --steps "$steps" \
    --init-from "$out/hf.safetensors" --metrics "$out/hf.$r.jsonl" > /dev/null
  "$build/tools/dsrun" "$out/builtin.dsplan" --data "$data" --steps "$steps" \
    --metrics "$out/builtin.$r.jsonl" > /dev/null
  hf=$(median_step "$out/hf.$r.jsonl")
  bi=$(median_step "$out/builtin.$r.jsonl")
  python3 -c "print(f'round $r: exported HF Llama {float(\"$hf\")*1e3:.1f} ms/step, built-in llama {float(\"$bi\")*1e3:.1f} ms/step, ratio {float(\"$hf\")/float(\"$bi\"):.2f}')"
done
grep -c "ds\.\(rms_norm\|attention\|rotary\)" "$out/hf.mlir" | sed 's/^/exported graph: rms_norm+attention+rotary ops: /'
