// RUN: ds-opt %s | ds-opt | FileCheck %s
// Every dist op round-trips through its assembly format.

ds.variable param @w : tensor<6xf32> init zeros
// CHECK: dist.group @g [@w] size 8
dist.group @g [@w] size 8

// CHECK-LABEL: func @collectives
func.func @collectives(%x: tensor<8xf32>) -> tensor<8xf32> {
  // CHECK: %[[A:.*]] = dist.all_reduce %{{.*}} scale 5.000000e-01 : tensor<8xf32>
  %a = dist.all_reduce %x scale 0.5 : tensor<8xf32>
  // CHECK: %[[W:.*]] = dist.wait %[[A]] : tensor<8xf32>
  %w = dist.wait %a : tensor<8xf32>
  // CHECK: dist.reduce_scatter %[[W]] scale 1.000000e+00 ranks 2 : tensor<8xf32> -> tensor<4xf32>
  %r = dist.reduce_scatter %w scale 1.0 ranks 2 : tensor<8xf32> -> tensor<4xf32>
  // CHECK: dist.all_gather %{{.*}} ranks 2 : tensor<4xf32> -> tensor<8xf32>
  %g = dist.all_gather %r ranks 2 : tensor<4xf32> -> tensor<8xf32>
  // CHECK: dist.all_to_all %{{.*}} ranks 2 : tensor<8xf32>
  %t = dist.all_to_all %g ranks 2 : tensor<8xf32>
  // CHECK: dist.shard %{{.*}} ranks 4 : tensor<8xf32> -> tensor<2xf32>
  %s = dist.shard %g ranks 4 : tensor<8xf32> -> tensor<2xf32>
  // CHECK: dist.flat_params @g : tensor<8xf32>
  %p = dist.flat_params @g : tensor<8xf32>
  // CHECK: dist.flat_grads @g : tensor<8xf32>
  %q = dist.flat_grads @g : tensor<8xf32>
  // CHECK: dist.store_params %{{.*}}, @g : tensor<8xf32>
  dist.store_params %p, @g : tensor<8xf32>
  return %q : tensor<8xf32>
}
