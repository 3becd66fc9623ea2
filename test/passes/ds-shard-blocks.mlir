// RUN: not ds-opt %s -ds-shard="tensor-parallel=2" 2>&1 | FileCheck %s

// GPT-2's fused c_attn is cut in its 3 blocks (query, key, value: each rank
// keeps its part of each). A reshape that splits the fused dimension into
// [3, 4] would put other ranks' parts in a rank's rows, so the rule refuses
// it by name (the model splits the blocks with ds.split instead).
// CHECK: error: ds-shard: ds.reshape cannot run tensor-parallel: a dimension cut in blocks is reshaped
module {
  ds.variable param @h.c_attn.weight : tensor<12x4xf32> init normal std 2.000000e-02
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x3x4xf32> {
    %w = ds.load @h.c_attn.weight : tensor<12x4xf32>
    %y = ds.matmul %x, %w {transpose_rhs} : tensor<2x4xf32>, tensor<12x4xf32> -> tensor<2x12xf32>
    %r = ds.reshape %y : tensor<2x12xf32> -> tensor<2x3x4xf32>
    return %r : tensor<2x3x4xf32>
  }
}
