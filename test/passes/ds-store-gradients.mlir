// RUN: ds-opt %s -split-input-file -ds-store-gradients | FileCheck %s
// RUN: ds-opt %s -split-input-file -ds-store-gradients=accumulation-steps=2 | FileCheck %s --check-prefix=ACC2
// With one micro-step a step, an accumulator's first accumulation stores
// the gradient itself and @apply stops zeroing it; with several the
// program is left alone.

ds.variable param @w : tensor<4xf32> init ones
ds.variable grad @w.grad of @w : tensor<4xf32> init zeros
ds.variable param @t : tensor<4xf32> init ones
ds.variable grad @t.grad of @t : tensor<4xf32> init zeros
ds.variable param @r : tensor<4xf32> init ones
ds.variable grad @r.grad of @r : tensor<4xf32> init zeros

// @w: stored. @t (tied, two gradients): the first stored, the second
// still adds to it. @r: read before its accumulation, so left alone, and
// so is its zeroing. The store without the mark is not an accumulation.
// CHECK-LABEL: func.func @micro_step
// CHECK-NEXT:  %[[GW:.*]] = ds.mul %arg0, %arg0
// CHECK-NEXT:  ds.store %[[GW]], @w.grad : tensor<4xf32>
// CHECK-NEXT:  %[[GT1:.*]] = ds.exp %arg0
// CHECK-NEXT:  ds.store %[[GT1]], @t.grad : tensor<4xf32>
// CHECK-NEXT:  %[[GT2:.*]] = ds.neg %arg0
// CHECK-NEXT:  %[[AT:.*]] = ds.load @t.grad
// CHECK-NEXT:  %[[ST:.*]] = ds.add %[[AT]], %[[GT2]]
// CHECK-NEXT:  ds.store %[[ST]], @t.grad {ds.grad_accumulation}
// CHECK-NEXT:  %[[PEEK:.*]] = ds.load @r.grad
// CHECK-NEXT:  %[[AR:.*]] = ds.load @r.grad
// CHECK-NEXT:  %[[SR:.*]] = ds.add %[[AR]], %[[PEEK]]
// CHECK-NEXT:  ds.store %[[SR]], @r.grad {ds.grad_accumulation}
// CHECK-NEXT:  return
// ACC2-LABEL: func.func @micro_step
// ACC2-NEXT:  ds.mul
// ACC2-NEXT:  ds.load @w.grad
// ACC2-NEXT:  ds.add
// ACC2-NEXT:  ds.store {{.*}} @w.grad {ds.grad_accumulation}
func.func @micro_step(%x: tensor<4xf32>) {
  %gw = ds.mul %x, %x : tensor<4xf32>, tensor<4xf32>
  %aw = ds.load @w.grad : tensor<4xf32>
  %sw = ds.add %aw, %gw : tensor<4xf32>, tensor<4xf32>
  ds.store %sw, @w.grad {ds.grad_accumulation} : tensor<4xf32>
  %gt1 = ds.exp %x : tensor<4xf32>
  %at1 = ds.load @t.grad : tensor<4xf32>
  %st1 = ds.add %at1, %gt1 : tensor<4xf32>, tensor<4xf32>
  ds.store %st1, @t.grad {ds.grad_accumulation} : tensor<4xf32>
  %gt2 = ds.neg %x : tensor<4xf32>
  %at2 = ds.load @t.grad : tensor<4xf32>
  %st2 = ds.add %at2, %gt2 : tensor<4xf32>, tensor<4xf32>
  ds.store %st2, @t.grad {ds.grad_accumulation} : tensor<4xf32>
  %peek = ds.load @r.grad : tensor<4xf32>
  %ar = ds.load @r.grad : tensor<4xf32>
  %sr = ds.add %ar, %peek : tensor<4xf32>, tensor<4xf32>
  ds.store %sr, @r.grad {ds.grad_accumulation} : tensor<4xf32>
  return
}

// The zeros of @w and @t go (their constant with them when nothing else
// reads it); @r keeps its zeroing, and a store of ones is not a zeroing.
// CHECK-LABEL: func.func @apply
// CHECK-NEXT:  %[[ONES:.*]] = ds.constant dense<1.000000e+00>
// CHECK-NEXT:  %[[ZEROS:.*]] = ds.constant dense<0.000000e+00>
// CHECK-NEXT:  ds.store %[[ONES]], @w.grad
// CHECK-NEXT:  ds.store %[[ZEROS]], @r.grad
// CHECK-NEXT:  return
// ACC2-LABEL: func.func @apply
// ACC2:       ds.store {{.*}} @w.grad
// ACC2-NEXT:  ds.store {{.*}} @t.grad
// ACC2-NEXT:  ds.store {{.*}} @w.grad
// ACC2-NEXT:  ds.store {{.*}} @r.grad
func.func @apply() {
  %ones = ds.constant dense<1.0> : tensor<4xf32>
  %zeros = ds.constant dense<0.0> : tensor<4xf32>
  %tzeros = ds.constant dense<0.0> : tensor<4xf32>
  ds.store %zeros, @w.grad : tensor<4xf32>
  ds.store %tzeros, @t.grad : tensor<4xf32>
  ds.store %ones, @w.grad : tensor<4xf32>
  ds.store %zeros, @r.grad : tensor<4xf32>
  return
}

// -----

// A @micro_step_sync program means several micro-steps a step: unchanged.
ds.variable param @w : tensor<4xf32> init ones
ds.variable grad @w.grad of @w : tensor<4xf32> init zeros

// CHECK-LABEL: func.func @micro_step
// CHECK-NEXT:  ds.mul
// CHECK-NEXT:  ds.load @w.grad
// CHECK-NEXT:  ds.add
// CHECK-NEXT:  ds.store {{.*}} @w.grad {ds.grad_accumulation}
func.func @micro_step(%x: tensor<4xf32>) {
  %gw = ds.mul %x, %x : tensor<4xf32>, tensor<4xf32>
  %aw = ds.load @w.grad : tensor<4xf32>
  %sw = ds.add %aw, %gw : tensor<4xf32>, tensor<4xf32>
  ds.store %sw, @w.grad {ds.grad_accumulation} : tensor<4xf32>
  return
}
func.func @micro_step_sync(%x: tensor<4xf32>) {
  return
}
// CHECK-LABEL: func.func @apply
// CHECK-NEXT:  ds.constant
// CHECK-NEXT:  ds.store {{.*}} @w.grad
func.func @apply() {
  %zeros = ds.constant dense<0.0> : tensor<4xf32>
  ds.store %zeros, @w.grad : tensor<4xf32>
  return
}
