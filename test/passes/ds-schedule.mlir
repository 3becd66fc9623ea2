// RUN: ds-opt %s -ds-schedule | FileCheck %s
// A gradient accumulation moves up to the op that completes the gradient,
// so the gradient's buffer dies there.

ds.variable param @w : tensor<4xf32> init ones
ds.variable grad @w.grad of @w : tensor<4xf32> init zeros
ds.variable param @v : tensor<4xf32> init ones
ds.variable grad @v.grad of @v : tensor<4xf32> init zeros

// CHECK-LABEL: func.func @micro_step
// CHECK:      %[[GW:.*]] = ds.mul %arg0, %arg0
// CHECK-NEXT: %[[AW:.*]] = ds.load @w.grad
// CHECK-NEXT: %[[SW:.*]] = ds.add %[[AW]], %[[GW]]
// CHECK-NEXT: ds.store %[[SW]], @w.grad
// CHECK-NEXT: %[[GV:.*]] = ds.exp %arg0
// CHECK-NEXT: %[[AV:.*]] = ds.load @v.grad
// CHECK-NEXT: %[[SV:.*]] = ds.add %[[AV]], %[[GV]]
// CHECK-NEXT: ds.store %[[SV]], @v.grad
// CHECK-NEXT: return
func.func @micro_step(%x: tensor<4xf32>) {
  %gw = ds.mul %x, %x : tensor<4xf32>, tensor<4xf32>
  %gv = ds.exp %x : tensor<4xf32>
  %aw = ds.load @w.grad : tensor<4xf32>
  %sw = ds.add %aw, %gw : tensor<4xf32>, tensor<4xf32>
  ds.store %sw, @w.grad : tensor<4xf32>
  %av = ds.load @v.grad : tensor<4xf32>
  %sv = ds.add %av, %gv : tensor<4xf32>, tensor<4xf32>
  ds.store %sv, @v.grad : tensor<4xf32>
  return
}
