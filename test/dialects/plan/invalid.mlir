// RUN: ds-opt %s -split-input-file -verify-diagnostics

// A plan.call is held to its kernel's contract (KernelContract.h, generated
// from the kernel's ODS): the kernel exists, its arity, its attribute
// counts, and one of its dtype variants.

plan.storage @x "x" <activations> <device> size 64 transient
func.func @f() {
  %x = plan.buffer @x : memref<4xf32>
  // expected-error @+1 {{'plan.call' op no kernel 'ds.swirl' is declared}}
  plan.call "ds.swirl"(%x) -> (%x) ints [] floats [] on <compute> : (memref<4xf32>) -> memref<4xf32>
  return
}

// -----

plan.storage @x "x" <activations> <device> size 64 transient
func.func @f() {
  %x = plan.buffer @x : memref<4xf32>
  // expected-error @+1 {{'plan.call' op ds.add takes 2 inputs, got 1}}
  plan.call "ds.add"(%x) -> (%x) ints [] floats [] on <compute> : (memref<4xf32>) -> memref<4xf32>
  return
}

// -----

plan.storage @x "x" <activations> <device> size 64 transient
func.func @f() {
  %x = plan.buffer @x : memref<4x4xf32>
  // expected-error @+1 {{'plan.call' op ds.matmul takes 2 int attributes, got 1}}
  plan.call "ds.matmul"(%x, %x) -> (%x) ints [0] floats [] on <compute> : (memref<4x4xf32>, memref<4x4xf32>) -> memref<4x4xf32>
  return
}

// -----

plan.storage @x "x" <activations> <device> size 64 transient
func.func @f() {
  %x = plan.buffer @x : memref<4xf32>
  // expected-error @+1 {{'plan.call' op ds.rms_norm takes 1 float attribute, got 0}}
  plan.call "ds.rms_norm"(%x, %x) -> (%x) ints [] floats [] on <compute> : (memref<4xf32>, memref<4xf32>) -> memref<4xf32>
  return
}

// -----

plan.storage @a "a" <activations> <device> size 32 transient
plan.storage @b "b" <activations> <device> size 64 transient
func.func @f() {
  %a = plan.buffer @a : memref<4x4xbf16>
  %b = plan.buffer @b : memref<4x4xf32>
  // expected-error @+1 {{'plan.call' op ds.matmul has no variant for bf16,f32->f32 (it has f32,f32->f32, bf16,bf16->bf16|f32, f16,f16->f16|f32)}}
  plan.call "ds.matmul"(%a, %b) -> (%b) ints [0, 0] floats [] on <compute> : (memref<4x4xbf16>, memref<4x4xf32>) -> memref<4x4xf32>
  return
}

// -----

// Storage and its views.

// expected-error @+1 {{'plan.storage' op offset must be >= 0, got -64}}
plan.storage @x "x" <params> <device> size 16 at -64

// -----

// expected-error @+1 {{'plan.storage' op size must be >= 0, got -1}}
plan.storage @x "x" <params> <device> size -1 at 0

// -----

plan.storage @x "x" <params> <device> size 16 at 0
func.func @f() {
  // expected-error @+1 {{'plan.buffer' op view offset must be >= 0, got -4}}
  %x = plan.buffer @x + -4 : memref<4xf32>
  return
}

// -----

plan.storage @x "x" <params> <device> size 16 at 0
func.func @f() {
  // expected-error @+1 {{'plan.buffer' op needs a static shape and the identity layout, got 'memref<?xf32>'}}
  %x = plan.buffer @x : memref<?xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{'plan.buffer' op no plan.storage @nowhere}}
  %x = plan.buffer @nowhere : memref<4xf32>
  return
}

// -----

// expected-error @+1 {{'plan.variable' op no plan.storage @w}}
plan.variable "w" <param> in @w : memref<4xf32> init <zeros> std 0.0 rng 0 shape [4]

// -----

// expected-error @+1 {{'plan.storage' op persistent storage needs an offset (`at N`); only transient storage is placed by plan-place}}
plan.storage @w "w" <params> <device> size 64
