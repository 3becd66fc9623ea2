module attributes {ds.aliases = {"head.w" = "missing", "b" = "w"}} {
ds.variable param @w : tensor<3x4xf32> init normal std 2.000000e-02
ds.variable param @b : tensor<4xf32> init zeros
ds.variable param @unused : tensor<4xf32> init zeros
func.func @forward(%x: tensor<2x3xf32>, %t: tensor<2xi32>) -> tensor<f32> {
  %w = ds.load @w : tensor<3x4xf32>
  %b = ds.load @b : tensor<4xf32>
  %u = ds.load @unused : tensor<4xf32>
  %h = ds.matmul %x, %w : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  %y = ds.add %h, %b : tensor<2x4xf32>, tensor<4xf32>
  %w2 = ds.load @w : tensor<3x4xf32>
  %z = ds.matmul %y, %w2 {transpose_rhs} : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %l = ds.cross_entropy %z, %t : tensor<2x3xf32>, tensor<2xi32> -> tensor<f32>
  return %l : tensor<f32>
}
}
