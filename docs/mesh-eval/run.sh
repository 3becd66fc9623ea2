#!/usr/bin/env bash
# Reruns docs/tensor-parallel.md's experiments with an mlir-opt (default:
# MLIR 19's), to see whether a newer MLIR's mesh (or shard) dialect still
# behaves as recorded there.   bash docs/mesh-eval/run.sh [MLIR_OPT]
opt=${1:-/usr/lib/llvm-19/bin/mlir-opt}
here=$(cd "$(dirname "$0")" && pwd)
for f in "$here"/*.mlir; do
  echo "== $(basename "$f")"
  "$opt" --pass-pipeline='builtin.module(func.func(sharding-propagation,mesh-spmdization))' \
    "$f" 2>&1 | grep -E 'mesh\.all_|error|func.func' | sed 's/^ *//'
done
