// RUN: ds-opt %s -ds-autodiff -ds-adamw | FileCheck %s
// The marks later passes read (dialects/ds/Contracts.h): ds-autodiff marks
// each gradient accumulation in @micro_step, ds-adamw the global gradient
// norm in @apply, and nothing else.

ds.variable param @w : tensor<3x4xf32> init normal std 2.000000e-02
ds.variable param @b : tensor<4xf32> init zeros
func.func @forward(%x: tensor<2x3xf32>, %t: tensor<2xi32>) -> tensor<f32> {
  %w = ds.load @w : tensor<3x4xf32>
  %b = ds.load @b : tensor<4xf32>
  %h = ds.matmul %x, %w : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  %y = ds.add %h, %b : tensor<2x4xf32>, tensor<4xf32>
  %l = ds.cross_entropy %y, %t : tensor<2x4xf32>, tensor<2xi32> -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @micro_step(
// CHECK:         %[[AB:.*]] = ds.load @b.grad
// CHECK-NEXT:    %[[SB:.*]] = ds.add %[[AB]], %{{.*}}
// CHECK-NEXT:    ds.store %[[SB]], @b.grad {ds.grad_accumulation} : tensor<4xf32>
// CHECK:         %[[AW:.*]] = ds.load @w.grad
// CHECK-NEXT:    %[[SW:.*]] = ds.add %[[AW]], %{{.*}}
// CHECK-NEXT:    ds.store %[[SW]], @w.grad {ds.grad_accumulation} : tensor<3x4xf32>
// CHECK-NOT:     ds.grad_accumulation
// CHECK-LABEL: func.func @apply(
// CHECK-NOT:     ds.grad_accumulation
// CHECK:         %[[TOT:.*]] = ds.add
// CHECK-NEXT:    %{{.*}} = ds.sqrt %[[TOT]] {ds.global_grad_norm} : tensor<f32>
// CHECK-NOT:     ds.global_grad_norm
// CHECK-NOT:     ds.grad_accumulation
