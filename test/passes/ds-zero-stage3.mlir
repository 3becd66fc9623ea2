// RUN: ds-opt %s -ds-zero="world-size=4 stage=3 bucket-size=6 persistence-threshold=4" | FileCheck %s
// RUN: ds-opt %s -ds-zero="world-size=4 stage=3 bucket-size=6 persistence-threshold=4 max-live-parameters=8" | FileCheck %s --check-prefix=NOPREFETCH
// RUN: ds-opt %s -ds-zero="world-size=4 stage=3 bucket-size=6 persistence-threshold=4 prefetch-bucket-size=7" | FileCheck %s --check-prefix=NOPREFETCH
// RUN: ds-opt %s -ds-zero="world-size=4 stage=3 bucket-size=6 persistence-threshold=7" | FileCheck %s --check-prefix=PERSIST
// Stage 3: @w1 and @w2 (6 elements, one bucket each) are stored as shards
// of 2 (8 with padding, over 4 ranks); @b (3 elements, under the
// persistence threshold of 4) stays whole as at stage 2. A group is
// gathered for each window of uses: @w1 in the forward (%h) and again for
// the backward (%dx), since @w2 is used in between; @w2 once, for %y and
// %dh. Each gather is issued where the previous window starts, its wait
// sits just before the window's first use, and the gradients are
// reduce-scattered right after the last one, as at stage 2.

ds.variable param @w1 : tensor<2x3xf32> init normal std 2.000000e-02
ds.variable grad @w1.grad of @w1 : tensor<2x3xf32> init zeros
ds.variable opt_state @w1.exp_avg of @w1 : tensor<2x3xf32> init zeros
ds.variable opt_state @w1.exp_avg_sq of @w1 : tensor<2x3xf32> init zeros
ds.variable param @w2 : tensor<2x3xf32> init normal std 2.000000e-02
ds.variable grad @w2.grad of @w2 : tensor<2x3xf32> init zeros
ds.variable opt_state @w2.exp_avg of @w2 : tensor<2x3xf32> init zeros
ds.variable opt_state @w2.exp_avg_sq of @w2 : tensor<2x3xf32> init zeros
ds.variable param @b : tensor<3xf32> init zeros
ds.variable grad @b.grad of @b : tensor<3xf32> init zeros
ds.variable opt_state @b.exp_avg of @b : tensor<3xf32> init zeros
ds.variable opt_state @b.exp_avg_sq of @b : tensor<3xf32> init zeros

// CHECK-LABEL: func.func @micro_step
// The forward window of @w1: gathered where it is first needed.
// CHECK:      %[[S1:.*]] = ds.load @zero.bucket0.param : tensor<2xf32>
// CHECK-NEXT: %[[G1:.*]] = dist.all_gather %[[S1]] ranks 4 : tensor<2xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[F1:.*]] = dist.wait %[[G1]] : tensor<8xf32>
// CHECK-NEXT: %[[M1:.*]] = ds.slice %[[F1]] offsets [0] sizes [6] : tensor<8xf32> -> tensor<6xf32>
// CHECK-NEXT: %[[W1:.*]] = ds.reshape %[[M1]] : tensor<6xf32> -> tensor<2x3xf32>
// @w2 is prefetched before the first compute of @w1's window...
// CHECK-NEXT: %[[S2:.*]] = ds.load @zero.bucket1.param : tensor<2xf32>
// CHECK-NEXT: %[[G2:.*]] = dist.all_gather %[[S2]] ranks 4
// CHECK-NEXT: %[[H:.*]] = ds.mul %arg0, %[[W1]]
// ...and waited for just before its own first use.
// CHECK-NEXT: %[[F2:.*]] = dist.wait %[[G2]]
// CHECK-NEXT: %[[M2:.*]] = ds.slice %[[F2]] offsets [0] sizes [6]
// CHECK-NEXT: %[[W2:.*]] = ds.reshape %[[M2]] : tensor<6xf32> -> tensor<2x3xf32>
// @w1's backward window is prefetched as @w2's starts.
// CHECK-NEXT: %[[S3:.*]] = ds.load @zero.bucket0.param : tensor<2xf32>
// CHECK-NEXT: %[[G3:.*]] = dist.all_gather %[[S3]] ranks 4
// CHECK-NEXT: %[[Y:.*]] = ds.mul %[[H]], %[[W2]]
// CHECK-NEXT: %[[L:.*]] = ds.reduce_sum %[[Y]]
// CHECK-NEXT: %[[DH:.*]] = ds.mul %[[W2]], %arg0
// CHECK-NEXT: %[[DW1:.*]] = ds.mul %[[DH]], %arg0
// CHECK-NEXT: %[[R1:.*]] = ds.reshape %[[DW1]] : tensor<2x3xf32> -> tensor<6xf32>
// CHECK-NEXT: %[[PAD:.*]] = ds.constant dense<0.000000e+00> : tensor<2xf32>
// CHECK-NEXT: %[[C1:.*]] = ds.concat %[[R1]], %[[PAD]] axis 0
// CHECK-NEXT: %[[RS1:.*]] = dist.reduce_scatter %[[C1]] scale 1.000000e+00 ranks 4 : tensor<8xf32> -> tensor<2xf32>
// CHECK-NEXT: %[[F3:.*]] = dist.wait %[[G3]]
// CHECK-NEXT: %[[M3:.*]] = ds.slice %[[F3]] offsets [0] sizes [6]
// CHECK-NEXT: %[[W1B:.*]] = ds.reshape %[[M3]]
// CHECK-NEXT: ds.mul %[[DH]], %[[W1B]]
// The persistent @b is never gathered in the micro-step.
// CHECK-NOT:  dist.all_gather
// CHECK:      dist.wait %[[RS1]]
// CHECK:      return %[[L]]

// NOPREFETCH-LABEL: func.func @micro_step
// NOPREFETCH:      dist.all_gather
// NOPREFETCH-NEXT: dist.wait
// NOPREFETCH-NEXT: ds.slice
// NOPREFETCH-NEXT: ds.reshape
// NOPREFETCH-NEXT: ds.mul %arg0
// NOPREFETCH-NEXT: ds.load @zero.bucket1.param
// NOPREFETCH-NEXT: dist.all_gather
// NOPREFETCH-NEXT: dist.wait
// NOPREFETCH:      ds.load @zero.bucket0.param
// NOPREFETCH-NEXT: dist.all_gather
// NOPREFETCH-NEXT: dist.wait

// @apply updates each shard in place and gathers only the persistent group.
// CHECK-LABEL: func.func @apply
// CHECK:      %[[P1:.*]] = ds.load @zero.bucket0.param : tensor<2xf32>
// CHECK-NEXT: %[[G1A:.*]] = ds.load @zero.bucket0.grad : tensor<2xf32>
// CHECK:      %[[NP1:.*]], %[[NM1:.*]], %[[NV1:.*]] = ds.adamw %[[P1]], %[[G1A]]
// CHECK:      ds.store %[[NP1]], @zero.bucket0.param : tensor<2xf32>
// CHECK:      ds.load @zero.bucket1.param
// CHECK:      dist.flat_params @zero.bucket2 : tensor<4xf32>
// CHECK:      %[[FULL:.*]] = dist.all_gather %{{.*}} ranks 4 : tensor<1xf32> -> tensor<4xf32>
// CHECK:      dist.store_params %{{.*}}, @zero.bucket2 : tensor<4xf32>
// CHECK-NEXT: return

// The checkpoint variables stay; the shards are each group's only copy.
// CHECK:      dist.group @zero.bucket0 [@w1] size 8 sharded
// CHECK:      ds.variable param @zero.bucket0.param of @zero.bucket0 : tensor<2xf32> init zeros
// CHECK:      dist.group @zero.bucket1 [@w2] size 8 sharded
// CHECK:      dist.group @zero.bucket2 [@b] size 4{{$}}
// CHECK-NOT:  @zero.bucket2.param

// With a threshold of 7 every parameter stays whole: stage 2.
// PERSIST-NOT: sharded
// PERSIST-NOT: .param
// PERSIST:     dist.group @zero.bucket0 [@w1] size 8{{$}}

func.func @micro_step(%x: tensor<2x3xf32>) -> tensor<f32> {
  %w1 = ds.load @w1 : tensor<2x3xf32>
  %w2 = ds.load @w2 : tensor<2x3xf32>
  %h = ds.mul %x, %w1 : tensor<2x3xf32>, tensor<2x3xf32>
  %y = ds.mul %h, %w2 : tensor<2x3xf32>, tensor<2x3xf32>
  %l = ds.reduce_sum %y axes [0, 1] : tensor<2x3xf32> -> tensor<f32>
  %dh = ds.mul %w2, %x : tensor<2x3xf32>, tensor<2x3xf32>
  %dw1 = ds.mul %dh, %x : tensor<2x3xf32>, tensor<2x3xf32>
  %a1 = ds.load @w1.grad : tensor<2x3xf32>
  %s1 = ds.add %a1, %dw1 : tensor<2x3xf32>, tensor<2x3xf32>
  ds.store %s1, @w1.grad {ds.grad_accumulation} : tensor<2x3xf32>
  %dx = ds.mul %dh, %w1 : tensor<2x3xf32>, tensor<2x3xf32>
  %dw2 = ds.mul %h, %x : tensor<2x3xf32>, tensor<2x3xf32>
  %a2 = ds.load @w2.grad : tensor<2x3xf32>
  %s2 = ds.add %a2, %dw2 : tensor<2x3xf32>, tensor<2x3xf32>
  ds.store %s2, @w2.grad {ds.grad_accumulation} : tensor<2x3xf32>
  %db = ds.reduce_sum %dx axes [0] : tensor<2x3xf32> -> tensor<3xf32>
  %a3 = ds.load @b.grad : tensor<3xf32>
  %s3 = ds.add %a3, %db : tensor<3xf32>, tensor<3xf32>
  ds.store %s3, @b.grad {ds.grad_accumulation} : tensor<3xf32>
  return %l : tensor<f32>
}

func.func @apply(%lr: tensor<f32>, %step: tensor<f32>) -> tensor<f32> {
  %g1 = ds.load @w1.grad : tensor<2x3xf32>
  %g2 = ds.load @w2.grad : tensor<2x3xf32>
  %gb = ds.load @b.grad : tensor<3xf32>
  %q1 = ds.mul %g1, %g1 : tensor<2x3xf32>, tensor<2x3xf32>
  %t1 = ds.reduce_sum %q1 axes [0, 1] : tensor<2x3xf32> -> tensor<f32>
  %n = ds.sqrt %t1 {ds.global_grad_norm} : tensor<f32>
  %one = ds.constant dense<1.0> : tensor<f32>
  %w1 = ds.load @w1 : tensor<2x3xf32>
  %m1 = ds.load @w1.exp_avg : tensor<2x3xf32>
  %v1 = ds.load @w1.exp_avg_sq : tensor<2x3xf32>
  %p1, %m1n, %v1n = ds.adamw %w1, %g1, %m1, %v1 lr %lr step %step scale %one betas(0.9, 0.95) eps 1.0e-8 weight_decay 0.1 : tensor<2x3xf32>, tensor<2x3xf32>
  ds.store %p1, @w1 : tensor<2x3xf32>
  ds.store %m1n, @w1.exp_avg : tensor<2x3xf32>
  ds.store %v1n, @w1.exp_avg_sq : tensor<2x3xf32>
  %w2 = ds.load @w2 : tensor<2x3xf32>
  %m2 = ds.load @w2.exp_avg : tensor<2x3xf32>
  %v2 = ds.load @w2.exp_avg_sq : tensor<2x3xf32>
  %p2, %m2n, %v2n = ds.adamw %w2, %g2, %m2, %v2 lr %lr step %step scale %one betas(0.9, 0.95) eps 1.0e-8 weight_decay 0.1 : tensor<2x3xf32>, tensor<2x3xf32>
  ds.store %p2, @w2 : tensor<2x3xf32>
  ds.store %m2n, @w2.exp_avg : tensor<2x3xf32>
  ds.store %v2n, @w2.exp_avg_sq : tensor<2x3xf32>
  %b = ds.load @b : tensor<3xf32>
  %mb = ds.load @b.exp_avg : tensor<3xf32>
  %vb = ds.load @b.exp_avg_sq : tensor<3xf32>
  %pb, %mbn, %vbn = ds.adamw %b, %gb, %mb, %vb lr %lr step %step scale %one betas(0.9, 0.95) eps 1.0e-8 weight_decay 0.0 : tensor<3xf32>, tensor<3xf32>
  ds.store %pb, @b : tensor<3xf32>
  ds.store %mbn, @b.exp_avg : tensor<3xf32>
  ds.store %vbn, @b.exp_avg_sq : tensor<3xf32>
  %z1 = ds.constant dense<0.0> : tensor<2x3xf32>
  ds.store %z1, @w1.grad : tensor<2x3xf32>
  ds.store %z1, @w2.grad : tensor<2x3xf32>
  %zb = ds.constant dense<0.0> : tensor<3xf32>
  ds.store %zb, @b.grad : tensor<3xf32>
  return %n : tensor<f32>
}
