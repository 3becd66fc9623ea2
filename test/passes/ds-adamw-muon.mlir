// RUN: ds-opt %s -ds-adamw="optimizer=muon momentum=0.9 nesterov=true beta2=0.95 eps=1e-10 weight-decay=0.1 muon-lr-ratio=2 ns-steps=3" | FileCheck %s
// RUN: ds-opt %s -ds-adamw="optimizer=muon momentum=0.9 nesterov=true" -ds-expand-updates | FileCheck %s --check-prefix=EXPAND
// RUN: not ds-opt %s -ds-adamw="optimizer=muon cycle-momentum=true" 2>&1 | FileCheck %s --check-prefix=CYCLE
// RUN: ds-opt %s -ds-adamw="optimizer=muon" -ds-zero="world-size=3 stage=1" | FileCheck %s --check-prefix=ZERO
// Muon (DeepSpeed's MuonWithAuxAdam): matrices whose names have neither
// "embed" nor "lm_head" take ds.muon (one state, momentum_buffer) at the
// schedule's lr times muon-lr-ratio; embeddings, the LM head and vectors
// take ds.adamw at the schedule's lr; decay by dsc's rule (rank >= 2).

ds.variable param @h.mlp.c_fc.weight : tensor<8x4xf32> init normal std 2.000000e-02
ds.variable grad @h.mlp.c_fc.weight.grad of @h.mlp.c_fc.weight : tensor<8x4xf32> init zeros
ds.variable param @model.Embed_Tokens.weight : tensor<16x4xf32> init normal std 2.000000e-02
ds.variable grad @model.Embed_Tokens.weight.grad of @model.Embed_Tokens.weight : tensor<16x4xf32> init zeros
ds.variable param @lm_head.weight : tensor<16x4xf32> init normal std 2.000000e-02
ds.variable grad @lm_head.weight.grad of @lm_head.weight : tensor<16x4xf32> init zeros
ds.variable param @ln.weight : tensor<4xf32> init ones
ds.variable grad @ln.weight.grad of @ln.weight : tensor<4xf32> init zeros

// CHECK:     ds.variable opt_state @h.mlp.c_fc.weight.momentum_buffer of @h.mlp.c_fc.weight : tensor<8x4xf32> init zeros
// CHECK-NOT: opt_state @h.mlp.c_fc.weight.exp_avg
// CHECK:     ds.variable opt_state @model.Embed_Tokens.weight.exp_avg of
// CHECK:     ds.variable opt_state @lm_head.weight.exp_avg of
// CHECK:     ds.variable opt_state @ln.weight.exp_avg of
// CHECK-LABEL: func.func @apply(
// CHECK:      %[[RATIO:.*]] = ds.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[MLR:.*]] = ds.mul %arg0, %[[RATIO]]
// CHECK:      %[[BUF:.*]] = ds.load @h.mlp.c_fc.weight.momentum_buffer
// CHECK-NEXT: %[[P:.*]], %[[B:.*]] = ds.muon %{{.*}}, %{{.*}}, %[[BUF]] lr %[[MLR]] step %arg1 scale %{{.*}} momentum 9.000000e-01 weight_decay 1.000000e-01 ns_steps 3 {nesterov = true} : tensor<8x4xf32>, tensor<8x4xf32>
// CHECK-NEXT: ds.store %[[P]], @h.mlp.c_fc.weight :
// CHECK-NEXT: ds.store %[[B]], @h.mlp.c_fc.weight.momentum_buffer
// CHECK:      ds.adamw {{.*}} lr %arg0 step %arg1 scale %{{.*}} betas(9.000000e-01, 0.94999999999999996) eps 1.000000e-10 weight_decay 1.000000e-01 : tensor<16x4xf32>
// CHECK:      ds.adamw {{.*}} lr %arg0 step %arg1 scale %{{.*}} betas(9.000000e-01, 0.94999999999999996) eps 1.000000e-10 weight_decay 1.000000e-01 : tensor<16x4xf32>
// CHECK:      ds.adamw {{.*}} lr %arg0 {{.*}} weight_decay 0.000000e+00 : tensor<4xf32>

// The tall 8x4 matrix iterates on X^T X (4x4): A = X^T X, X' = a X + X B,
// after the normalization by the Frobenius norm; factor sqrt(8 / 4).
// EXPAND-LABEL: func.func @apply(
// EXPAND:      %[[NB:.*]], %[[U:.*]] = ds.muon_momentum %{{.*}}, %{{.*}} scale %{{.*}} momentum 9.000000e-01 {nesterov = true} : tensor<8x4xf32>, tensor<8x4xf32>
// EXPAND-NEXT: %[[SQ:.*]] = ds.mul %[[U]], %[[U]]
// EXPAND-NEXT: %[[S:.*]] = ds.reduce_sum %[[SQ]] axes [0, 1]
// EXPAND-NEXT: %[[N:.*]] = ds.sqrt %[[S]]
// EXPAND-NEXT: %[[EPS:.*]] = ds.constant dense<1.000000e-07>
// EXPAND-NEXT: %[[D:.*]] = ds.add %[[N]], %[[EPS]]
// EXPAND-NEXT: %[[X0:.*]] = ds.div %[[U]], %[[D]] : tensor<8x4xf32>, tensor<f32>
// EXPAND-NEXT: %[[A:.*]] = ds.matmul %[[X0]], %[[X0]] {transpose_lhs} : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
// EXPAND-NEXT: %[[AA:.*]] = ds.matmul %[[A]], %[[A]] : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
// EXPAND:      %[[B:.*]] = ds.add
// EXPAND-NEXT: %[[XB:.*]] = ds.matmul %[[X0]], %[[B]] : tensor<8x4xf32>, tensor<4x4xf32> -> tensor<8x4xf32>
// EXPAND-COUNT-4: ds.matmul {{.*}} {transpose_lhs}
// EXPAND:      %[[NP:.*]] = ds.muon_apply %{{.*}}, %{{.*}} lr %arg0 scale %{{.*}} weight_decay 1.000000e-02 factor 1.4142135623730951 : tensor<8x4xf32>, tensor<8x4xf32>
// EXPAND-NEXT: ds.store %[[NP]], @h.mlp.c_fc.weight :
// EXPAND-NEXT: ds.store %[[NB]], @h.mlp.c_fc.weight.momentum_buffer
// EXPAND-NOT:  ds.muon 

// CYCLE: error: ds-adamw: muon takes no cycle-momentum and a muon-lr-ratio > 0

// ZeRO stage 1 on 3 ranks: the matrix forms a group of its own (33
// elements with padding). Its momentum moves on this rank's shard, the
// direction is all-gathered, every rank runs the iteration on the whole
// matrix (scaled by sqrt(8 / 4)) and applies its shard of the result.
// ZERO-LABEL: func.func @apply(
// ZERO:      %[[G:.*]] = dist.shard {{.*}} ranks 3 : tensor<33xf32> -> tensor<11xf32>
// ZERO-NEXT: %[[P:.*]] = dist.shard {{.*}} ranks 3 : tensor<33xf32> -> tensor<11xf32>
// ZERO-NEXT: %[[BUF:.*]] = ds.load @zero.muon.momentum_buffer : tensor<11xf32>
// ZERO-NEXT: %[[NB:.*]], %[[U:.*]] = ds.muon_momentum %[[G]], %[[BUF]]
// ZERO-NEXT: %[[UG:.*]] = dist.all_gather %[[U]] ranks 3 : tensor<11xf32> -> tensor<33xf32>
// ZERO-NEXT: %[[UW:.*]] = dist.wait %[[UG]]
// ZERO-NEXT: %[[UM:.*]] = ds.slice %[[UW]] offsets [0] sizes [32] : tensor<33xf32> -> tensor<32xf32>
// ZERO-NEXT: ds.reshape %[[UM]] : tensor<32xf32> -> tensor<8x4xf32>
// ZERO-COUNT-5: ds.matmul {{.*}} {transpose_lhs}
// ZERO:      %[[F:.*]] = ds.constant dense<1.41421354> : tensor<f32>
// ZERO-NEXT: %[[XS:.*]] = ds.mul %{{.*}}, %[[F]] : tensor<8x4xf32>, tensor<f32>
// ZERO-NEXT: %[[XF:.*]] = ds.reshape %[[XS]] : tensor<8x4xf32> -> tensor<32xf32>
// ZERO-NEXT: %[[XP:.*]] = ds.pad %[[XF]] low [0] high [1] : tensor<32xf32> -> tensor<33xf32>
// ZERO-NEXT: %[[MINE:.*]] = dist.shard %[[XP]] ranks 3 : tensor<33xf32> -> tensor<11xf32>
// ZERO-NEXT: %[[NP:.*]] = ds.muon_apply %[[P]], %[[MINE]] lr %arg0 scale %{{.*}} weight_decay 1.000000e-02 factor 1.000000e+00 : tensor<11xf32>, tensor<11xf32>
// ZERO-NEXT: ds.store %[[NB]], @zero.muon.momentum_buffer : tensor<11xf32>
// ZERO-NEXT: dist.all_gather %[[NP]] ranks 3 : tensor<11xf32> -> tensor<33xf32>
// ZERO:      ds.adamw {{.*}} : tensor<43xf32>, tensor<43xf32>
// ZERO:      dist.group @zero.decay [@model.Embed_Tokens.weight, @lm_head.weight] size 129
// ZERO:      dist.group @zero.muon [@h.mlp.c_fc.weight] size 33

func.func @micro_step() {
  return
}
