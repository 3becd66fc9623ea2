// RUN: ds-opt %s -ds-eval | FileCheck %s
// @eval: @forward with dropout off, returning its logits beside the loss.
// Each @forward_sample_T (dsc's one-row copies of a built-in model) becomes
// @sample_T: dropout off, the loss and its targets gone. Where the logits
// are a head (a matmul, maybe plus a bias) over [1, T, C], the head runs on
// the one row the sampler reads, picked by a new position argument; other
// logits come back whole; a forward whose loss is no cross-entropy has no
// sampling program.

ds.variable param @emb : tensor<16x4xf32> init normal std 2.000000e-02
ds.variable param @bias : tensor<16xf32> init zeros

func.func @forward(%t: tensor<2x8xi32>, %y: tensor<2x8xi32>) -> tensor<f32> {
  %e = ds.load @emb : tensor<16x4xf32>
  %h = ds.embedding %e, %t : tensor<16x4xf32>, tensor<2x8xi32> -> tensor<2x8x4xf32>
  %d = ds.dropout %h rate 0.1 id 0 : tensor<2x8x4xf32>
  %z = ds.matmul %d, %e {transpose_rhs} : tensor<2x8x4xf32>, tensor<16x4xf32> -> tensor<2x8x16xf32>
  %l = ds.cross_entropy %z, %y : tensor<2x8x16xf32>, tensor<2x8xi32> -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @eval(%arg0: tensor<2x8xi32>, %arg1: tensor<2x8xi32>) -> (tensor<f32>, tensor<2x8x16xf32>)
// CHECK-NOT:   ds.dropout
// CHECK:       %[[L:.*]] = ds.cross_entropy %[[Z:.*]], %arg1
// CHECK-NEXT:  return %[[L]], %[[Z]] : tensor<f32>, tensor<2x8x16xf32>

// CHECK-LABEL: func.func @sample_8(%arg0: tensor<1x8xi32>, %arg1: tensor<1xi32>) -> tensor<1x1x16xf32>
// CHECK-NEXT:  %[[E:.*]] = ds.load @emb
// CHECK-NEXT:  %[[H:.*]] = ds.embedding %[[E]], %arg0 : tensor<16x4xf32>, tensor<1x8xi32> -> tensor<1x8x4xf32>
// CHECK-NEXT:  %[[B:.*]] = ds.load @bias
// CHECK-NEXT:  %[[TABLE:.*]] = ds.reshape %[[H]] : tensor<1x8x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT:  %[[ROW:.*]] = ds.embedding %[[TABLE]], %arg1 : tensor<8x4xf32>, tensor<1xi32> -> tensor<1x4xf32>
// CHECK-NEXT:  %[[ROW3:.*]] = ds.reshape %[[ROW]] : tensor<1x4xf32> -> tensor<1x1x4xf32>
// CHECK-NEXT:  %[[HEAD:.*]] = ds.matmul %[[ROW3]], %[[E]] {transpose_rhs} : tensor<1x1x4xf32>, tensor<16x4xf32> -> tensor<1x1x16xf32>
// CHECK-NEXT:  %[[Z1:.*]] = ds.add %[[HEAD]], %[[B]] : tensor<1x1x16xf32>, tensor<16xf32>
// CHECK-NEXT:  return %[[Z1]] : tensor<1x1x16xf32>
func.func @forward_sample_8(%t: tensor<1x8xi32>, %y: tensor<1x8xi32>) -> tensor<f32> {
  %e = ds.load @emb : tensor<16x4xf32>
  %h = ds.embedding %e, %t : tensor<16x4xf32>, tensor<1x8xi32> -> tensor<1x8x4xf32>
  %d = ds.dropout %h rate 0.1 id 0 : tensor<1x8x4xf32>
  %b = ds.load @bias : tensor<16xf32>
  %z = ds.matmul %d, %e {transpose_rhs} : tensor<1x8x4xf32>, tensor<16x4xf32> -> tensor<1x8x16xf32>
  %zb = ds.add %z, %b : tensor<1x8x16xf32>, tensor<16xf32>
  %l = ds.cross_entropy %zb, %y : tensor<1x8x16xf32>, tensor<1x8xi32> -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @sample_4(%arg0: tensor<1x4xi32>) -> tensor<1x4x16xf32>
// CHECK:       %[[Z2:.*]] = ds.matmul
// CHECK-NEXT:  %[[T2:.*]] = ds.tanh %[[Z2]]
// CHECK-NEXT:  return %[[T2]] : tensor<1x4x16xf32>
func.func @forward_sample_4(%t: tensor<1x4xi32>, %y: tensor<1x4xi32>) -> tensor<f32> {
  %e = ds.load @emb : tensor<16x4xf32>
  %h = ds.embedding %e, %t : tensor<16x4xf32>, tensor<1x4xi32> -> tensor<1x4x4xf32>
  %z = ds.matmul %h, %e {transpose_rhs} : tensor<1x4x4xf32>, tensor<16x4xf32> -> tensor<1x4x16xf32>
  %s = ds.tanh %z : tensor<1x4x16xf32>
  %l = ds.cross_entropy %s, %y : tensor<1x4x16xf32>, tensor<1x4xi32> -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-NOT: @forward_sample_2
// CHECK-NOT: @sample_2
func.func @forward_sample_2(%t: tensor<1x2xi32>, %y: tensor<1x2xi32>) -> tensor<f32> {
  %e = ds.load @emb : tensor<16x4xf32>
  %h = ds.embedding %e, %t : tensor<16x4xf32>, tensor<1x2xi32> -> tensor<1x2x4xf32>
  %l = ds.reduce_sum %h axes [0, 1, 2] : tensor<1x2x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
