// RUN: ds-opt %s -split-input-file -ds-ulysses="sequence-parallel=2" -verify-diagnostics | FileCheck %s

// A PyTorch export's shape of a loss (nanoGPT): the positions are a folded
// arange (an integer constant, no gradient: computed whole, the rank's
// part taken by dist.shard over the group) and the logits [B, L, V] are
// flattened with the targets before the loss. With B = 2 the flattened
// rows are the rank's tokens of each sequence in turn, which the loss
// takes as they are: its mean over the rank's tokens.
// CHECK: module attributes {dist.sequence_parallel = 2 : i64}
// CHECK-LABEL: func.func @forward(%arg0: tensor<2x4xi32>, %arg1: tensor<2x4xi32>) -> tensor<f32>
// CHECK: %[[POS:.*]] = ds.constant
// CHECK: %[[PART:.*]] = dist.shard %[[POS]] ranks 2 {dist.tensor_group} : tensor<8xi32> -> tensor<4xi32>
// CHECK: ds.embedding %{{.*}}, %{{.*}} : tensor<8x4xf32>, tensor<4xi32> -> tensor<4x4xf32>
// CHECK: ds.add %{{.*}}, %{{.*}} : tensor<2x4x4xf32>, tensor<4x4xf32>
// CHECK: ds.reshape %{{.*}} : tensor<2x4x16xf32> -> tensor<8x16xf32>
// CHECK: ds.reshape %arg1 : tensor<2x4xi32> -> tensor<8xi32>
// CHECK: ds.cross_entropy %{{.*}}, %{{.*}} : tensor<8x16xf32>, tensor<8xi32> -> tensor<f32>
module {
  ds.variable param @wte : tensor<16x4xf32> init normal std 2.000000e-02
  ds.variable param @wpe : tensor<8x4xf32> init normal std 2.000000e-02
  func.func @forward(%tokens: tensor<2x8xi32>, %targets: tensor<2x8xi32>) -> tensor<f32> {
    %wte = ds.load @wte : tensor<16x4xf32>
    %wpe = ds.load @wpe : tensor<8x4xf32>
    %tok = ds.embedding %wte, %tokens : tensor<16x4xf32>, tensor<2x8xi32> -> tensor<2x8x4xf32>
    %pos = ds.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi32>
    %p = ds.embedding %wpe, %pos : tensor<8x4xf32>, tensor<8xi32> -> tensor<8x4xf32>
    %x = ds.add %tok, %p : tensor<2x8x4xf32>, tensor<8x4xf32>
    %logits = ds.matmul %x, %wte {transpose_rhs} : tensor<2x8x4xf32>, tensor<16x4xf32> -> tensor<2x8x16xf32>
    %flat = ds.reshape %logits : tensor<2x8x16xf32> -> tensor<16x16xf32>
    %t = ds.reshape %targets : tensor<2x8xi32> -> tensor<16xi32>
    %loss = ds.cross_entropy %flat, %t : tensor<16x16xf32>, tensor<16xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// The merged rows are no contiguous part of the whole: an op that keys on
// the element's place (dropout's mask) is refused by name.
module {
  ds.variable param @wte : tensor<16x4xf32> init normal std 2.000000e-02
  func.func @forward(%tokens: tensor<2x8xi32>, %targets: tensor<2x8xi32>) -> tensor<f32> {
    %wte = ds.load @wte : tensor<16x4xf32>
    %tok = ds.embedding %wte, %tokens : tensor<16x4xf32>, tensor<2x8xi32> -> tensor<2x8x4xf32>
    %logits = ds.matmul %tok, %wte {transpose_rhs} : tensor<2x8x4xf32>, tensor<16x4xf32> -> tensor<2x8x16xf32>
    %flat = ds.reshape %logits : tensor<2x8x16xf32> -> tensor<16x16xf32>
    // expected-error @+1 {{ds-ulysses: 'ds.dropout' cannot run on a part of the sequence: it reads rows that merge the batch with the rank's tokens (only row-wise ops and the loss do)}}
    %d = ds.dropout %flat rate 1.000000e-01 id 0 : tensor<16x16xf32>
    %t = ds.reshape %targets : tensor<2x8xi32> -> tensor<16xi32>
    %loss = ds.cross_entropy %d, %t : tensor<16x16xf32>, tensor<16xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// Ulysses runs before phase fused forms seq_major ([B, T, H, D]) attention
// and rotary, so meeting one means the IR was written by hand: refused by
// name rather than cut along the wrong dimension.
module {
  ds.variable param @wte : tensor<16x4xf32> init normal std 2.000000e-02
  func.func @forward(%tokens: tensor<2x8xi32>, %targets: tensor<2x8xi32>) -> tensor<f32> {
    %wte = ds.load @wte : tensor<16x4xf32>
    %tok = ds.embedding %wte, %tokens : tensor<16x4xf32>, tensor<2x8xi32> -> tensor<2x8x4xf32>
    %q = ds.reshape %tok : tensor<2x8x4xf32> -> tensor<2x8x2x2xf32>
    // expected-error @+1 {{ds-ulysses: 'ds.rotary' cannot run on a part of the sequence: seq_major attention is formed in phase fused, after the sequence is cut}}
    %r = ds.rotary %q theta 1.000000e+04 seq_major : tensor<2x8x2x2xf32>
    %y = ds.attention %r, %q, %q scale 5.000000e-01 causal seq_major : tensor<2x8x2x2xf32>, tensor<2x8x2x2xf32>, tensor<2x8x2x2xf32> -> tensor<2x8x2x2xf32>
    %h = ds.reshape %y : tensor<2x8x2x2xf32> -> tensor<2x8x4xf32>
    %logits = ds.matmul %h, %wte {transpose_rhs} : tensor<2x8x4xf32>, tensor<16x4xf32> -> tensor<2x8x16xf32>
    %flat = ds.reshape %logits : tensor<2x8x16xf32> -> tensor<16x16xf32>
    %t = ds.reshape %targets : tensor<2x8xi32> -> tensor<16xi32>
    %loss = ds.cross_entropy %flat, %t : tensor<16x16xf32>, tensor<16xi32> -> tensor<f32>
    return %loss : tensor<f32>
  }
}
