// RUN: ds-opt %s -split-input-file -ds-overlap-collectives | FileCheck %s

// Ulysses' exchanges as ds-ulysses writes them: each all-to-all started
// and waited for in place, right before the op that needs it. After the
// pass q's exchange starts as soon as q exists and runs under k's GEMM;
// each wait, with the reshape that only it feeds, stands right before the
// first op that reads them.
// CHECK-LABEL: func.func @exchanges
// CHECK:      %[[Q:.*]] = ds.matmul %arg0, %arg1
// CHECK-NEXT: %[[QF:.*]] = ds.reshape %[[Q]]
// CHECK-NEXT: %[[QS:.*]] = dist.all_to_all %[[QF]] ranks 2
// CHECK-NEXT: %[[K:.*]] = ds.matmul %arg0, %arg2
// CHECK-NEXT: %[[KF:.*]] = ds.reshape %[[K]]
// CHECK-NEXT: %[[KS:.*]] = dist.all_to_all %[[KF]] ranks 2
// CHECK-NEXT: %[[QW:.*]] = dist.wait %[[QS]]
// CHECK-NEXT: %[[QB:.*]] = ds.reshape %[[QW]]
// CHECK-NEXT: %[[QT:.*]] = ds.transpose %[[QB]] [1, 0]
// CHECK-NEXT: %[[KW:.*]] = dist.wait %[[KS]]
// CHECK-NEXT: %[[KB:.*]] = ds.reshape %[[KW]]
// CHECK-NEXT: %[[S:.*]] = ds.add %[[QT]], %[[KB]]
// CHECK-NEXT: return %[[S]]
func.func @exchanges(%x: tensor<4x8xf32>, %wq: tensor<8x8xf32>, %wk: tensor<8x8xf32>) -> tensor<8x4xf32> {
  %q = ds.matmul %x, %wq : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %k = ds.matmul %x, %wk : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %qf = ds.reshape %q : tensor<4x8xf32> -> tensor<32xf32>
  %qs = dist.all_to_all %qf ranks 2 {dist.tensor_group} : tensor<32xf32>
  %qw = dist.wait %qs : tensor<32xf32>
  %qb = ds.reshape %qw : tensor<32xf32> -> tensor<4x8xf32>
  %kf = ds.reshape %k : tensor<4x8xf32> -> tensor<32xf32>
  %ks = dist.all_to_all %kf ranks 2 {dist.tensor_group} : tensor<32xf32>
  %kw = dist.wait %ks : tensor<32xf32>
  %kb = ds.reshape %kw : tensor<32xf32> -> tensor<8x4xf32>
  %qt = ds.transpose %qb [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %s = ds.add %qt, %kb : tensor<8x4xf32>, tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// -----

// A column-parallel layer's input gradient as autodiff leaves it: the
// parts' sum (and its all-reduce) after the weight gradients. The sum
// moves up to just after its parts and the all-reduce with it; the weight
// gradient runs under it; the data group's collectives are left alone.
// CHECK-LABEL: func.func @input_gradient
// CHECK:      %[[A:.*]] = ds.matmul %arg0, %arg1
// CHECK-NEXT: %[[B:.*]] = ds.matmul %arg0, %arg2
// CHECK-NEXT: %[[SUM:.*]] = ds.add %[[A]], %[[B]]
// CHECK-NEXT: %[[R:.*]] = dist.all_reduce %[[SUM]] scale 1.000000e+00 {dist.tensor_group}
// CHECK-NEXT: %[[DW:.*]] = ds.matmul %arg0, %arg0 {transpose_lhs}
// CHECK-NEXT: %[[D:.*]] = dist.all_reduce %[[DW]] scale 5.000000e-01 :
// CHECK-NEXT: dist.wait %[[D]]
// CHECK-NEXT: %[[RW:.*]] = dist.wait %[[R]]
// CHECK-NEXT: return
func.func @input_gradient(%dy: tensor<4x4xf32>, %wq: tensor<4x4xf32>, %wk: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %a = ds.matmul %dy, %wq : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %b = ds.matmul %dy, %wk : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %dw = ds.matmul %dy, %dy {transpose_lhs} : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %d = dist.all_reduce %dw scale 5.000000e-01 : tensor<4x4xf32>
  %dd = dist.wait %d : tensor<4x4xf32>
  %sum = ds.add %a, %b : tensor<4x4xf32>, tensor<4x4xf32>
  %r = dist.all_reduce %sum scale 1.000000e+00 {dist.tensor_group} : tensor<4x4xf32>
  %rw = dist.wait %r : tensor<4x4xf32>
  return %rw, %dd : tensor<4x4xf32>, tensor<4x4xf32>
}
