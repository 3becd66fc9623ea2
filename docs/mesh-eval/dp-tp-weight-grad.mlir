// MLIR 19 mesh: a weight gradient on a data x tensor mesh (the batch
// reduction split over data, the features over tensor), resharded as ZeRO
// would keep it: spmdization produces invalid IR.
#mk = affine_map<(m, n, k) -> (k, m)>
#kn = affine_map<(m, n, k) -> (k, n)>
#mn = affine_map<(m, n, k) -> (m, n)>
mesh.mesh @m(shape = 2x4)
// dW[16x32] = x^T[16x8] * dy[8x32], batch(8) split on dp axis 0, out-features split on tp axis 1
func.func @dw(%x: tensor<8x16xf32>, %dy: tensor<8x32xf32>, %init: tensor<16x32xf32>) -> tensor<16x32xf32> {
  %is = mesh.shard %init to <@m, [[], [1]]> : tensor<16x32xf32>
  %xs = mesh.shard %x to <@m, [[0]]> : tensor<8x16xf32>
  %dys = mesh.shard %dy to <@m, [[0], [1]]> : tensor<8x32xf32>
  %g = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%xs, %dys : tensor<8x16xf32>, tensor<8x32xf32>) outs(%is : tensor<16x32xf32>) {
    ^bb0(%a: f32, %b: f32, %c: f32):
      %p = arith.mulf %a, %b : f32
      %s = arith.addf %p, %c : f32
      linalg.yield %s : f32
  } -> tensor<16x32xf32>
  %g0 = mesh.shard %g to <@m, [[], [1]], partial = sum[0]> : tensor<16x32xf32>
  // ZeRO: gradient sharded over dp on dim 0 as well
  %gz = mesh.shard %g0 to <@m, [[0], [1]]> annotate_for_users : tensor<16x32xf32>
  return %gz : tensor<16x32xf32>
}
