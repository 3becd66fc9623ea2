// RUN: ds-opt %s -ds-fuse | FileCheck %s
// A matmul read only by a bias add becomes ds.matmul_bias; one read only by
// bias + gelu becomes ds.matmul_bias_gelu, which also returns the
// pre-activation. The fused op takes the consumer's place.

ds.variable param @w : tensor<8x4xf32> init ones
ds.variable param @b : tensor<8xf32> init zeros

// CHECK-LABEL: func.func @micro_step(
// CHECK-SAME:    %[[X:.*]]: tensor<2x3x4xf32>)
func.func @micro_step(%x: tensor<2x3x4xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  // CHECK:      %[[W:.*]] = ds.load @w
  // CHECK-NEXT: %[[B:.*]] = ds.load @b
  // CHECK-NEXT: %[[Y:.*]] = ds.matmul_bias %[[X]], %[[W]], %[[B]] {transpose_rhs} : tensor<2x3x4xf32>, tensor<8x4xf32>, tensor<8xf32> -> tensor<2x3x8xf32>
  %w = ds.load @w : tensor<8x4xf32>
  %m = ds.matmul %x, %w {transpose_rhs} : tensor<2x3x4xf32>, tensor<8x4xf32> -> tensor<2x3x8xf32>
  %b = ds.load @b : tensor<8xf32>
  %y = ds.add %m, %b : tensor<2x3x8xf32>, tensor<8xf32>
  // CHECK-NEXT: %[[W2:.*]] = ds.load @w
  // CHECK-NEXT: %[[B2:.*]] = ds.load @b
  // CHECK-NEXT: %[[SUM:.*]], %[[G:.*]] = ds.matmul_bias_gelu tanh %[[X]], %[[W2]], %[[B2]] {transpose_rhs} : tensor<2x3x4xf32>, tensor<8x4xf32>, tensor<8xf32> -> tensor<2x3x8xf32>, tensor<2x3x8xf32>
  %w2 = ds.load @w : tensor<8x4xf32>
  %m2 = ds.matmul %x, %w2 {transpose_rhs} : tensor<2x3x4xf32>, tensor<8x4xf32> -> tensor<2x3x8xf32>
  %b2 = ds.load @b : tensor<8xf32>
  %s = ds.add %m2, %b2 : tensor<2x3x8xf32>, tensor<8xf32>
  %g = ds.gelu tanh %s : tensor<2x3x8xf32>
  // CHECK-NOT: ds.matmul
  // CHECK: return %[[Y]], %[[SUM]], %[[G]]
  return %y, %s, %g : tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>
}

// The product is read twice, the bias is not along the last dim, or the
// add is a recomputation while the matmul is not: the matmul stays.
// CHECK-LABEL: func.func @apply
// CHECK-NOT:   ds.matmul_bias
// CHECK:       return
func.func @apply(%x: tensor<2x3x4xf32>, %c: tensor<2x3x1xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  %w = ds.load @w : tensor<8x4xf32>
  %b = ds.load @b : tensor<8xf32>
  %m = ds.matmul %x, %w {transpose_rhs} : tensor<2x3x4xf32>, tensor<8x4xf32> -> tensor<2x3x8xf32>
  %y = ds.add %m, %b : tensor<2x3x8xf32>, tensor<8xf32>
  %m2 = ds.matmul %x, %w {transpose_rhs} : tensor<2x3x4xf32>, tensor<8x4xf32> -> tensor<2x3x8xf32>
  %y2 = ds.add %m2, %c : tensor<2x3x8xf32>, tensor<2x3x1xf32>
  %m3 = ds.matmul %x, %w {transpose_rhs} : tensor<2x3x4xf32>, tensor<8x4xf32> -> tensor<2x3x8xf32>
  %y3 = ds.add %m3, %b {ds.recompute} : tensor<2x3x8xf32>, tensor<8xf32>
  return %m, %y, %y2, %y3 : tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>
}

// A recomputed matmul and its recomputed bias add fuse, keeping the mark.
// CHECK-LABEL: func.func @recompute
// CHECK:       ds.matmul_bias {{.*}} {ds.recompute, transpose_rhs}
func.func @recompute(%x: tensor<2x3x4xf32>) -> tensor<2x3x8xf32> {
  %w = ds.load @w : tensor<8x4xf32>
  %b = ds.load @b : tensor<8xf32>
  %m = ds.matmul %x, %w {ds.recompute, transpose_rhs} : tensor<2x3x4xf32>, tensor<8x4xf32> -> tensor<2x3x8xf32>
  %y = ds.add %m, %b {ds.recompute} : tensor<2x3x8xf32>, tensor<8xf32>
  return %y : tensor<2x3x8xf32>
}

// The backward of the GELU and its bias: matmul, gelu_grad and the row sum
// become ds.matmul_gelu_grad; the gradient keeps its other readers.
// CHECK-LABEL: func.func @backward(
// CHECK-SAME:    %[[DY:.*]]: tensor<2x3x4xf32>, %[[PRE:.*]]: tensor<2x3x8xf32>)
// CHECK:       %[[W:.*]] = ds.load @w
// CHECK-NEXT:  %[[G:.*]], %[[DB:.*]] = ds.matmul_gelu_grad tanh %[[DY]], %[[W]], %[[PRE]] {transpose_rhs} : tensor<2x3x4xf32>, tensor<8x4xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>, tensor<8xf32>
// CHECK-NEXT:  %[[N:.*]] = ds.neg %[[G]]
// CHECK-NEXT:  return %[[N]], %[[DB]]
func.func @backward(%dy: tensor<2x3x4xf32>, %pre: tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<8xf32>) {
  %w = ds.load @w : tensor<8x4xf32>
  %m = ds.matmul %dy, %w {transpose_rhs} : tensor<2x3x4xf32>, tensor<8x4xf32> -> tensor<2x3x8xf32>
  %g = ds.gelu_grad tanh %pre, %m : tensor<2x3x8xf32>
  %db = ds.reduce_sum %g axes [0, 1] : tensor<2x3x8xf32> -> tensor<8xf32>
  %n = ds.neg %g : tensor<2x3x8xf32>
  return %n, %db : tensor<2x3x8xf32>, tensor<8xf32>
}

// A sum that keeps a leading dim is not a bias gradient.
// CHECK-LABEL: func.func @backward_partial
// CHECK-NOT:   ds.matmul_gelu_grad
// CHECK:       return
func.func @backward_partial(%dy: tensor<2x3x4xf32>, %pre: tensor<2x3x8xf32>) -> tensor<3x8xf32> {
  %w = ds.load @w : tensor<8x4xf32>
  %m = ds.matmul %dy, %w {transpose_rhs} : tensor<2x3x4xf32>, tensor<8x4xf32> -> tensor<2x3x8xf32>
  %g = ds.gelu_grad tanh %pre, %m : tensor<2x3x8xf32>
  %db = ds.reduce_sum %g axes [0] : tensor<2x3x8xf32> -> tensor<3x8xf32>
  return %db : tensor<3x8xf32>
}
