// RUN: ds-opt %s -split-input-file -ds-autodiff=accumulation-steps=2 -verify-diagnostics | FileCheck %s
// @micro_step: forward, the reverse pass from VJP rules, accumulation into
// grad variables. @w is read twice (tied) so its two gradients are summed;
// @unused gets no accumulator; the token input gets no gradient.

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

// CHECK:      ds.variable param @w : tensor<3x4xf32>
// CHECK-NEXT: ds.variable grad @w.grad of @w : tensor<3x4xf32> init zeros
// CHECK-NEXT: ds.variable param @b : tensor<4xf32>
// CHECK-NEXT: ds.variable grad @b.grad of @b : tensor<4xf32> init zeros
// CHECK-NEXT: ds.variable param @unused
// CHECK-NOT:  @unused.grad
// CHECK:      func.func @forward
// CHECK-LABEL: func.func @micro_step(
// CHECK-SAME:    %[[X:.*]]: tensor<2x3xf32>, %[[T:.*]]: tensor<2xi32>) -> tensor<f32>
// CHECK:        %[[W:.*]] = ds.load @w
// CHECK:        %[[B:.*]] = ds.load @b
// CHECK-NOT:    ds.load @unused
// CHECK:        %[[H:.*]] = ds.matmul %[[X]], %[[W]]
// CHECK:        %[[Y:.*]] = ds.add %[[H]], %[[B]]
// CHECK:        %[[W2:.*]] = ds.load @w
// CHECK:        %[[Z:.*]] = ds.matmul %[[Y]], %[[W2]] {transpose_rhs}
// CHECK:        %[[L:.*]] = ds.cross_entropy %[[Z]], %[[T]]
// The loss cotangent is 1 / accumulation-steps.
// CHECK:        %[[SEED:.*]] = ds.constant {ds.loss_seed} dense<5.000000e-01> : tensor<f32>
// CHECK:        %[[DZ:.*]] = ds.cross_entropy_grad %[[Z]], %[[T]], %[[SEED]]
// CHECK:        %[[DY:.*]] = ds.matmul %[[DZ]], %[[W2]] : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
// CHECK:        %[[DW2:.*]] = ds.matmul %[[DZ]], %[[Y]] {transpose_lhs} : tensor<2x3xf32>, tensor<2x4xf32> -> tensor<3x4xf32>
// CHECK:        %[[DB:.*]] = ds.reduce_sum %[[DY]] axes [0] : tensor<2x4xf32> -> tensor<4xf32>
// CHECK:        %[[DW1:.*]] = ds.matmul %[[X]], %[[DY]] {transpose_lhs} : tensor<2x3xf32>, tensor<2x4xf32> -> tensor<3x4xf32>
// CHECK-NOT:    ds.matmul
// CHECK:        %[[DW:.*]] = ds.add %[[DW2]], %[[DW1]]
// CHECK:        %[[ACC:.*]] = ds.load @w.grad
// CHECK:        %[[SUM:.*]] = ds.add %[[ACC]], %[[DW]]
// CHECK:        ds.store %[[SUM]], @w.grad
// CHECK:        %[[ACCB:.*]] = ds.load @b.grad
// CHECK:        %[[SUMB:.*]] = ds.add %[[ACCB]], %[[DB]]
// CHECK:        ds.store %[[SUMB]], @b.grad
// CHECK:        return %[[L]] : tensor<f32>

// -----

ds.variable param @w : tensor<4xf32> init ones
func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
  %w = ds.load @w : tensor<4xf32>
  // expected-error @+1 {{ds-autodiff: 'ds.equal' has no gradient rule, but the loss depends on a parameter through it}}
  %e = ds.equal %w, %x : tensor<4xf32>, tensor<4xf32>
  %l = ds.reduce_sum %e axes [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{ds-autodiff: no @forward to differentiate}}
module {
}
