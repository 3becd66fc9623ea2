// RUN: ds-opt %s -ds-zero="world-size=2 stage=2" | FileCheck %s
// Stage 2 on a pipeline stage (stage 1 of 2, after ds-pipeline-split):
// its step accumulates each gradient once per micro-batch, and each
// micro-batch's gradients are reduce-scattered into the shard
// accumulators. @e is tied (held by stages 0 and 1, whose @apply sum its
// gradient first): it gets a group of its own, whose shard is summed over
// the two stages in place of the whole gradient; its norm term is stage
// 0's, so this stage's sum of squares leaves it out, and the data group's
// sum is then summed over the stages.

module attributes {dist.pipeline_stages = 2 : i64, dist.stage = 1 : i64} {
  ds.variable param @e : tensor<3xf32> init normal std 2.000000e-02
  ds.variable grad @e.grad of @e : tensor<3xf32> init zeros
  ds.variable opt_state @e.exp_avg of @e : tensor<3xf32> init zeros
  ds.variable opt_state @e.exp_avg_sq of @e : tensor<3xf32> init zeros
  ds.variable param @w : tensor<4xf32> init normal std 2.000000e-02
  ds.variable grad @w.grad of @w : tensor<4xf32> init zeros
  ds.variable opt_state @w.exp_avg of @w : tensor<4xf32> init zeros
  ds.variable opt_state @w.exp_avg_sq of @w : tensor<4xf32> init zeros

  // CHECK-LABEL: func.func @micro_step
  func.func @micro_step(%x: tensor<4xf32>, %y: tensor<3xf32>) -> tensor<f32> {
    // Micro-batch 0: each gradient reduce-scattered once it is complete.
    // CHECK:      %[[W0:.*]] = ds.exp %arg0
    // CHECK-NEXT: %[[V0:.*]] = ds.reshape %[[W0]]
    // CHECK-NEXT: %[[RW0:.*]] = dist.reduce_scatter %[[V0]] scale 1.000000e+00 ranks 2 : tensor<4xf32> -> tensor<2xf32>
    // CHECK-NEXT: %[[E0:.*]] = ds.neg %arg1
    // CHECK-NEXT: %[[U0:.*]] = ds.reshape %[[E0]]
    // CHECK-NEXT: %[[F0:.*]] = ds.constant dense<0.000000e+00> : tensor<1xf32>
    // CHECK-NEXT: %[[C0:.*]] = ds.concat %[[U0]], %[[F0]]
    // CHECK-NEXT: %[[RE0:.*]] = dist.reduce_scatter %[[C0]] scale 1.000000e+00 ranks 2 : tensor<4xf32> -> tensor<2xf32>
    %w0 = ds.exp %x : tensor<4xf32>
    %aw0 = ds.load @w.grad : tensor<4xf32>
    %sw0 = ds.add %aw0, %w0 : tensor<4xf32>, tensor<4xf32>
    ds.store %sw0, @w.grad {ds.grad_accumulation} : tensor<4xf32>
    %e0 = ds.neg %y : tensor<3xf32>
    %ae0 = ds.load @e.grad : tensor<3xf32>
    %se0 = ds.add %ae0, %e0 : tensor<3xf32>, tensor<3xf32>
    ds.store %se0, @e.grad {ds.grad_accumulation} : tensor<3xf32>
    // CHECK-NEXT: %[[D0:.*]] = dist.wait %[[RW0]]
    // CHECK-NEXT: %[[A0:.*]] = ds.load @zero.bucket0.grad : tensor<2xf32>
    // CHECK-NEXT: %[[S0:.*]] = ds.add %[[A0]], %[[D0]]
    // CHECK-NEXT: ds.store %[[S0]], @zero.bucket0.grad {ds.grad_accumulation}

    // Micro-batch 1: the same groups, the same order of their members.
    // CHECK-NEXT: %[[W1:.*]] = ds.sqrt %arg0
    // CHECK-NEXT: %[[V1:.*]] = ds.reshape %[[W1]]
    // CHECK-NEXT: %[[RW1:.*]] = dist.reduce_scatter %[[V1]]
    // CHECK-NEXT: dist.wait %[[RE0]]
    // CHECK:      ds.store %{{.*}}, @zero.bucket1.grad {ds.grad_accumulation}
    // CHECK-NEXT: %[[E1:.*]] = ds.tanh %arg1
    // CHECK-NEXT: %[[U1:.*]] = ds.reshape %[[E1]]
    // CHECK-NEXT: %[[F1:.*]] = ds.constant dense<0.000000e+00> : tensor<1xf32>
    // CHECK-NEXT: %[[C1:.*]] = ds.concat %[[U1]], %[[F1]]
    // CHECK-NEXT: %[[RE1:.*]] = dist.reduce_scatter %[[C1]]
    %w1 = ds.sqrt %x : tensor<4xf32>
    %aw1 = ds.load @w.grad : tensor<4xf32>
    %sw1 = ds.add %aw1, %w1 : tensor<4xf32>, tensor<4xf32>
    ds.store %sw1, @w.grad {ds.grad_accumulation} : tensor<4xf32>
    %e1 = ds.tanh %y : tensor<3xf32>
    %ae1 = ds.load @e.grad : tensor<3xf32>
    %se1 = ds.add %ae1, %e1 : tensor<3xf32>, tensor<3xf32>
    ds.store %se1, @e.grad {ds.grad_accumulation} : tensor<3xf32>
    // Four accumulations into the shards, one per group and micro-batch.
    // CHECK-NEXT: dist.wait %[[RW1]]
    // CHECK:      ds.store %{{.*}}, @zero.bucket0.grad {ds.grad_accumulation}
    // CHECK:      dist.wait %[[RE1]]
    // CHECK:      ds.store %{{.*}}, @zero.bucket1.grad {ds.grad_accumulation}
    // CHECK-NOT: ds.grad_accumulation
    // CHECK:     return
    %l = ds.reduce_sum %x axes [0] : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }

  // CHECK-LABEL: func.func @apply
  func.func @apply(%lr: tensor<f32>, %step: tensor<f32>) -> tensor<f32> {
    // The tied shard summed over stages 0 and 1 (bits 0b11).
    // CHECK-NEXT: %[[T:.*]] = ds.load @zero.bucket1.grad : tensor<2xf32>
    // CHECK-NEXT: %[[TS:.*]] = dist.all_reduce %[[T]] scale 1.000000e+00 {dist.pipeline_group = 3 : i64} : tensor<2xf32>
    // CHECK-NEXT: %[[TW:.*]] = dist.wait %[[TS]]
    // CHECK-NEXT: ds.store %[[TW]], @zero.bucket1.grad
    %ge = ds.load @e.grad : tensor<3xf32>
    %ges = dist.all_reduce %ge scale 1.0 {dist.pipeline_group = 3 : i64} : tensor<3xf32>
    %gew = dist.wait %ges : tensor<3xf32>
    ds.store %gew, @e.grad : tensor<3xf32>
    // The norm: @w's shard alone, over the data group, then the stages.
    // CHECK-NEXT: %[[A:.*]] = ds.load @zero.bucket0.grad : tensor<2xf32>
    // CHECK-NEXT: %[[SQ:.*]] = ds.mul %[[A]], %[[A]]
    // CHECK-NEXT: %[[P:.*]] = ds.reduce_sum %[[SQ]] axes [0]
    // CHECK-NEXT: %[[R:.*]] = dist.all_reduce %[[P]] scale 1.000000e+00 : tensor<f32>
    // CHECK-NEXT: %[[RW:.*]] = dist.wait %[[R]]
    // CHECK-NEXT: %[[S:.*]] = dist.all_reduce %[[RW]] scale 1.000000e+00 {dist.pipeline_group = 3 : i64} : tensor<f32>
    // CHECK-NEXT: %[[SW:.*]] = dist.wait %[[S]]
    // CHECK-NEXT: %[[N:.*]] = ds.sqrt %[[SW]]
    %gw = ds.load @w.grad : tensor<4xf32>
    %sq = ds.mul %gw, %gw : tensor<4xf32>, tensor<4xf32>
    %part = ds.reduce_sum %sq axes [0] : tensor<4xf32> -> tensor<f32>
    %all = dist.all_reduce %part scale 1.0 {dist.pipeline_group = 3 : i64} : tensor<f32>
    %allw = dist.wait %all : tensor<f32>
    %n = ds.sqrt %allw {ds.global_grad_norm} : tensor<f32>
    %one = ds.constant dense<1.0> : tensor<f32>
    // CHECK-COUNT-2: ds.adamw
    // CHECK-NOT: @e.grad
    // CHECK-NOT: @w.grad
    // CHECK: return %[[N]]
    %e = ds.load @e : tensor<3xf32>
    %me = ds.load @e.exp_avg : tensor<3xf32>
    %ve = ds.load @e.exp_avg_sq : tensor<3xf32>
    %e2, %me2, %ve2 = ds.adamw %e, %gew, %me, %ve lr %lr step %step scale %one betas(0.9, 0.95) eps 1.0e-8 weight_decay 0.1 : tensor<3xf32>, tensor<3xf32>
    ds.store %e2, @e : tensor<3xf32>
    ds.store %me2, @e.exp_avg : tensor<3xf32>
    ds.store %ve2, @e.exp_avg_sq : tensor<3xf32>
    %w = ds.load @w : tensor<4xf32>
    %mw = ds.load @w.exp_avg : tensor<4xf32>
    %vw = ds.load @w.exp_avg_sq : tensor<4xf32>
    %w2, %mw2, %vw2 = ds.adamw %w, %gw, %mw, %vw lr %lr step %step scale %one betas(0.9, 0.95) eps 1.0e-8 weight_decay 0.1 : tensor<4xf32>, tensor<4xf32>
    ds.store %w2, @w : tensor<4xf32>
    ds.store %mw2, @w.exp_avg : tensor<4xf32>
    ds.store %vw2, @w.exp_avg_sq : tensor<4xf32>
    %z3 = ds.constant dense<0.0> : tensor<3xf32>
    ds.store %z3, @e.grad : tensor<3xf32>
    %z4 = ds.constant dense<0.0> : tensor<4xf32>
    ds.store %z4, @w.grad : tensor<4xf32>
    return %n : tensor<f32>
  }
  // The tied parameter's group comes after the others, alone.
  // CHECK: dist.group @zero.bucket0 [@w] size 4
  // CHECK: dist.group @zero.bucket1 [@e] size 4
}
