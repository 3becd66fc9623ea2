// RUN: ds-opt %s | ds-opt | FileCheck %s

// Storage in arenas, before and after placement, its views, the variables
// that live in it, and kernel calls on streams; every call matches a
// variant of its kernel's contract.

// CHECK: plan.storage @x "x" <inputs> <device> size 128 at 0
plan.storage @x "x" <inputs> <device> size 128 at 0
// CHECK: plan.storage @w "w" <params> <device> size 1024 at 0
plan.storage @w "w" <params> <device> size 1024 at 0
// CHECK: plan.storage @y "y" <activations> <device> size 128 transient
plan.storage @y "y" <activations> <device> size 128 transient
plan.storage @h "y16" <activations> <device> size 64 at 128 transient
plan.storage @ids "ids" <inputs> <host> size 8 at 0
// CHECK: plan.variable "w" <param> in @w : memref<16x16xf32> init <normal> std 2.000000e-02 rng 7 shape [16, 16] decay
plan.variable "w" <param> in @w : memref<16x16xf32> init <normal> std 0.02 rng 7 shape [16, 16] decay
// CHECK: plan.variable "w.exp_avg" <opt_state> of "w" in @w : memref<16x16xf32> init <zeros> std 0.000000e+00 rng 9 shape [16, 16] shard at 256
plan.variable "w.exp_avg" <opt_state> of "w" in @w : memref<16x16xf32> init <zeros> std 0.0 rng 9 shape [16, 16] shard at 256

// CHECK-LABEL: func.func @step
func.func @step() {
  // CHECK: plan.buffer @x : memref<2x16xf32>
  %x = plan.buffer @x : memref<2x16xf32>
  // CHECK: plan.buffer @w + 64 : memref<16xf32>
  %wrow = plan.buffer @w + 64 : memref<16xf32>
  %w = plan.buffer @w : memref<16x16xf32>
  %y = plan.buffer @y : memref<2x16xf32>
  %h = plan.buffer @h : memref<2x16xbf16>
  %ids = plan.buffer @ids : memref<2xi32>
  // CHECK: plan.constant @ids = dense<[0, 1]> : tensor<2xi32> : memref<2xi32>
  %c = plan.constant @ids = dense<[0, 1]> : tensor<2xi32> : memref<2xi32>
  // CHECK: plan.inputs %{{.*}} : memref<2x16xf32>
  plan.inputs %x : memref<2x16xf32>
  // CHECK: plan.call "ds.matmul"(%{{.*}}, %{{.*}}) -> (%{{.*}}) ints [0, 1] floats [] on <compute> : (memref<2x16xf32>, memref<16x16xf32>) -> memref<2x16xf32>
  plan.call "ds.matmul"(%x, %w) -> (%y) ints [0, 1] floats [] on <compute> : (memref<2x16xf32>, memref<16x16xf32>) -> memref<2x16xf32>
  // An in-place elementwise call, a 16-bit one, a collective, a variadic one.
  plan.call "ds.add"(%y, %x) -> (%y) ints [] floats [] on <compute> : (memref<2x16xf32>, memref<2x16xf32>) -> memref<2x16xf32>
  plan.call "ds.swiglu"(%h, %y) -> (%h) ints [] floats [] on <compute> : (memref<2x16xbf16>, memref<2x16xf32>) -> memref<2x16xbf16>
  // CHECK: plan.call "comm.all_reduce"{{.*}} floats [5.000000e-01] on <comm>
  plan.call "comm.all_reduce"(%y) -> (%y) ints [] floats [0.5] on <comm> : (memref<2x16xf32>) -> memref<2x16xf32>
  plan.call "ds.layer_norm"(%x, %w) -> (%y) ints [] floats [1.0e-5] on <compute> : (memref<2x16xf32>, memref<16x16xf32>) -> memref<2x16xf32>
  // CHECK: plan.call "ds.copy"{{.*}} on <h2d> wait [1] record [2, 3]
  plan.call "ds.copy"(%ids) -> (%ids) ints [] floats [] on <h2d> wait [1] record [2, 3] : (memref<2xi32>) -> memref<2xi32>
  // CHECK: plan.call "ds.fill"() -> (%{{.*}}) ints [] floats [0.000000e+00] on <compute> in <host>
  plan.call "ds.fill"() -> (%ids) ints [] floats [0.0] on <compute> in <host> : () -> memref<2xi32>
  // Before plan-insert-events: an asynchronous call's token and its await.
  // CHECK: %[[T:.*]] = plan.call "comm.all_gather"{{.*}} on <comm> : (memref<16xf32>) -> memref<2x16xf32> async !plan.token
  // CHECK-NEXT: plan.await %[[T]]
  %t = plan.call "comm.all_gather"(%wrow) -> (%y) ints [] floats [] on <comm> : (memref<16xf32>) -> memref<2x16xf32> async !plan.token
  plan.await %t
  // CHECK: plan.outputs %{{.*}}, %{{.*}} : memref<2x16xf32>, memref<2xi32>
  plan.outputs %y, %c : memref<2x16xf32>, memref<2xi32>
  return
}
