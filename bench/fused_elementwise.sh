#!/usr/bin/env bash
# Elementwise fusion (issue 32): a model's training step with its
# elementwise chains as ds.fused_elementwise groups (dsc's default) against
# the same plan with them apart (dsc --fuse-elementwise=false), fp32 and
# bf16: bench/flag_ab.sh on a small Llama (4 layers, dim 256, T 128, byte
# vocabulary, micro-batch 8), where SwiGLU's product and its backward fuse.
#
#   bash bench/fused_elementwise.sh [OUT_DIR]
#
# Rows "on" are fused, "off" unfused. Knobs as bench/flag_ab.sh's.
set -euo pipefail
export FLAG=fuse-elementwise SHARE=${SHARE:-ds.fused_elementwise}
export MODEL=${MODEL:-llama:n_layer=4,n_head=4,dim=256,block_size=128,vocab_size=256}
exec bash "$(dirname "$0")/flag_ab.sh" "${1:-${TMPDIR:-/tmp}/dsc-fused-elementwise-bench}"
