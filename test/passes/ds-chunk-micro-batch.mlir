// RUN: ds-opt %s -split-input-file -ds-chunk-micro-batch="chunks=2" -verify-diagnostics | FileCheck %s

// The tokens and targets split into 2 chunks of samples; the ops computed
// from them cloned once per chunk, side by side; the weights' loads and
// the positions computed once and shared; the loss the chunks' mean.
// @forward_eval is the forward as it was (ds-eval makes @eval of it).
// CHECK-LABEL: func.func @forward(%arg0: tensor<4x8xi32>, %arg1: tensor<4x8xi32>) -> tensor<f32>
// CHECK-NEXT: %[[T:.*]]:2 = ds.split %arg0 axis 0 sizes [2, 2] : tensor<4x8xi32> -> tensor<2x8xi32>, tensor<2x8xi32>
// CHECK-NEXT: %[[Y:.*]]:2 = ds.split %arg1 axis 0 sizes [2, 2]
// CHECK-NEXT: %[[WTE:.*]] = ds.load @wte
// CHECK-NEXT: %[[WPE:.*]] = ds.load @wpe
// CHECK-NEXT: %[[E0:.*]] = ds.embedding %[[WTE]], %[[T]]#0 : tensor<16x4xf32>, tensor<2x8xi32> -> tensor<2x8x4xf32>
// CHECK-NEXT: %[[E1:.*]] = ds.embedding %[[WTE]], %[[T]]#1 : tensor<16x4xf32>, tensor<2x8xi32> -> tensor<2x8x4xf32>
// CHECK-NEXT: %[[POS:.*]] = ds.iota dim 0 : tensor<8xi32>
// CHECK-NEXT: %[[P:.*]] = ds.embedding %[[WPE]], %[[POS]] : tensor<8x4xf32>, tensor<8xi32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[X0:.*]] = ds.add %[[E0]], %[[P]] : tensor<2x8x4xf32>, tensor<8x4xf32>
// CHECK-NEXT: %[[X1:.*]] = ds.add %[[E1]], %[[P]] : tensor<2x8x4xf32>, tensor<8x4xf32>
// CHECK-NEXT: ds.load @ln
// CHECK-NEXT: ds.load @lnb
// CHECK-NEXT: %[[N0:.*]] = ds.layer_norm %[[X0]]
// CHECK-NEXT: %[[N1:.*]] = ds.layer_norm %[[X1]]
// CHECK-NEXT: %[[L0:.*]] = ds.matmul %[[N0]], %[[WTE]] {transpose_rhs} : tensor<2x8x4xf32>, tensor<16x4xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[L1:.*]] = ds.matmul %[[N1]], %[[WTE]] {transpose_rhs} : tensor<2x8x4xf32>, tensor<16x4xf32> -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[F0:.*]] = ds.reshape %[[L0]] : tensor<2x8x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[F1:.*]] = ds.reshape %[[L1]] : tensor<2x8x16xf32> -> tensor<16x16xf32>
// CHECK-NEXT: %[[G0:.*]] = ds.reshape %[[Y]]#0 : tensor<2x8xi32> -> tensor<16xi32>
// CHECK-NEXT: %[[G1:.*]] = ds.reshape %[[Y]]#1 : tensor<2x8xi32> -> tensor<16xi32>
// CHECK-NEXT: %[[C0:.*]] = ds.cross_entropy %[[F0]], %[[G0]]
// CHECK-NEXT: %[[C1:.*]] = ds.cross_entropy %[[F1]], %[[G1]]
// CHECK-NEXT: %[[S:.*]] = ds.add %[[C0]], %[[C1]] : tensor<f32>, tensor<f32>
// CHECK-NEXT: %[[H:.*]] = ds.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[M:.*]] = ds.mul %[[S]], %[[H]]
// CHECK-NEXT: return %[[M]] : tensor<f32>
// CHECK-LABEL: func.func @forward_eval(%arg0: tensor<4x8xi32>, %arg1: tensor<4x8xi32>) -> tensor<f32>
// CHECK: ds.cross_entropy %{{.*}}, %{{.*}} : tensor<32x16xf32>, tensor<32xi32> -> tensor<f32>
module {
  ds.variable param @wte : tensor<16x4xf32> init normal std 2.000000e-02
  ds.variable param @wpe : tensor<8x4xf32> init normal std 2.000000e-02
  ds.variable param @ln : tensor<4xf32> init ones
  ds.variable param @lnb : tensor<4xf32> init zeros
  func.func @forward(%tokens: tensor<4x8xi32>, %targets: tensor<4x8xi32>) -> tensor<f32> {
    %wte = ds.load @wte : tensor<16x4xf32>
    %wpe = ds.load @wpe : tensor<8x4xf32>
    %tok = ds.embedding %wte, %tokens : tensor<16x4xf32>, tensor<4x8xi32> -> tensor<4x8x4xf32>
    %pos = ds.iota dim 0 : tensor<8xi32>
    %p = ds.embedding %wpe, %pos : tensor<8x4xf32>, tensor<8xi32> -> tensor<8x4xf32>
    %x = ds.add %tok, %p : tensor<4x8x4xf32>, tensor<8x4xf32>
    %g = ds.load @ln : tensor<4xf32>
    %bb = ds.load @lnb : tensor<4xf32>
    %n = ds.layer_norm %x, %g, %bb eps 1.000000e-05 : tensor<4x8x4xf32>, tensor<4xf32>, tensor<4xf32>
    %logits = ds.matmul %n, %wte {transpose_rhs} : tensor<4x8x4xf32>, tensor<16x4xf32> -> tensor<4x8x16xf32>
    %flat = ds.reshape %logits : tensor<4x8x16xf32> -> tensor<32x16xf32>
    %t = ds.reshape %targets : tensor<4x8xi32> -> tensor<32xi32>
    %loss = ds.cross_entropy %flat, %t : tensor<32x16xf32>, tensor<32xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Each chunk's dropout draws its rows of the micro-batch's mask: chunk 1
// starts 2 samples in.
// CHECK-LABEL: func.func @forward
// CHECK: ds.dropout %{{.*}} rate 1.000000e-01 id 1 : tensor<2x8x4xf32>
// CHECK: ds.dropout %{{.*}} rate 1.000000e-01 id 1 from_sample 2 : tensor<2x8x4xf32>
module {
  ds.variable param @wte : tensor<16x4xf32> init normal std 2.000000e-02
  func.func @forward(%tokens: tensor<4x8xi32>, %targets: tensor<4x8xi32>) -> tensor<f32> {
    %wte = ds.load @wte : tensor<16x4xf32>
    %tok = ds.embedding %wte, %tokens : tensor<16x4xf32>, tensor<4x8xi32> -> tensor<4x8x4xf32>
    %d = ds.dropout %tok rate 1.000000e-01 id 1 : tensor<4x8x4xf32>
    %logits = ds.matmul %d, %wte {transpose_rhs} : tensor<4x8x4xf32>, tensor<16x4xf32> -> tensor<4x8x16xf32>
    %loss = ds.cross_entropy %logits, %targets : tensor<4x8x16xf32>, tensor<4x8xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A sum over the samples is no chunk's.
module {
  ds.variable param @wte : tensor<16x4xf32> init normal std 2.000000e-02
  func.func @forward(%tokens: tensor<4x8xi32>, %targets: tensor<4x8xi32>) -> tensor<f32> {
    %wte = ds.load @wte : tensor<16x4xf32>
    %tok = ds.embedding %wte, %tokens : tensor<16x4xf32>, tensor<4x8xi32> -> tensor<4x8x4xf32>
    // expected-error @+1 {{ds-chunk-micro-batch: 'ds.reduce_sum' cannot run on 2 chunks of the micro-batch: its result would be partial rather than cut along the samples}}
    %s = ds.reduce_sum %tok axes [0] : tensor<4x8x4xf32> -> tensor<8x4xf32>
    %logits = ds.matmul %s, %wte {transpose_rhs} : tensor<8x4xf32>, tensor<16x4xf32> -> tensor<8x16xf32>
    %t = ds.constant dense<0> : tensor<8xi32>
    %loss = ds.cross_entropy %logits, %t : tensor<8x16xf32>, tensor<8xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// The loss must be what @forward returns: a function of it would not be
// the chunks' mean.
module {
  ds.variable param @wte : tensor<16x4xf32> init normal std 2.000000e-02
  func.func @forward(%tokens: tensor<4x8xi32>, %targets: tensor<4x8xi32>) -> tensor<f32> {
    %wte = ds.load @wte : tensor<16x4xf32>
    %tok = ds.embedding %wte, %tokens : tensor<16x4xf32>, tensor<4x8xi32> -> tensor<4x8x4xf32>
    %logits = ds.matmul %tok, %wte {transpose_rhs} : tensor<4x8x4xf32>, tensor<16x4xf32> -> tensor<4x8x16xf32>
    %loss = ds.cross_entropy %logits, %targets : tensor<4x8x16xf32>, tensor<4x8xi32> -> tensor<f32>
    // expected-error @+1 {{ds-chunk-micro-batch: 'ds.exp' cannot run on 2 chunks of the micro-batch: it reads a chunk's loss (only the return may: the chunks' losses are averaged there)}}
    %e = ds.exp %loss : tensor<f32>
    return %e : tensor<f32>
  }
}
