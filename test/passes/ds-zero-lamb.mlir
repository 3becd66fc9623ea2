// RUN: ds-opt %s -ds-zero="world-size=4 stage=1" | FileCheck %s
// A sharded Lamb (stage 1; stages 2-3 build the same update per bucket):
// this rank's part of each member's norms (ds.lamb_norms over the shard,
// the members' element counts in group order), summed over the ranks and
// waited for at once, then ds.lamb over the shard with those norms, so
// each element takes its whole parameter's trust ratio.

ds.variable param @w : tensor<3x5xf32> init normal std 2.000000e-02
ds.variable grad @w.grad of @w : tensor<3x5xf32> init zeros
ds.variable opt_state @w.exp_avg of @w : tensor<3x5xf32> init zeros
ds.variable opt_state @w.exp_avg_sq of @w : tensor<3x5xf32> init zeros
ds.variable param @u : tensor<1x7xf32> init normal std 2.000000e-02
ds.variable grad @u.grad of @u : tensor<1x7xf32> init zeros
ds.variable opt_state @u.exp_avg of @u : tensor<1x7xf32> init zeros
ds.variable opt_state @u.exp_avg_sq of @u : tensor<1x7xf32> init zeros

func.func @micro_step() {
  return
}

// CHECK-LABEL: func.func @apply
func.func @apply(%lr: tensor<f32>, %step: tensor<f32>) -> tensor<f32> {
  %one = ds.constant dense<1.0> : tensor<f32>
  // CHECK:      %[[GS:.*]] = dist.shard %{{.*}} ranks 4 : tensor<24xf32> -> tensor<6xf32>
  // CHECK-NEXT: %[[PS:.*]] = dist.shard %{{.*}} ranks 4 : tensor<24xf32> -> tensor<6xf32>
  // CHECK-NEXT: %[[M:.*]] = ds.load @zero.decay.exp_avg : tensor<6xf32>
  // CHECK-NEXT: %[[V:.*]] = ds.load @zero.decay.exp_avg_sq : tensor<6xf32>
  // CHECK-NEXT: %[[PART:.*]] = ds.lamb_norms %[[PS]], %[[GS]], %[[M]], %[[V]] scale %{{.*}} betas(9.000000e-01, 0.99899999999999999) eps 1.000000e-08 weight_decay 1.000000e-02 members [15, 7] {eps_inside_sqrt = true} : tensor<6xf32>, tensor<6xf32> -> tensor<4xf32>
  // CHECK-NEXT: %[[SUM:.*]] = dist.all_reduce %[[PART]] scale 1.000000e+00 : tensor<4xf32>
  // CHECK-NEXT: %[[NORMS:.*]] = dist.wait %[[SUM]] : tensor<4xf32>
  // CHECK-NEXT: %[[NP:.*]], %[[NM:.*]], %[[NV:.*]] = ds.lamb %[[PS]], %[[GS]], %[[M]], %[[V]] lr %{{.*}} step %{{.*}} scale %{{.*}} norms %[[NORMS]] members [15, 7] : tensor<4xf32> betas(9.000000e-01, 0.99899999999999999) eps 1.000000e-08 weight_decay 1.000000e-02 coeff(5.000000e-02, 5.000000e+00) {bias_correction = false, eps_inside_sqrt = true} : tensor<6xf32>, tensor<6xf32>
  // CHECK-NEXT: ds.store %[[NM]], @zero.decay.exp_avg
  // CHECK-NEXT: ds.store %[[NV]], @zero.decay.exp_avg_sq
  // CHECK-NEXT: dist.all_gather %[[NP]] ranks 4 : tensor<6xf32> -> tensor<24xf32>
  %gw = ds.load @w.grad : tensor<3x5xf32>
  %w = ds.load @w : tensor<3x5xf32>
  %mw = ds.load @w.exp_avg : tensor<3x5xf32>
  %vw = ds.load @w.exp_avg_sq : tensor<3x5xf32>
  %pw, %mw2, %vw2 = ds.lamb %w, %gw, %mw, %vw lr %lr step %step scale %one betas(0.9, 0.999) eps 1.0e-8 weight_decay 0.01 coeff(0.05, 5.0) {bias_correction = false, eps_inside_sqrt = true} : tensor<3x5xf32>, tensor<3x5xf32>
  ds.store %pw, @w : tensor<3x5xf32>
  ds.store %mw2, @w.exp_avg : tensor<3x5xf32>
  ds.store %vw2, @w.exp_avg_sq : tensor<3x5xf32>
  %gu = ds.load @u.grad : tensor<1x7xf32>
  %u = ds.load @u : tensor<1x7xf32>
  %mu = ds.load @u.exp_avg : tensor<1x7xf32>
  %vu = ds.load @u.exp_avg_sq : tensor<1x7xf32>
  %pu, %mu2, %vu2 = ds.lamb %u, %gu, %mu, %vu lr %lr step %step scale %one betas(0.9, 0.999) eps 1.0e-8 weight_decay 0.01 coeff(0.05, 5.0) {bias_correction = false, eps_inside_sqrt = true} : tensor<1x7xf32>, tensor<1x7xf32>
  ds.store %pu, @u : tensor<1x7xf32>
  ds.store %mu2, @u.exp_avg : tensor<1x7xf32>
  ds.store %vu2, @u.exp_avg_sq : tensor<1x7xf32>
  // CHECK-NOT: ds.lamb
  // CHECK: return
  return %one : tensor<f32>
}
// CHECK: dist.group @zero.decay [@w, @u] size 24
