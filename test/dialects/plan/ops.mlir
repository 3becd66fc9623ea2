// RUN: ds-opt %s | ds-opt | FileCheck %s

// Buffers in arenas, before and after placement, and kernel calls on
// streams; every call matches a variant of its kernel's contract.

// CHECK-LABEL: func.func @step
func.func @step() {
  // CHECK: plan.buffer "x" <inputs> <device> : memref<2x16xf32>
  %x = plan.buffer "x" <inputs> <device> : memref<2x16xf32>
  // CHECK: plan.buffer "w" <params> <device> at 0 : memref<16x16xf32>
  %w = plan.buffer "w" <params> <device> at 0 : memref<16x16xf32>
  %y = plan.buffer "y" <activations> <device> at 128 : memref<2x16xf32>
  %h = plan.buffer "y16" <activations> <device> : memref<2x16xbf16>
  %ids = plan.buffer "ids" <inputs> <host> : memref<2xi32>
  // CHECK: plan.call "ds.matmul"(%{{.*}}, %{{.*}}) -> (%{{.*}}) ints [0, 1] floats [] on <compute> : memref<2x16xf32>, memref<16x16xf32> -> memref<2x16xf32>
  plan.call "ds.matmul"(%x, %w) -> (%y) ints [0, 1] floats [] on <compute> : memref<2x16xf32>, memref<16x16xf32> -> memref<2x16xf32>
  // An in-place elementwise call, a 16-bit one, a collective, a variadic one.
  plan.call "ds.add"(%y, %x) -> (%y) ints [] floats [] on <compute> : memref<2x16xf32>, memref<2x16xf32> -> memref<2x16xf32>
  plan.call "ds.swiglu"(%h, %y) -> (%h) ints [] floats [] on <compute> : memref<2x16xbf16>, memref<2x16xf32> -> memref<2x16xbf16>
  // CHECK: plan.call "comm.all_reduce"{{.*}} floats [5.000000e-01] on <comm>
  plan.call "comm.all_reduce"(%y) -> (%y) ints [] floats [0.5] on <comm> : memref<2x16xf32> -> memref<2x16xf32>
  plan.call "ds.layer_norm"(%x, %w) -> (%y) ints [] floats [1.0e-5] on <compute> : memref<2x16xf32>, memref<16x16xf32> -> memref<2x16xf32>
  plan.call "ds.copy"(%ids) -> (%ids) ints [] floats [] on <h2d> : memref<2xi32> -> memref<2xi32>
  return
}
