// MLIR 19 mesh: a row-parallel product whose sum is wanted split along the
// rows (Megatron sequence parallelism). Spmdization emits all_reduce then
// all_slice, not reduce_scatter.
mesh.mesh @tp(shape = 4)
func.func @rs(%h: tensor<8x32xf32>, %w2: tensor<32x16xf32>, %z1: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %hs = mesh.shard %h to <@tp, [[], [0]]> : tensor<8x32xf32>
  %w2s = mesh.shard %w2 to <@tp, [[0], []]> : tensor<32x16xf32>
  %y = linalg.matmul ins(%hs, %w2s : tensor<8x32xf32>, tensor<32x16xf32>) outs(%z1 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y0 = mesh.shard %y to <@tp, [[]], partial = sum[0]> : tensor<8x16xf32>
  %ys = mesh.shard %y0 to <@tp, [[0]]> annotate_for_users : tensor<8x16xf32>
  return %ys : tensor<8x16xf32>
}
