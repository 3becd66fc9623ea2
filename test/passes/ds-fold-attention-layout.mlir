// RUN: ds-opt %s -ds-fold-attention-layout | FileCheck %s
// RUN: ds-opt %s -ds-fold-attention-layout=enabled=false | FileCheck %s --check-prefix=OFF
// An attention whose operands are all transposes [0, 2, 1, 3] and whose
// results are read only by the transposes back reads and writes [B, T, H,
// D] (seq_major); the transposes go, and the forward's q, k, v transposes
// once the backward no longer reads them either. @forward is left alone.

// OFF-NOT: seq_major

// CHECK-LABEL: func.func @forward
// CHECK:         ds.transpose
// CHECK-NOT:     seq_major
func.func @forward(%q: tensor<2x8x3x4xf32>) -> tensor<2x8x3x4xf32> {
  %qt = ds.transpose %q [0, 2, 1, 3] : tensor<2x8x3x4xf32> -> tensor<2x3x8x4xf32>
  %o = ds.attention %qt, %qt, %qt scale 0.5 causal : tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32> -> tensor<2x3x8x4xf32>
  %ot = ds.transpose %o [0, 2, 1, 3] : tensor<2x3x8x4xf32> -> tensor<2x8x3x4xf32>
  return %ot : tensor<2x8x3x4xf32>
}

// A training step's layer: the forward and the backward both fold, and
// every transpose goes (v has another head size: Dv 5).
// CHECK-LABEL: func.func @step(
// CHECK-SAME:    %[[Q:[^:]*]]: tensor<2x8x3x4xf32>, %[[K:[^:]*]]: tensor<2x8x3x4xf32>, %[[V:[^:]*]]: tensor<2x8x3x5xf32>, %[[DO:[^:]*]]: tensor<2x8x3x5xf32>)
// CHECK-NOT:     ds.transpose
// CHECK:         %[[O:.*]] = ds.attention %[[Q]], %[[K]], %[[V]] scale 5.000000e-01 causal seq_major : tensor<2x8x3x4xf32>, tensor<2x8x3x4xf32>, tensor<2x8x3x5xf32> -> tensor<2x8x3x5xf32>
// CHECK-NEXT:    %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = ds.attention_grad %[[Q]], %[[K]], %[[V]], %[[DO]] scale 5.000000e-01 causal seq_major : tensor<2x8x3x4xf32>, tensor<2x8x3x4xf32>, tensor<2x8x3x5xf32>, tensor<2x8x3x5xf32>
// CHECK-NEXT:    return %[[O]], %[[DQ]], %[[DK]], %[[DV]] :
func.func @step(%q: tensor<2x8x3x4xf32>, %k: tensor<2x8x3x4xf32>, %v: tensor<2x8x3x5xf32>, %do: tensor<2x8x3x5xf32>) -> (tensor<2x8x3x5xf32>, tensor<2x8x3x4xf32>, tensor<2x8x3x4xf32>, tensor<2x8x3x5xf32>) {
  %qt = ds.transpose %q [0, 2, 1, 3] : tensor<2x8x3x4xf32> -> tensor<2x3x8x4xf32>
  %kt = ds.transpose %k [0, 2, 1, 3] : tensor<2x8x3x4xf32> -> tensor<2x3x8x4xf32>
  %vt = ds.transpose %v [0, 2, 1, 3] : tensor<2x8x3x5xf32> -> tensor<2x3x8x5xf32>
  %o = ds.attention %qt, %kt, %vt scale 0.5 causal : tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x5xf32> -> tensor<2x3x8x5xf32>
  %ot = ds.transpose %o [0, 2, 1, 3] : tensor<2x3x8x5xf32> -> tensor<2x8x3x5xf32>
  %dot = ds.transpose %do [0, 2, 1, 3] : tensor<2x8x3x5xf32> -> tensor<2x3x8x5xf32>
  %g:3 = ds.attention_grad %qt, %kt, %vt, %dot scale 0.5 causal : tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x5xf32>, tensor<2x3x8x5xf32>
  %dq = ds.transpose %g#0 [0, 2, 1, 3] : tensor<2x3x8x4xf32> -> tensor<2x8x3x4xf32>
  %dk = ds.transpose %g#1 [0, 2, 1, 3] : tensor<2x3x8x4xf32> -> tensor<2x8x3x4xf32>
  %dv = ds.transpose %g#2 [0, 2, 1, 3] : tensor<2x3x8x5xf32> -> tensor<2x8x3x5xf32>
  return %ot, %dq, %dk, %dv : tensor<2x8x3x5xf32>, tensor<2x8x3x4xf32>, tensor<2x8x3x4xf32>, tensor<2x8x3x5xf32>
}

// Llama rotates q and k after the transpose, and their gradients before
// the transpose back: the swaps move past the rotary embeddings, which
// then rotate [B, T, H, D] rows, and everything folds.
// CHECK-LABEL: func.func @rotary(
// CHECK-SAME:    %[[Q:[^:]*]]: tensor<2x8x3x4xf32>, %[[K:[^:]*]]: tensor<2x8x3x4xf32>, %[[V:[^:]*]]: tensor<2x8x3x4xf32>, %[[DO:[^:]*]]: tensor<2x8x3x4xf32>)
// CHECK-NOT:     ds.transpose
// CHECK:         %[[QR:.*]] = ds.rotary %[[Q]] theta 1.000000e+04 seq_major : tensor<2x8x3x4xf32>
// CHECK-NEXT:    %[[KR:.*]] = ds.rotary %[[K]] theta 1.000000e+04 seq_major : tensor<2x8x3x4xf32>
// CHECK-NEXT:    %[[O:.*]] = ds.attention %[[QR]], %[[KR]], %[[V]] scale 5.000000e-01 causal seq_major
// CHECK-NEXT:    %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = ds.attention_grad %[[QR]], %[[KR]], %[[V]], %[[DO]] scale 5.000000e-01 causal seq_major
// CHECK-NEXT:    %[[DQR:.*]] = ds.rotary %[[DQ]] theta 1.000000e+04 inverse seq_major
// CHECK-NEXT:    %[[DKR:.*]] = ds.rotary %[[DK]] theta 1.000000e+04 inverse seq_major
// CHECK-NEXT:    return %[[O]], %[[DQR]], %[[DKR]], %[[DV]] :
func.func @rotary(%q: tensor<2x8x3x4xf32>, %k: tensor<2x8x3x4xf32>, %v: tensor<2x8x3x4xf32>, %do: tensor<2x8x3x4xf32>) -> (tensor<2x8x3x4xf32>, tensor<2x8x3x4xf32>, tensor<2x8x3x4xf32>, tensor<2x8x3x4xf32>) {
  %qt = ds.transpose %q [0, 2, 1, 3] : tensor<2x8x3x4xf32> -> tensor<2x3x8x4xf32>
  %qr = ds.rotary %qt theta 1.000000e+04 : tensor<2x3x8x4xf32>
  %kt = ds.transpose %k [0, 2, 1, 3] : tensor<2x8x3x4xf32> -> tensor<2x3x8x4xf32>
  %kr = ds.rotary %kt theta 1.000000e+04 : tensor<2x3x8x4xf32>
  %vt = ds.transpose %v [0, 2, 1, 3] : tensor<2x8x3x4xf32> -> tensor<2x3x8x4xf32>
  %o = ds.attention %qr, %kr, %vt scale 0.5 causal : tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32> -> tensor<2x3x8x4xf32>
  %ot = ds.transpose %o [0, 2, 1, 3] : tensor<2x3x8x4xf32> -> tensor<2x8x3x4xf32>
  %dot = ds.transpose %do [0, 2, 1, 3] : tensor<2x8x3x4xf32> -> tensor<2x3x8x4xf32>
  %g:3 = ds.attention_grad %qr, %kr, %vt, %dot scale 0.5 causal : tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>
  %dqr = ds.rotary %g#0 theta 1.000000e+04 inverse : tensor<2x3x8x4xf32>
  %dq = ds.transpose %dqr [0, 2, 1, 3] : tensor<2x3x8x4xf32> -> tensor<2x8x3x4xf32>
  %dkr = ds.rotary %g#1 theta 1.000000e+04 inverse : tensor<2x3x8x4xf32>
  %dk = ds.transpose %dkr [0, 2, 1, 3] : tensor<2x3x8x4xf32> -> tensor<2x8x3x4xf32>
  %dv = ds.transpose %g#2 [0, 2, 1, 3] : tensor<2x3x8x4xf32> -> tensor<2x8x3x4xf32>
  return %ot, %dq, %dk, %dv : tensor<2x8x3x4xf32>, tensor<2x8x3x4xf32>, tensor<2x8x3x4xf32>, tensor<2x8x3x4xf32>
}

// Left as they are: an operand that is not a transpose, a result read
// other than through the transpose back, and a transpose with a
// recomputation's mark the attention lacks.
// CHECK-LABEL: func.func @kept(
// CHECK-NOT:     seq_major
// CHECK:         return
func.func @kept(%q: tensor<2x8x3x4xf32>, %q2: tensor<2x3x8x4xf32>) -> (tensor<2x8x3x4xf32>, tensor<2x3x8x4xf32>, tensor<2x8x3x4xf32>) {
  %qt = ds.transpose %q [0, 2, 1, 3] : tensor<2x8x3x4xf32> -> tensor<2x3x8x4xf32>
  %a = ds.attention %q2, %qt, %qt scale 0.5 : tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32> -> tensor<2x3x8x4xf32>
  %at = ds.transpose %a [0, 2, 1, 3] : tensor<2x3x8x4xf32> -> tensor<2x8x3x4xf32>
  %b = ds.attention %qt, %qt, %qt scale 0.5 : tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32> -> tensor<2x3x8x4xf32>
  %bt = ds.transpose %b [0, 2, 1, 3] : tensor<2x3x8x4xf32> -> tensor<2x8x3x4xf32>
  %qr = ds.transpose %q [0, 2, 1, 3] {ds.recompute} : tensor<2x8x3x4xf32> -> tensor<2x3x8x4xf32>
  %c = ds.attention %qr, %qr, %qr scale 0.5 : tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32> -> tensor<2x3x8x4xf32>
  %ct = ds.transpose %c [0, 2, 1, 3] : tensor<2x3x8x4xf32> -> tensor<2x8x3x4xf32>
  %s = ds.add %at, %ct : tensor<2x8x3x4xf32>, tensor<2x8x3x4xf32>
  return %s, %b, %bt : tensor<2x8x3x4xf32>, tensor<2x3x8x4xf32>, tensor<2x8x3x4xf32>
}
