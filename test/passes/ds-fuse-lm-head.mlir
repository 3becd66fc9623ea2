// RUN: ds-opt %s -split-input-file -ds-fuse-lm-head | FileCheck %s
// RUN: ds-opt %s -split-input-file -ds-fuse-lm-head="chunk-rows=4" | FileCheck %s --check-prefix=FOUR
// RUN: ds-opt %s -split-input-file -ds-fuse-lm-head="enabled=false" | FileCheck %s --check-prefix=OFF
// Phase fused: the head autodiff writes (the logits' product read only by
// the loss and its gradient; the gradient read only by the two products
// that make dh and the weight's gradient) becomes ds.linear_cross_entropy
// at the loss's place, the seed moved up to it; the chunk is the largest
// divisor of the 8 rows not above 256 unless chunk-rows says.

// CHECK-LABEL: func.func @micro_step
// CHECK-NEXT: %[[SEED:.*]] = ds.constant {ds.loss_seed} dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[LOSS:.*]], %[[DH:.*]], %[[DW:.*]], %{{.*}} = ds.linear_cross_entropy %arg0, %arg2, %arg1, %[[SEED]] chunk_rows 8 : tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<2x4xi32>, tensor<f32>
// CHECK-NEXT: return %[[LOSS]], %[[DH]], %[[DW]]
// FOUR: ds.linear_cross_entropy {{.*}} chunk_rows 4
// OFF-NOT: ds.linear_cross_entropy
// OFF: ds.cross_entropy_grad
func.func @micro_step(%h: tensor<2x4x8xf32>, %t: tensor<2x4xi32>, %w: tensor<16x8xf32>) -> (tensor<f32>, tensor<2x4x8xf32>, tensor<16x8xf32>) {
  %l = ds.matmul %h, %w {transpose_rhs} : tensor<2x4x8xf32>, tensor<16x8xf32> -> tensor<2x4x16xf32>
  %loss = ds.cross_entropy %l, %t : tensor<2x4x16xf32>, tensor<2x4xi32> -> tensor<f32>
  %seed = ds.constant {ds.loss_seed} dense<1.000000e+00> : tensor<f32>
  %g = ds.cross_entropy_grad %l, %t, %seed : tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<f32>
  %dh = ds.matmul %g, %w : tensor<2x4x16xf32>, tensor<16x8xf32> -> tensor<2x4x8xf32>
  %hf = ds.reshape %h : tensor<2x4x8xf32> -> tensor<8x8xf32>
  %gf = ds.reshape %g : tensor<2x4x16xf32> -> tensor<8x16xf32>
  %dw = ds.matmul %gf, %hf {transpose_lhs} : tensor<8x16xf32>, tensor<8x8xf32> -> tensor<16x8xf32>
  return %loss, %dh, %dw : tensor<f32>, tensor<2x4x8xf32>, tensor<16x8xf32>
}

// -----

// Logits that something else reads (here returned) stay: the fused op
// would have to make them whole.
// CHECK-LABEL: func.func @logits_kept
// CHECK-NOT: ds.linear_cross_entropy
// CHECK: ds.cross_entropy_grad
func.func @logits_kept(%h: tensor<8x8xf32>, %t: tensor<8xi32>, %w: tensor<16x8xf32>, %s: tensor<f32>) -> (tensor<f32>, tensor<8x8xf32>, tensor<16x8xf32>, tensor<8x16xf32>) {
  %l = ds.matmul %h, %w {transpose_rhs} : tensor<8x8xf32>, tensor<16x8xf32> -> tensor<8x16xf32>
  %loss = ds.cross_entropy %l, %t : tensor<8x16xf32>, tensor<8xi32> -> tensor<f32>
  %g = ds.cross_entropy_grad %l, %t, %s : tensor<8x16xf32>, tensor<8xi32>, tensor<f32>
  %dh = ds.matmul %g, %w : tensor<8x16xf32>, tensor<16x8xf32> -> tensor<8x8xf32>
  %dw = ds.matmul %g, %h {transpose_lhs} : tensor<8x16xf32>, tensor<8x8xf32> -> tensor<16x8xf32>
  return %loss, %dh, %dw, %l : tensor<f32>, tensor<8x8xf32>, tensor<16x8xf32>, tensor<8x16xf32>
}

// -----

// Rank-2 h needs no reshapes. A 16-bit head fuses too: its weight gradient
// comes out f32 and is rounded once, by a cast, to the weight's dtype. With
// few rows it stays unfused: the f32 weight gradient beside its copy would
// outweigh the logits and their gradient (64 rows: 2816 bytes against 4096;
// 8 rows: 1024 against 512).
// CHECK-LABEL: func.func @flat
// CHECK: ds.linear_cross_entropy %arg0, %arg2, %arg1, %arg3 chunk_rows 8
// CHECK-LABEL: func.func @half
// CHECK-NEXT: %[[LOSS:.*]], %[[DH:.*]], %[[DW:.*]], %{{.*}} = ds.linear_cross_entropy %arg0, %arg2, %arg1, %arg3 chunk_rows 64 : tensor<64x8xbf16>, tensor<16x8xbf16>, tensor<64xi32>, tensor<f32>
// CHECK-NEXT: %[[DW16:.*]] = ds.cast %[[DW]] : tensor<16x8xf32> -> tensor<16x8xbf16>
// CHECK-NEXT: return %[[LOSS]], %[[DH]], %[[DW16]] : tensor<f32>, tensor<64x8xbf16>, tensor<16x8xbf16>
// CHECK-LABEL: func.func @half_few_rows
// CHECK-NOT: ds.linear_cross_entropy
func.func @flat(%h: tensor<8x8xf32>, %t: tensor<8xi32>, %w: tensor<16x8xf32>, %s: tensor<f32>) -> (tensor<f32>, tensor<8x8xf32>, tensor<16x8xf32>) {
  %l = ds.matmul %h, %w {transpose_rhs} : tensor<8x8xf32>, tensor<16x8xf32> -> tensor<8x16xf32>
  %loss = ds.cross_entropy %l, %t : tensor<8x16xf32>, tensor<8xi32> -> tensor<f32>
  %g = ds.cross_entropy_grad %l, %t, %s : tensor<8x16xf32>, tensor<8xi32>, tensor<f32>
  %dh = ds.matmul %g, %w : tensor<8x16xf32>, tensor<16x8xf32> -> tensor<8x8xf32>
  %dw = ds.matmul %g, %h {transpose_lhs} : tensor<8x16xf32>, tensor<8x8xf32> -> tensor<16x8xf32>
  return %loss, %dh, %dw : tensor<f32>, tensor<8x8xf32>, tensor<16x8xf32>
}
func.func @half(%h: tensor<64x8xbf16>, %t: tensor<64xi32>, %w: tensor<16x8xbf16>, %s: tensor<f32>) -> (tensor<f32>, tensor<64x8xbf16>, tensor<16x8xbf16>) {
  %l = ds.matmul %h, %w {transpose_rhs} : tensor<64x8xbf16>, tensor<16x8xbf16> -> tensor<64x16xbf16>
  %loss = ds.cross_entropy %l, %t : tensor<64x16xbf16>, tensor<64xi32> -> tensor<f32>
  %g = ds.cross_entropy_grad %l, %t, %s : tensor<64x16xbf16>, tensor<64xi32>, tensor<f32>
  %dh = ds.matmul %g, %w : tensor<64x16xbf16>, tensor<16x8xbf16> -> tensor<64x8xbf16>
  %dw = ds.matmul %g, %h {transpose_lhs} : tensor<64x16xbf16>, tensor<64x8xbf16> -> tensor<16x8xbf16>
  return %loss, %dh, %dw : tensor<f32>, tensor<64x8xbf16>, tensor<16x8xbf16>
}
func.func @half_few_rows(%h: tensor<8x8xbf16>, %t: tensor<8xi32>, %w: tensor<16x8xbf16>, %s: tensor<f32>) -> (tensor<f32>, tensor<8x8xbf16>, tensor<16x8xbf16>) {
  %l = ds.matmul %h, %w {transpose_rhs} : tensor<8x8xbf16>, tensor<16x8xbf16> -> tensor<8x16xbf16>
  %loss = ds.cross_entropy %l, %t : tensor<8x16xbf16>, tensor<8xi32> -> tensor<f32>
  %g = ds.cross_entropy_grad %l, %t, %s : tensor<8x16xbf16>, tensor<8xi32>, tensor<f32>
  %dh = ds.matmul %g, %w : tensor<8x16xbf16>, tensor<16x8xbf16> -> tensor<8x8xbf16>
  %dw = ds.matmul %g, %h {transpose_lhs} : tensor<8x16xbf16>, tensor<8x8xbf16> -> tensor<16x8xbf16>
  return %loss, %dh, %dw : tensor<f32>, tensor<8x8xbf16>, tensor<16x8xbf16>
}
