func.func @forward(%x: tensor<2x8xf32>) -> tensor<f32> {
  // A typo in an op name.
  %y = ds.matmull %x, %x : tensor<2x8xf32>
  return %y : tensor<f32>
}
