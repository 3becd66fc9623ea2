// RUN: ds-opt %s -ds-zero="world-size=4 stage=1" | FileCheck %s
// Stage 1: the parameters form flat groups (decayed, not decayed) padded to a
// multiple of the world size; each rank keeps Adam's moments for its slice,
// updates that slice and all-gathers the group, waiting at the end.

ds.variable param @w : tensor<3x5xf32> init normal std 2.000000e-02
ds.variable grad @w.grad of @w : tensor<3x5xf32> init zeros
ds.variable opt_state @w.exp_avg of @w : tensor<3x5xf32> init zeros
ds.variable opt_state @w.exp_avg_sq of @w : tensor<3x5xf32> init zeros
ds.variable param @b : tensor<5xf32> init zeros
ds.variable grad @b.grad of @b : tensor<5xf32> init zeros
ds.variable opt_state @b.exp_avg of @b : tensor<5xf32> init zeros
ds.variable opt_state @b.exp_avg_sq of @b : tensor<5xf32> init zeros

// CHECK-NOT: @w.exp_avg
// CHECK-NOT: @b.exp_avg

func.func @micro_step() {
  return
}

// CHECK-LABEL: func.func @apply
func.func @apply(%lr: tensor<f32>, %step: tensor<f32>) -> tensor<f32> {
  %one = ds.constant dense<1.0> : tensor<f32>
  %gw = ds.load @w.grad : tensor<3x5xf32>
  %gb = ds.load @b.grad : tensor<5xf32>
  // CHECK:      %[[G:.*]] = dist.flat_grads @zero.decay : tensor<16xf32>
  // CHECK-NEXT: %[[P:.*]] = dist.flat_params @zero.decay : tensor<16xf32>
  // CHECK-NEXT: %[[GS:.*]] = dist.shard %[[G]] ranks 4 : tensor<16xf32> -> tensor<4xf32>
  // CHECK-NEXT: %[[PS:.*]] = dist.shard %[[P]] ranks 4 : tensor<16xf32> -> tensor<4xf32>
  // CHECK-NEXT: %[[M:.*]] = ds.load @zero.decay.exp_avg : tensor<4xf32>
  // CHECK-NEXT: %[[V:.*]] = ds.load @zero.decay.exp_avg_sq : tensor<4xf32>
  // CHECK-NEXT: %[[NP:.*]], %[[NM:.*]], %[[NV:.*]] = ds.adamw %[[PS]], %[[GS]], %[[M]], %[[V]] {{.*}} weight_decay 1.000000e-01 : tensor<4xf32>, tensor<4xf32>
  // CHECK-NEXT: ds.store %[[NM]], @zero.decay.exp_avg
  // CHECK-NEXT: ds.store %[[NV]], @zero.decay.exp_avg_sq
  // CHECK-NEXT: %[[FULL:.*]] = dist.all_gather %[[NP]] ranks 4 : tensor<4xf32> -> tensor<16xf32>
  %w = ds.load @w : tensor<3x5xf32>
  %mw = ds.load @w.exp_avg : tensor<3x5xf32>
  %vw = ds.load @w.exp_avg_sq : tensor<3x5xf32>
  %pw, %mw2, %vw2 = ds.adamw %w, %gw, %mw, %vw lr %lr step %step scale %one betas(0.9, 0.95) eps 1.0e-8 weight_decay 0.1 : tensor<3x5xf32>, tensor<3x5xf32>
  ds.store %pw, @w : tensor<3x5xf32>
  ds.store %mw2, @w.exp_avg : tensor<3x5xf32>
  ds.store %vw2, @w.exp_avg_sq : tensor<3x5xf32>
  // CHECK: dist.shard {{.*}} ranks 4 : tensor<8xf32> -> tensor<2xf32>
  // CHECK: dist.all_gather {{.*}} ranks 4 : tensor<2xf32> -> tensor<8xf32>
  %b = ds.load @b : tensor<5xf32>
  %mb = ds.load @b.exp_avg : tensor<5xf32>
  %vb = ds.load @b.exp_avg_sq : tensor<5xf32>
  %pb, %mb2, %vb2 = ds.adamw %b, %gb, %mb, %vb lr %lr step %step scale %one betas(0.9, 0.95) eps 1.0e-8 weight_decay 0.0 : tensor<5xf32>, tensor<5xf32>
  ds.store %pb, @b : tensor<5xf32>
  ds.store %mb2, @b.exp_avg : tensor<5xf32>
  ds.store %vb2, @b.exp_avg_sq : tensor<5xf32>
  // CHECK:      %[[W1:.*]] = dist.wait %[[FULL]] : tensor<16xf32>
  // CHECK-NEXT: dist.store_params %[[W1]], @zero.decay : tensor<16xf32>
  // CHECK:      dist.store_params {{.*}}, @zero.no_decay : tensor<8xf32>
  // CHECK-NEXT: return
  return %one : tensor<f32>
}
// CHECK: dist.group @zero.decay [@w] size 16
// CHECK: ds.variable opt_state @zero.decay.exp_avg of @zero.decay : tensor<4xf32> init zeros
// CHECK: dist.group @zero.no_decay [@b] size 8
