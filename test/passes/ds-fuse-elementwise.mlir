// RUN: ds-opt %s -ds-fuse-elementwise | FileCheck %s
// RUN: ds-opt %s -ds-fuse-elementwise=enabled=false | FileCheck %s --check-prefix=OFF
// Elementwise chains become one ds.fused_elementwise at the chain's last
// op; a value read outside the group is a result, one read only inside is
// not. @forward is left alone.

// OFF-NOT: ds.fused_elementwise

// CHECK-LABEL: func.func @forward
// CHECK-NOT:   ds.fused_elementwise
func.func @forward(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %a = ds.exp %x : tensor<2x8xf32>
  %b = ds.neg %a : tensor<2x8xf32>
  return %b : tensor<2x8xf32>
}

// SwiGLU's forward: silu(gate) is kept (the backward reads it), the product
// is the other result.
// CHECK-LABEL: func.func @swiglu_forward(
// CHECK-SAME:    %[[G:.*]]: tensor<4x8xbf16>, %[[U:.*]]: tensor<4x8xbf16>)
// CHECK-NEXT:    %[[F:.*]]:2 = ds.fused_elementwise %[[G]], %[[U]] : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>) {
// CHECK-NEXT:    ^bb0(%[[A0:.*]]: tensor<4x8xbf16>, %[[A1:.*]]: tensor<4x8xbf16>):
// CHECK-NEXT:      %[[S:.*]] = ds.silu %[[A0]]
// CHECK-NEXT:      %[[P:.*]] = ds.mul %[[S]], %[[A1]]
// CHECK-NEXT:      ds.yield %[[S]], %[[P]] : tensor<4x8xbf16>, tensor<4x8xbf16>
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[F]]#1, %[[F]]#0
func.func @swiglu_forward(%gate: tensor<4x8xbf16>, %up: tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>) {
  %s = ds.silu %gate : tensor<4x8xbf16>
  %p = ds.mul %s, %up : tensor<4x8xbf16>, tensor<4x8xbf16>
  return %p, %s : tensor<4x8xbf16>, tensor<4x8xbf16>
}

// SwiGLU's backward: the two products read one g (a group that reads an
// input already takes the next reader of it), the first feeds silu_grad
// and is not a result.
// CHECK-LABEL: func.func @swiglu_backward(
// CHECK-SAME:    %[[G:[^:]*]]: tensor<4x8xf32>, %[[UP:[^:]*]]: tensor<4x8xf32>, %[[S:[^:]*]]: tensor<4x8xf32>, %[[GATE:[^:]*]]: tensor<4x8xf32>)
// CHECK-NEXT:    %[[F:.*]]:2 = ds.fused_elementwise %[[G]], %[[UP]], %[[S]], %[[GATE]]
// CHECK-NEXT:    ^bb0(%[[A0:[^:]*]]: tensor<4x8xf32>, %[[A1:[^:]*]]: tensor<4x8xf32>, %[[A2:[^:]*]]: tensor<4x8xf32>, %[[A3:[^:]*]]: tensor<4x8xf32>):
// CHECK-NEXT:      %[[M1:.*]] = ds.mul %[[A0]], %[[A1]]
// CHECK-NEXT:      %[[M2:.*]] = ds.mul %[[A0]], %[[A2]]
// CHECK-NEXT:      %[[DG:.*]] = ds.silu_grad %[[A3]], %[[M1]]
// CHECK-NEXT:      ds.yield %[[M2]], %[[DG]]
// CHECK:         return %[[F]]#1, %[[F]]#0
func.func @swiglu_backward(%g: tensor<4x8xf32>, %up: tensor<4x8xf32>, %s: tensor<4x8xf32>, %gate: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %m1 = ds.mul %g, %up : tensor<4x8xf32>, tensor<4x8xf32>
  %m2 = ds.mul %g, %s : tensor<4x8xf32>, tensor<4x8xf32>
  %dg = ds.silu_grad %gate, %m1 : tensor<4x8xf32>
  return %dg, %m2 : tensor<4x8xf32>, tensor<4x8xf32>
}

// A bias along the last dims and a scalar are inputs, broadcast in the
// group; a [4, 1] operand is not its trailing dims, so that add stays out.
// CHECK-LABEL: func.func @broadcast_inputs(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4x8xf32>, %[[B:[^:]*]]: tensor<8xf32>, %[[C:[^:]*]]: tensor<f32>, %[[COL:[^:]*]]: tensor<4x1xf32>)
// CHECK-NEXT:    %[[COLSUM:.*]] = ds.add %[[X]], %[[COL]]
// CHECK-NEXT:    %[[F:.*]] = ds.fused_elementwise %[[COLSUM]], %[[B]], %[[C]] : (tensor<4x8xf32>, tensor<8xf32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK:           ds.add
// CHECK-NEXT:      ds.mul
// CHECK-NEXT:      ds.relu
// CHECK-NEXT:      ds.yield
// CHECK:         return %[[F]]
func.func @broadcast_inputs(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %c: tensor<f32>, %col: tensor<4x1xf32>) -> tensor<4x8xf32> {
  %0 = ds.add %x, %col : tensor<4x8xf32>, tensor<4x1xf32>
  %1 = ds.add %0, %b : tensor<4x8xf32>, tensor<8xf32>
  %2 = ds.mul %1, %c : tensor<4x8xf32>, tensor<f32>
  %3 = ds.relu %2 : tensor<4x8xf32>
  return %3 : tensor<4x8xf32>
}

// The fused op would stand at ds.neg, after the reduction that reads exp's
// result (a max, which no group holds): that join is refused, and each op
// stays itself.
// CHECK-LABEL: func.func @reader_in_between
// CHECK-NOT:   ds.fused_elementwise
// CHECK:       ds.exp
// CHECK-NEXT:  ds.reduce_max
// CHECK-NEXT:  ds.neg
func.func @reader_in_between(%x: tensor<4x8xf32>) -> (tensor<f32>, tensor<4x8xf32>) {
  %a = ds.exp %x : tensor<4x8xf32>
  %r = ds.reduce_max %a axes [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %b = ds.neg %a : tensor<4x8xf32>
  return %r, %b : tensor<f32>, tensor<4x8xf32>
}

// The gradient norm's terms: a square summed over every dim joins the
// square's group, which then never writes the squares (one op of one
// result, the sum); the scalar adds of the partial sums stay themselves.
// A whole sum over dims [0, 1] of a [4, 8, 1] value, and one that keeps
// the squares, join too; a column sum, a sum over trailing dims and a
// keepdim sum do not; an op that reads a group's sum stays out of it.
// CHECK-LABEL: func.func @sums
// CHECK-NEXT:  %[[N:.*]] = ds.fused_elementwise %arg0 : (tensor<4x8xf32>) -> tensor<f32>
// CHECK-NEXT:  ^bb0(%[[A:.*]]: tensor<4x8xf32>):
// CHECK-NEXT:    %[[Q:.*]] = ds.mul %[[A]], %[[A]] : tensor<4x8xf32>, tensor<4x8xf32>
// CHECK-NEXT:    %[[S:.*]] = ds.reduce_sum %[[Q]] axes [0, 1] : tensor<4x8xf32> -> tensor<f32>
// CHECK-NEXT:    ds.yield %[[S]] : tensor<f32>
// CHECK-NEXT:  }
// CHECK-NEXT:  %[[M:.*]]:2 = ds.fused_elementwise %arg1 : (tensor<4x8x1xbf16>) -> (tensor<4x8x1xf32>, tensor<1xf32>) {
// CHECK-NEXT:  ^bb0
// CHECK-NEXT:    ds.cast
// CHECK-NEXT:    ds.mul
// CHECK-NEXT:    ds.reduce_sum %{{.*}} axes [0, 1] : tensor<4x8x1xf32> -> tensor<1xf32>
// CHECK-NEXT:    ds.yield
// CHECK-NEXT:  }
// CHECK-NEXT:  %[[M0:.*]] = ds.reshape %[[M]]#1 : tensor<1xf32> -> tensor<f32>
// CHECK-NEXT:  ds.add %[[N]], %[[M0]] : tensor<f32>, tensor<f32>
// CHECK-NEXT:  ds.neg %arg0
// CHECK-NEXT:  ds.reduce_sum %{{.*}} axes [0] : tensor<4x8xf32> -> tensor<8xf32>
// CHECK-NEXT:  ds.exp %arg0
// CHECK-NEXT:  ds.reduce_sum %{{.*}} axes [1] : tensor<4x8xf32> -> tensor<4xf32>
// CHECK-NEXT:  ds.relu %arg0
// CHECK-NEXT:  ds.reduce_sum %{{.*}} axes [0, 1] keepdim : tensor<4x8xf32> -> tensor<1x1xf32>
// CHECK-NEXT:  %[[T:.*]]:2 = ds.fused_elementwise %arg0 : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<f32>) {
// CHECK-NEXT:  ^bb0
// CHECK-NEXT:    ds.tanh
// CHECK-NEXT:    ds.reduce_sum
// CHECK-NEXT:    ds.yield
// CHECK-NEXT:  }
// CHECK-NEXT:  ds.mul %[[T]]#0, %[[T]]#1 : tensor<4x8xf32>, tensor<f32>
// CHECK-NEXT:  return
func.func @sums(%g: tensor<4x8xf32>, %h: tensor<4x8x1xbf16>) -> (tensor<f32>, tensor<4x8x1xf32>, tensor<8xf32>, tensor<4xf32>, tensor<1x1xf32>, tensor<4x8xf32>) {
  %sq = ds.mul %g, %g : tensor<4x8xf32>, tensor<4x8xf32>
  %n = ds.reduce_sum %sq axes [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %w = ds.cast %h : tensor<4x8x1xbf16> -> tensor<4x8x1xf32>
  %w2 = ds.mul %w, %w : tensor<4x8x1xf32>, tensor<4x8x1xf32>
  %m = ds.reduce_sum %w2 axes [0, 1] : tensor<4x8x1xf32> -> tensor<1xf32>
  %m0 = ds.reshape %m : tensor<1xf32> -> tensor<f32>
  %total = ds.add %n, %m0 : tensor<f32>, tensor<f32>
  %a = ds.neg %g : tensor<4x8xf32>
  %ca = ds.reduce_sum %a axes [0] : tensor<4x8xf32> -> tensor<8xf32>
  %b = ds.exp %g : tensor<4x8xf32>
  %cb = ds.reduce_sum %b axes [1] : tensor<4x8xf32> -> tensor<4xf32>
  %c = ds.relu %g : tensor<4x8xf32>
  %cc = ds.reduce_sum %c axes [0, 1] keepdim : tensor<4x8xf32> -> tensor<1x1xf32>
  %d = ds.tanh %g : tensor<4x8xf32>
  %cd = ds.reduce_sum %d axes [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %e = ds.mul %d, %cd : tensor<4x8xf32>, tensor<f32>
  return %total, %w2, %ca, %cb, %cc, %e : tensor<f32>, tensor<4x8x1xf32>, tensor<8xf32>, tensor<4xf32>, tensor<1x1xf32>, tensor<4x8xf32>
}

// A recomputation groups only with recomputations, and the group keeps
// the mark (its body ops do not); f64 values are not held by a program.
// CHECK-LABEL: func.func @sides_and_types
// CHECK-NEXT:  %[[R:.*]] = ds.fused_elementwise %{{.*}} {ds.recompute} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:  ^bb0
// CHECK-NEXT:    ds.exp %{{.*}} : tensor<4x8xf32>
// CHECK-NEXT:    ds.neg %{{.*}} : tensor<4x8xf32>
// CHECK-NEXT:    ds.yield
// CHECK-NEXT:  }
// CHECK-NEXT:  ds.tanh %[[R]] : tensor<4x8xf32>
// CHECK-NEXT:  ds.exp %{{.*}} : tensor<4x8xf64>
// CHECK-NEXT:  ds.neg %{{.*}} : tensor<4x8xf64>
func.func @sides_and_types(%x: tensor<4x8xf32>, %d: tensor<4x8xf64>) -> (tensor<4x8xf32>, tensor<4x8xf64>) {
  %a = ds.exp %x {ds.recompute} : tensor<4x8xf32>
  %b = ds.neg %a {ds.recompute} : tensor<4x8xf32>
  %c = ds.tanh %b : tensor<4x8xf32>
  %e = ds.exp %d : tensor<4x8xf64>
  %f = ds.neg %e : tensor<4x8xf64>
  return %c, %f : tensor<4x8xf32>, tensor<4x8xf64>
}

// A store between the group and the joining op may overwrite what the group
// reads through a load: the join is refused, each op stays itself.
ds.variable param @v : tensor<4x8xf32> init zeros

// CHECK-LABEL: func.func @store_in_between
// CHECK-NOT:   ds.fused_elementwise
// CHECK:       ds.exp
// CHECK-NEXT:  ds.store
// CHECK-NEXT:  ds.neg
func.func @store_in_between(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %l = ds.load @v : tensor<4x8xf32>
  %a = ds.exp %l : tensor<4x8xf32>
  ds.store %x, @v : tensor<4x8xf32>
  %b = ds.neg %a : tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}
