// RUN: ds-opt %s -ds-zero="world-size=2 stage=2" | FileCheck %s
// Stage 2: a bucket's gradients (padded to a multiple of the world size) are
// reduce-scattered right after the last one; each rank accumulates only its
// slice. @apply takes the global norm from the slices (an all-reduce of
// sums of squares), updates its slice and all-gathers the parameters.

ds.variable param @w : tensor<3x1xf32> init normal std 2.000000e-02
ds.variable grad @w.grad of @w : tensor<3x1xf32> init zeros
ds.variable opt_state @w.exp_avg of @w : tensor<3x1xf32> init zeros
ds.variable opt_state @w.exp_avg_sq of @w : tensor<3x1xf32> init zeros

// CHECK-NOT: @w.grad
// CHECK-NOT: @w.exp_avg
// CHECK-LABEL: func.func @micro_step
func.func @micro_step(%x: tensor<3x1xf32>) -> tensor<f32> {
  // CHECK:      %[[G:.*]] = ds.exp
  // CHECK-NEXT: %[[F:.*]] = ds.reshape %[[G]] : tensor<3x1xf32> -> tensor<3xf32>
  // CHECK-NEXT: %[[PAD:.*]] = ds.constant dense<0.000000e+00> : tensor<1xf32>
  // CHECK-NEXT: %[[CAT:.*]] = ds.concat %[[F]], %[[PAD]] axis 0 : tensor<3xf32>, tensor<1xf32> -> tensor<4xf32>
  // CHECK-NEXT: %[[RS:.*]] = dist.reduce_scatter %[[CAT]] scale 1.000000e+00 ranks 2 : tensor<4xf32> -> tensor<2xf32>
  %g = ds.exp %x : tensor<3x1xf32>
  %l = ds.reduce_sum %x axes [0, 1] : tensor<3x1xf32> -> tensor<f32>
  %a = ds.load @w.grad : tensor<3x1xf32>
  %s = ds.add %a, %g : tensor<3x1xf32>, tensor<3x1xf32>
  ds.store %s, @w.grad {ds.grad_accumulation} : tensor<3x1xf32>
  // CHECK:      %[[D:.*]] = dist.wait %[[RS]] : tensor<2xf32>
  // CHECK-NEXT: %[[ACC:.*]] = ds.load @zero.bucket0.grad : tensor<2xf32>
  // CHECK-NEXT: %[[SUM:.*]] = ds.add %[[ACC]], %[[D]]
  // CHECK-NEXT: ds.store %[[SUM]], @zero.bucket0.grad
  // CHECK-NEXT: return
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @apply
func.func @apply(%lr: tensor<f32>, %step: tensor<f32>) -> tensor<f32> {
  %gw = ds.load @w.grad : tensor<3x1xf32>
  %sq = ds.mul %gw, %gw : tensor<3x1xf32>, tensor<3x1xf32>
  %t = ds.reduce_sum %sq axes [0, 1] : tensor<3x1xf32> -> tensor<f32>
  // CHECK:      %[[A:.*]] = ds.load @zero.bucket0.grad : tensor<2xf32>
  // CHECK-NEXT: %[[SQ:.*]] = ds.mul %[[A]], %[[A]]
  // CHECK-NEXT: %[[T:.*]] = ds.reduce_sum %[[SQ]] axes [0]
  // CHECK-NEXT: %[[AR:.*]] = dist.all_reduce %[[T]] scale 1.000000e+00 : tensor<f32>
  // CHECK-NEXT: %[[W:.*]] = dist.wait %[[AR]]
  // CHECK-NEXT: %[[N:.*]] = ds.sqrt %[[W]]
  %n = ds.sqrt %t {ds.global_grad_norm} : tensor<f32>
  %one = ds.constant dense<1.0> : tensor<f32>
  // CHECK:      %[[P:.*]] = dist.flat_params @zero.bucket0 : tensor<4xf32>
  // CHECK-NEXT: %[[PS:.*]] = dist.shard %[[P]] ranks 2 : tensor<4xf32> -> tensor<2xf32>
  // CHECK-NEXT: %[[GS:.*]] = ds.load @zero.bucket0.grad : tensor<2xf32>
  // CHECK:      %[[NP:.*]], %{{.*}}, %{{.*}} = ds.adamw %[[PS]], %[[GS]]
  // CHECK:      %[[FULL:.*]] = dist.all_gather %[[NP]] ranks 2 : tensor<2xf32> -> tensor<4xf32>
  // CHECK-NEXT: %[[Z:.*]] = ds.constant dense<0.000000e+00> : tensor<2xf32>
  // CHECK-NEXT: ds.store %[[Z]], @zero.bucket0.grad
  %w = ds.load @w : tensor<3x1xf32>
  %m = ds.load @w.exp_avg : tensor<3x1xf32>
  %v = ds.load @w.exp_avg_sq : tensor<3x1xf32>
  %p2, %m2, %v2 = ds.adamw %w, %gw, %m, %v lr %lr step %step scale %one betas(0.9, 0.95) eps 1.0e-8 weight_decay 0.1 : tensor<3x1xf32>, tensor<3x1xf32>
  ds.store %p2, @w : tensor<3x1xf32>
  ds.store %m2, @w.exp_avg : tensor<3x1xf32>
  ds.store %v2, @w.exp_avg_sq : tensor<3x1xf32>
  %z = ds.constant dense<0.0> : tensor<3x1xf32>
  ds.store %z, @w.grad : tensor<3x1xf32>
  // CHECK:      %[[DONE:.*]] = dist.wait %[[FULL]] : tensor<4xf32>
  // CHECK-NEXT: dist.store_params %[[DONE]], @zero.bucket0 : tensor<4xf32>
  // CHECK-NEXT: return %[[N]]
  return %n : tensor<f32>
}
// CHECK: dist.group @zero.bucket0 [@w] size 4
// CHECK-NEXT: ds.variable grad @zero.bucket0.grad of @zero.bucket0 : tensor<2xf32> init zeros
