// RUN: ds-opt %s -ds-adamw="optimizer=muon per-head-muon=true" -ds-expand-updates | FileCheck %s --check-prefix=EXPAND
// RUN: ds-opt %s -ds-adamw="optimizer=muon per-head-muon=true" -ds-zero="world-size=2 stage=1" | FileCheck %s --check-prefix=ZERO
// RUN: ds-opt %s -ds-adamw="optimizer=muon" | FileCheck %s --check-prefix=WHOLE
// RUN: not ds-opt %s -ds-adamw="optimizer=adamw per-head-muon=true" 2>&1 | FileCheck %s --check-prefix=ADAMW
// RUN: sed 's/attention_heads = 2/attention_heads = 3/' %s | not ds-opt -ds-adamw="optimizer=muon per-head-muon=true" 2>&1 | FileCheck %s --check-prefix=ROWS
// RUN: sed 's/{ds.attention_heads = .*}//' %s | not ds-opt -ds-adamw="optimizer=muon per-head-muon=true" 2>&1 | FileCheck %s --check-prefix=NONE
//
// per_head_muon: the exporter marks query, key and value projections with
// their heads (ds.attention_heads); under per-head-muon ds.muon takes them
// as `heads` and each head's block of rows is a matrix of its own.

ds.variable param @layers.0.q_proj.weight : tensor<8x4xf32> init normal std 2.000000e-02 {ds.attention_heads = 2 : i64}
ds.variable grad @layers.0.q_proj.weight.grad of @layers.0.q_proj.weight : tensor<8x4xf32> init zeros
ds.variable param @layers.0.k_proj.weight : tensor<4x4xf32> init normal std 2.000000e-02 {ds.attention_heads = 1 : i64}
ds.variable grad @layers.0.k_proj.weight.grad of @layers.0.k_proj.weight : tensor<4x4xf32> init zeros
ds.variable param @layers.0.up.weight : tensor<6x4xf32> init normal std 2.000000e-02
ds.variable grad @layers.0.up.weight.grad of @layers.0.up.weight : tensor<6x4xf32> init zeros
ds.variable param @layers.0.mlp.weight : tensor<4x4xf32> init normal std 2.000000e-02
ds.variable grad @layers.0.mlp.weight.grad of @layers.0.mlp.weight : tensor<4x4xf32> init zeros
ds.variable param @layers.1.mlp.weight : tensor<4x4xf32> init normal std 2.000000e-02
ds.variable grad @layers.1.mlp.weight.grad of @layers.1.mlp.weight : tensor<4x4xf32> init zeros

// The 8x4 query projection iterates as two 4x4 heads, each divided by its
// own norm; the factor is a head's, sqrt(max(1, 4 / 4)).
// EXPAND-LABEL: func.func @apply(
// EXPAND:      %[[NB:.*]], %[[U:.*]] = ds.muon_momentum {{.*}} : tensor<8x4xf32>, tensor<8x4xf32>
// EXPAND-NEXT: %[[H:.*]] = ds.reshape %[[U]] : tensor<8x4xf32> -> tensor<2x4x4xf32>
// EXPAND-NEXT: %[[SQ:.*]] = ds.mul %[[H]], %[[H]] : tensor<2x4x4xf32>, tensor<2x4x4xf32>
// EXPAND-NEXT: %[[S:.*]] = ds.reduce_sum %[[SQ]] axes [1, 2] keepdim : tensor<2x4x4xf32> -> tensor<2x1x1xf32>
// EXPAND-NEXT: %[[N:.*]] = ds.sqrt %[[S]] : tensor<2x1x1xf32>
// EXPAND-NEXT: ds.constant dense<1.000000e-07>
// EXPAND-NEXT: %[[D:.*]] = ds.add %[[N]], %{{.*}} : tensor<2x1x1xf32>, tensor<f32>
// EXPAND-NEXT: %[[X0:.*]] = ds.div %[[H]], %[[D]] : tensor<2x4x4xf32>, tensor<2x1x1xf32>
// EXPAND-NEXT: ds.matmul %[[X0]], %[[X0]] {transpose_rhs} : tensor<2x4x4xf32>, tensor<2x4x4xf32> -> tensor<2x4x4xf32>
// EXPAND:      %[[X:.*]] = ds.reshape %{{.*}} : tensor<2x4x4xf32> -> tensor<8x4xf32>
// EXPAND-NEXT: ds.muon_apply %{{.*}}, %[[X]] lr %arg0 scale %{{.*}} weight_decay 1.000000e-02 factor 1.000000e+00 : tensor<8x4xf32>, tensor<8x4xf32>
// A projection with one head and an unmarked matrix iterate whole.
// EXPAND:      ds.muon_momentum {{.*}} : tensor<4x4xf32>, tensor<4x4xf32>
// EXPAND-NEXT: ds.mul %{{.*}} : tensor<4x4xf32>, tensor<4x4xf32>
// EXPAND-NEXT: ds.reduce_sum %{{.*}} axes [0, 1] : tensor<4x4xf32> -> tensor<f32>

// ZeRO stage 1 on 2 ranks: the group's five 4x4 matrices (two query heads,
// the key, two MLP matrices, in two ranges around the 6x4 matrix) are
// stacked, padded to six and divided, three per rank, into a batched
// iteration whose results are all-gathered; the single 6x4 matrix is
// iterated by both ranks.
// ZERO-LABEL: func.func @apply(
// ZERO:      %[[NB:.*]], %[[U:.*]] = ds.muon_momentum %{{.*}}, %{{.*}} : tensor<52xf32>, tensor<52xf32>
// ZERO-NEXT: %[[UG:.*]] = dist.all_gather %[[U]] ranks 2 : tensor<52xf32> -> tensor<104xf32>
// ZERO-NEXT: %[[UW:.*]] = dist.wait %[[UG]]
// ZERO-NEXT: %[[QK:.*]] = ds.slice %[[UW]] offsets [0] sizes [48] : tensor<104xf32> -> tensor<48xf32>
// ZERO-NEXT: %[[MLP:.*]] = ds.slice %[[UW]] offsets [72] sizes [32] : tensor<104xf32> -> tensor<32xf32>
// ZERO-NEXT: %[[ALL:.*]] = ds.concat %[[QK]], %[[MLP]] axis 0 : tensor<48xf32>, tensor<32xf32> -> tensor<80xf32>
// ZERO-NEXT: %[[PAD:.*]] = ds.pad %[[ALL]] low [0] high [16] : tensor<80xf32> -> tensor<96xf32>
// ZERO-NEXT: %[[MINE:.*]] = dist.shard %[[PAD]] ranks 2 : tensor<96xf32> -> tensor<48xf32>
// ZERO-NEXT: %[[B:.*]] = ds.reshape %[[MINE]] : tensor<48xf32> -> tensor<3x4x4xf32>
// ZERO-NEXT: ds.mul %[[B]], %[[B]] : tensor<3x4x4xf32>, tensor<3x4x4xf32>
// ZERO-NEXT: ds.reduce_sum %{{.*}} axes [1, 2] keepdim : tensor<3x4x4xf32> -> tensor<3x1x1xf32>
// ZERO-COUNT-15: ds.matmul {{.*}} : tensor<3x4x4xf32>, tensor<3x4x4xf32> -> tensor<3x4x4xf32>
// ZERO:      %[[OF:.*]] = ds.reshape %{{.*}} : tensor<3x4x4xf32> -> tensor<48xf32>
// ZERO-NEXT: %[[OG:.*]] = dist.all_gather %[[OF]] ranks 2 : tensor<48xf32> -> tensor<96xf32>
// ZERO-NEXT: %[[OW:.*]] = dist.wait %[[OG]] : tensor<96xf32>
// ZERO-NEXT: %[[O:.*]] = ds.slice %[[OW]] offsets [0] sizes [80] : tensor<96xf32> -> tensor<80xf32>
// ZERO-NEXT: %[[OQK:.*]] = ds.slice %[[O]] offsets [0] sizes [48] : tensor<80xf32> -> tensor<48xf32>
// ZERO-NEXT: %[[OMLP:.*]] = ds.slice %[[O]] offsets [48] sizes [32] : tensor<80xf32> -> tensor<32xf32>
// ZERO-NEXT: %[[UP:.*]] = ds.slice %[[UW]] offsets [48] sizes [24] : tensor<104xf32> -> tensor<24xf32>
// ZERO-NEXT: ds.reshape %[[UP]] : tensor<24xf32> -> tensor<6x4xf32>
// ZERO-COUNT-15: ds.matmul {{.*}}
// ZERO:      %[[F:.*]] = ds.constant dense<1.22474492> : tensor<f32>
// ZERO-NEXT: %[[XS:.*]] = ds.mul %{{.*}}, %[[F]] : tensor<6x4xf32>, tensor<f32>
// ZERO-NEXT: %[[OUP:.*]] = ds.reshape %[[XS]] : tensor<6x4xf32> -> tensor<24xf32>
// ZERO-NEXT: %[[ORTHO:.*]] = ds.concat %[[OQK]], %[[OUP]], %[[OMLP]] axis 0 : tensor<48xf32>, tensor<24xf32>, tensor<32xf32> -> tensor<104xf32>
// ZERO-NEXT: %[[S:.*]] = dist.shard %[[ORTHO]] ranks 2 : tensor<104xf32> -> tensor<52xf32>
// ZERO-NEXT: ds.muon_apply %{{.*}}, %[[S]] lr %arg0 scale %{{.*}} weight_decay 1.000000e-02 factor 1.000000e+00 : tensor<52xf32>, tensor<52xf32>

// Without per-head-muon the marks are ignored.
// WHOLE: ds.muon {{.*}} ns_steps 5 {nesterov = false} : tensor<8x4xf32>, tensor<8x4xf32>

// ADAMW: error: ds-adamw: per-head-muon needs optimizer=muon
// ROWS: error: ds-adamw: layers.0.q_proj.weight has ds.attention_heads 3, which does not divide its 8 rows
// NONE: error: ds-adamw: per-head-muon (per_head_muon), but no Muon matrix has ds.attention_heads (separate query, key and value projections exported with the model's config have them; a fused QKV matrix, as GPT-2's c_attn, does not)

func.func @micro_step() {
  return
}
