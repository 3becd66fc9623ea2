// RUN: ds-opt %s --plan-liveness | FileCheck %s --check-prefix=LIVE
// RUN: ds-opt %s --plan-liveness --plan-place | FileCheck %s
// RUN: not ds-opt %s --plan-place 2>&1 | FileCheck %s --check-prefix=ORDER

// plan-liveness: a storage lives from the first to the last call that
// touches it, an output to the end of its program (6 calls: to 6), and
// what a call on another stream touches until the compute call that waits
// for its event (or to the end when none does).
// LIVE: plan.storage @w "w" <params> <device> size 64 at 0{{$}}
// LIVE: plan.storage @c "c" <activations> <device> size 64 transient live [0, 3]
// LIVE: plan.storage @g "g" <comm_buffers> <device> size 64 transient live [1, 3]
// LIVE: plan.storage @d "d" <activations> <device> size 64 transient live [2, 6]
// LIVE: plan.storage @b "b" <activations> <device> size 60 transient live [4, 4]
// LIVE: plan.storage @h "h" <activations> <host> size 64 transient live [5, 6]

// plan-place packs each program's transient storage by those lifetimes,
// greedy by size with first fit, one arena per memory space and category.
// ORDER: error: plan-place: transient storage 'c' has no lifetime; run plan-liveness first

module {
  // CHECK: module @plan attributes {plan.arenas = {activations = 128 : i64, "activations@host" = 64 : i64, comm_buffers = 64 : i64, params = 64 : i64}}
  module @plan attributes {plan.arenas = {params = 64 : i64}} {
    // CHECK: plan.storage @w "w" <params> <device> size 64 at 0
    plan.storage @w "w" <params> <device> size 64 at 0
    // c lives from call 0 to call 3, which waits for the all-reduce
    // reading it: d, from call 2 on, cannot have its bytes.
    // CHECK: plan.storage @c "c" <activations> <device> size 64 at 0 transient live [0, 3]
    plan.storage @c "c" <activations> <device> size 64 transient
    // CHECK: plan.storage @g "g" <comm_buffers> <device> size 64 at 0 transient
    plan.storage @g "g" <comm_buffers> <device> size 64 transient
    // CHECK: plan.storage @d "d" <activations> <device> size 64 at 64 transient
    plan.storage @d "d" <activations> <device> size 64 transient
    // b comes after c's last use: it takes c's bytes.
    // CHECK: plan.storage @b "b" <activations> <device> size 60 at 0 transient
    plan.storage @b "b" <activations> <device> size 60 transient
    // CHECK: plan.storage @h "h" <activations> <host> size 64 at 0 transient
    plan.storage @h "h" <activations> <host> size 64 transient
    // Its own peak in each transient arena (here the only program's: the
    // arenas' sizes).
    // CHECK: func.func @step() attributes {plan.activation_bytes = 128 : i64, plan.arena_peaks = {activations = 128 : i64, "activations@host" = 64 : i64, comm_buffers = 64 : i64}}
    func.func @step() {
      %w = plan.buffer @w : memref<16xf32>
      %c = plan.buffer @c : memref<16xf32>
      %g = plan.buffer @g : memref<16xf32>
      %d = plan.buffer @d : memref<16xf32>
      %b = plan.buffer @b : memref<15xf32>
      %h = plan.buffer @h : memref<16xf32>
      plan.inputs
      plan.call "ds.exp"(%w) -> (%c) ints [] floats [] on <compute> record [0] : (memref<16xf32>) -> memref<16xf32>
      plan.call "comm.all_reduce"(%c) -> (%g) ints [] floats [1.0] on <comm> wait [0] record [1] : (memref<16xf32>) -> memref<16xf32>
      plan.call "ds.exp"(%w) -> (%d) ints [] floats [] on <compute> : (memref<16xf32>) -> memref<16xf32>
      plan.call "ds.add"(%g, %d) -> (%d) ints [] floats [] on <compute> wait [1] : (memref<16xf32>, memref<16xf32>) -> memref<16xf32>
      plan.call "ds.exp"(%b) -> (%b) ints [] floats [] on <compute> : (memref<15xf32>) -> memref<15xf32>
      plan.call "ds.copy"(%d) -> (%h) ints [] floats [] on <d2h> record [2] : (memref<16xf32>) -> memref<16xf32>
      plan.outputs %d : memref<16xf32>
      return
    }
    // A second program (an eval that runs less): its own storage packs into
    // the same arenas from offset 0, and its peaks are its own; the arenas
    // are as large as the larger program needs them.
    // CHECK: plan.storage @e "e" <activations> <device> size 32 at 0 transient live [1, 2]
    plan.storage @e "e" <activations> <device> size 32 transient
    // CHECK: func.func @eval() attributes {plan.activation_bytes = 32 : i64, plan.arena_peaks = {activations = 32 : i64}}
    func.func @eval() {
      %w = plan.buffer @w : memref<16xf32>
      %e = plan.buffer @e : memref<8xf32>
      plan.inputs
      plan.call "ds.exp"(%w) -> (%w) ints [] floats [] on <compute> : (memref<16xf32>) -> memref<16xf32>
      plan.call "ds.exp"(%e) -> (%e) ints [] floats [] on <compute> : (memref<8xf32>) -> memref<8xf32>
      plan.outputs %e : memref<8xf32>
      return
    }
  }
}
