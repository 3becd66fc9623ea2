// RUN: ds-opt %s -split-input-file -ds-verify-input=dsrun-inputs=true -verify-diagnostics | FileCheck %s
// What dsc checks before it writes a plan file: @forward takes what dsrun
// feeds a training step, token ids and target ids of one [B, T] shape.

// CHECK: func.func @forward(%{{.*}}: tensor<2x4xi32>, %{{.*}}: tensor<2x4xi32>)
ds.variable param @wte : tensor<8x3xf32> init normal std 2.000000e-02
func.func @forward(%tok: tensor<2x4xi32>, %tgt: tensor<2x4xi32>) -> tensor<f32> {
  %w = ds.load @wte : tensor<8x3xf32>
  %e = ds.embedding %w, %tok : tensor<8x3xf32>, tensor<2x4xi32> -> tensor<2x4x3xf32>
  %l = ds.reduce_sum %e axes [0, 1, 2] : tensor<2x4x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// No targets argument.
ds.variable param @wte : tensor<8x3xf32> init normal std 2.000000e-02
// expected-error @+1 {{input contract: dsrun feeds @forward token ids and target ids, two tensor<BxTxi32> of one shape; it takes (tensor<2x4xi32>)}}
func.func @forward(%tok: tensor<2x4xi32>) -> tensor<f32> {
  %w = ds.load @wte : tensor<8x3xf32>
  %e = ds.embedding %w, %tok : tensor<8x3xf32>, tensor<2x4xi32> -> tensor<2x4x3xf32>
  %l = ds.reduce_sum %e axes [0, 1, 2] : tensor<2x4x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Targets of another shape.
ds.variable param @wte : tensor<8x3xf32> init normal std 2.000000e-02
// expected-error @+1 {{it takes (tensor<2x4xi32>, tensor<2x5xi32>)}}
func.func @forward(%tok: tensor<2x4xi32>, %tgt: tensor<2x5xi32>) -> tensor<f32> {
  %w = ds.load @wte : tensor<8x3xf32>
  %e = ds.embedding %w, %tok : tensor<8x3xf32>, tensor<2x4xi32> -> tensor<2x4x3xf32>
  %l = ds.reduce_sum %e axes [0, 1, 2] : tensor<2x4x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
