ds.variable param @w : tensor<4x4xf32> init normal std 2.000000e-02
func.func @forward(%x: tensor<2x8xf32>) -> tensor<f32> {
  %w = ds.load @w : tensor<4x4xf32>
  // The contraction is 8 against 4.
  %y = ds.matmul %x, %w : tensor<2x8xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %l = ds.reduce_sum %y axes [0, 1] : tensor<2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
