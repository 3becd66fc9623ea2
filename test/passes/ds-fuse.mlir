// RUN: ds-opt %s -ds-fuse | FileCheck %s
// bias + gelu and residual add + layer_norm become single-pass ops that also
// return the intermediate the backward pass reads. @forward is left alone.

ds.variable param @w : tensor<8xf32> init ones
ds.variable param @b : tensor<8xf32> init zeros

// CHECK-LABEL: func.func @forward
// CHECK-NOT:   ds.bias_gelu
func.func @forward(%x: tensor<2x8xf32>) -> tensor<f32> {
  %b = ds.load @b : tensor<8xf32>
  %s = ds.add %x, %b : tensor<2x8xf32>, tensor<8xf32>
  %g = ds.gelu tanh %s : tensor<2x8xf32>
  %l = ds.reduce_sum %g axes [0, 1] : tensor<2x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @micro_step(
// CHECK-SAME:    %[[X:.*]]: tensor<2x8xf32>, %[[R:.*]]: tensor<2x8xf32>)
func.func @micro_step(%x: tensor<2x8xf32>, %r: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  // CHECK:      %[[B:.*]] = ds.load @b
  // CHECK-NEXT: %[[SUM:.*]], %[[GELU:.*]] = ds.bias_gelu tanh %[[X]], %[[B]] : tensor<2x8xf32>, tensor<8xf32>
  %b = ds.load @b : tensor<8xf32>
  %s = ds.add %x, %b : tensor<2x8xf32>, tensor<8xf32>
  %g = ds.gelu tanh %s : tensor<2x8xf32>
  // The parameter loads move above the residual add they now follow.
  // CHECK-NEXT: %[[W:.*]] = ds.load @w
  // CHECK-NEXT: %[[B2:.*]] = ds.load @b
  // CHECK-NEXT: %[[RES:.*]], %[[NORM:.*]] = ds.add_layer_norm %[[GELU]], %[[R]], %[[W]], %[[B2]] eps 1.000000e-05
  %h = ds.add %g, %r : tensor<2x8xf32>, tensor<2x8xf32>
  %w = ds.load @w : tensor<8xf32>
  %b2 = ds.load @b : tensor<8xf32>
  %n = ds.layer_norm %h, %w, %b2 eps 1.0e-5 : tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>
  // CHECK: return %[[SUM]], %[[RES]], %[[NORM]]
  return %s, %h, %n : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// A broadcast add is not a residual; a bias over a non-last dim is not a bias.
// CHECK-LABEL: func.func @apply
// CHECK-NOT:   ds.bias_gelu
// CHECK-NOT:   ds.add_layer_norm
func.func @apply(%x: tensor<2x8xf32>, %c: tensor<2x1xf32>, %r: tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %s = ds.add %x, %c : tensor<2x8xf32>, tensor<2x1xf32>
  %g = ds.gelu tanh %s : tensor<2x8xf32>
  %w = ds.load @w : tensor<8xf32>
  %h = ds.add %x, %r : tensor<2x8xf32>, tensor<8xf32>
  %n = ds.layer_norm %h, %w eps 1.0e-5 : tensor<2x8xf32>, tensor<8xf32>
  return %g, %n : tensor<2x8xf32>, tensor<2x8xf32>
}
