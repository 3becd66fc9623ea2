// RUN: ds-opt %s -split-input-file -ds-zero="world-size=2 bucket-size=20" -verify-diagnostics | FileCheck %s
// RUN: ds-opt %s -split-input-file -ds-zero="world-size=2 bucket-size=20 accumulation-steps=2" -verify-diagnostics | FileCheck %s --check-prefix=SYNC
// Stage 0: gradients bucketed in completion order (here @c, then @a, then
// @b: 16 + 4 elements fill the first bucket of 20), each bucket averaged
// over the ranks right after its last gradient exists, and accumulated
// after a wait once the next bucket's all-reduce has started.

ds.variable param @a : tensor<4xf32> init ones
ds.variable grad @a.grad of @a : tensor<4xf32> init zeros
ds.variable param @b : tensor<2x3xf32> init ones
ds.variable grad @b.grad of @b : tensor<2x3xf32> init zeros
ds.variable param @c : tensor<16xf32> init ones
ds.variable grad @c.grad of @c : tensor<16xf32> init zeros

// CHECK: module attributes {dist.world_size = 2 : i64}
// CHECK-LABEL: func.func @micro_step
func.func @micro_step(%x: tensor<4xf32>, %y: tensor<2x3xf32>, %z: tensor<16xf32>) -> tensor<f32> {
  // CHECK:      %[[GC:.*]] = ds.exp %{{.*}} : tensor<16xf32>
  %gc = ds.exp %z : tensor<16xf32>
  // CHECK-NEXT: %[[GA:.*]] = ds.neg %{{.*}} : tensor<4xf32>
  %ga = ds.neg %x : tensor<4xf32>
  // The first bucket (@c, @a) starts as soon as @a's gradient exists.
  // CHECK-NEXT: %[[FC:.*]] = ds.reshape %[[GC]] : tensor<16xf32> -> tensor<16xf32>
  // CHECK-NEXT: %[[FA:.*]] = ds.reshape %[[GA]] : tensor<4xf32> -> tensor<4xf32>
  // CHECK-NEXT: %[[CAT:.*]] = ds.concat %[[FC]], %[[FA]] axis 0 : tensor<16xf32>, tensor<4xf32> -> tensor<20xf32>
  // CHECK-NEXT: %[[R1:.*]] = dist.all_reduce %[[CAT]] scale 1.000000e+00 : tensor<20xf32>
  // CHECK-NEXT: %[[GB:.*]] = ds.tanh %{{.*}} : tensor<2x3xf32>
  %gb = ds.tanh %y : tensor<2x3xf32>
  // CHECK-NEXT: %[[FB:.*]] = ds.reshape %[[GB]] : tensor<2x3xf32> -> tensor<6xf32>
  // CHECK-NEXT: %[[R2:.*]] = dist.all_reduce %[[FB]] scale 1.000000e+00 : tensor<6xf32>
  // The first bucket is waited for, and accumulated, once the second has
  // started: the comm stream always has the next bucket queued, and at most
  // two buckets' results are live.
  // CHECK-NEXT: %[[W1:.*]] = dist.wait %[[R1]] : tensor<20xf32>
  // CHECK-NEXT: %[[P:.*]]:2 = ds.split %[[W1]] axis 0 sizes [16, 4]
  // CHECK-NEXT: %[[DC:.*]] = ds.reshape %[[P]]#0 : tensor<16xf32> -> tensor<16xf32>
  // CHECK-NEXT: %[[LC:.*]] = ds.load @c.grad
  // CHECK-NEXT: %[[SC:.*]] = ds.add %[[LC]], %[[DC]]
  // CHECK-NEXT: ds.store %[[SC]], @c.grad
  // CHECK-NEXT: %[[DA:.*]] = ds.reshape %[[P]]#1 : tensor<4xf32> -> tensor<4xf32>
  // CHECK-NEXT: %[[LA:.*]] = ds.load @a.grad
  // CHECK-NEXT: %[[SA:.*]] = ds.add %[[LA]], %[[DA]]
  // CHECK-NEXT: ds.store %[[SA]], @a.grad
  // CHECK-NEXT: %[[L:.*]] = ds.reduce_sum
  %l = ds.reduce_sum %z axes [0] : tensor<16xf32> -> tensor<f32>
  %aa = ds.load @a.grad : tensor<4xf32>
  %sa = ds.add %aa, %ga : tensor<4xf32>, tensor<4xf32>
  ds.store %sa, @a.grad {ds.grad_accumulation} : tensor<4xf32>
  %ab = ds.load @b.grad : tensor<2x3xf32>
  %sb = ds.add %ab, %gb : tensor<2x3xf32>, tensor<2x3xf32>
  ds.store %sb, @b.grad {ds.grad_accumulation} : tensor<2x3xf32>
  %ac = ds.load @c.grad : tensor<16xf32>
  %sc = ds.add %ac, %gc : tensor<16xf32>, tensor<16xf32>
  ds.store %sc, @c.grad {ds.grad_accumulation} : tensor<16xf32>
  // The last bucket is waited for at the end.
  // CHECK-NEXT: %[[W2:.*]] = dist.wait %[[R2]] : tensor<6xf32>
  // CHECK-NEXT: %[[DB:.*]] = ds.reshape %[[W2]] : tensor<6xf32> -> tensor<2x3xf32>
  // CHECK-NEXT: %[[LB:.*]] = ds.load @b.grad
  // CHECK-NEXT: %[[SB:.*]] = ds.add %[[LB]], %[[DB]]
  // CHECK-NEXT: ds.store %[[SB]], @b.grad
  // CHECK-NEXT: return %[[L]]
  return %l : tensor<f32>
}

// With accumulation, @micro_step only accumulates, as on one rank, and
// @micro_step_sync (the window's last micro-step) reduces the accumulated
// sums acc + d, bucket by bucket, and stores them.
// SYNC-LABEL: func.func @micro_step(
// SYNC-NOT:   dist.
// SYNC-LABEL: func.func @micro_step_sync(
// SYNC:       %[[GC:.*]] = ds.exp
// SYNC-NEXT:  %[[GA:.*]] = ds.neg
// SYNC-NEXT:  %[[LC:.*]] = ds.load @c.grad
// SYNC-NEXT:  %[[SC:.*]] = ds.add %[[LC]], %[[GC]]
// SYNC-NEXT:  %[[FC:.*]] = ds.reshape %[[SC]]
// SYNC-NEXT:  %[[LA:.*]] = ds.load @a.grad
// SYNC-NEXT:  %[[SA:.*]] = ds.add %[[LA]], %[[GA]]
// SYNC-NEXT:  %[[FA:.*]] = ds.reshape %[[SA]]
// SYNC-NEXT:  %[[CAT:.*]] = ds.concat %[[FC]], %[[FA]] axis 0
// SYNC-NEXT:  %[[R1:.*]] = dist.all_reduce %[[CAT]] scale 1.000000e+00 : tensor<20xf32>
// SYNC-NEXT:  %[[GB:.*]] = ds.tanh
// SYNC-NEXT:  %[[LB:.*]] = ds.load @b.grad
// SYNC-NEXT:  %[[SB:.*]] = ds.add %[[LB]], %[[GB]]
// SYNC-NEXT:  %[[FB:.*]] = ds.reshape %[[SB]]
// SYNC-NEXT:  %[[R2:.*]] = dist.all_reduce %[[FB]] scale 1.000000e+00 : tensor<6xf32>
// SYNC-NEXT:  %[[W1:.*]] = dist.wait %[[R1]]
// SYNC-NEXT:  %[[P:.*]]:2 = ds.split %[[W1]] axis 0 sizes [16, 4]
// SYNC-NEXT:  %[[DC:.*]] = ds.reshape %[[P]]#0
// SYNC-NEXT:  ds.store %[[DC]], @c.grad
// SYNC-NEXT:  %[[DA:.*]] = ds.reshape %[[P]]#1
// SYNC-NEXT:  ds.store %[[DA]], @a.grad
// SYNC-NEXT:  ds.reduce_sum
// SYNC-NEXT:  %[[W2:.*]] = dist.wait %[[R2]]
// SYNC-NEXT:  %[[DB:.*]] = ds.reshape %[[W2]]
// SYNC-NEXT:  ds.store %[[DB]], @b.grad
// SYNC-NEXT:  return

// -----

// expected-error @+1 {{ds-zero: no @micro_step; run ds-autodiff first}}
module {
}
