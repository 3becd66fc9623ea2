// MLIR 19 mesh: swapping the two split axes of a 2-D (2 x 4) mesh gives a
// wrong local type (tensor<8x2xf32> for the 2 x 8 a device holds).
mesh.mesh @m(shape = 2x4)
func.func @f(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %a = mesh.shard %x to <@m, [[0], [1]]> : tensor<8x16xf32>
  %b = mesh.shard %a to <@m, [[1], [0]]> annotate_for_users : tensor<8x16xf32>
  return %b : tensor<8x16xf32>
}
