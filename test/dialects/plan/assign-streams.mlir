// RUN: ds-opt %s -split-input-file -verify-diagnostics --plan-assign-streams | FileCheck %s

// Calls lowering marked asynchronous (a token) get a stream of their own:
// collectives the comm stream, copies to host memory d2h, copies to device
// memory h2d. The rest stay on the compute stream.

module {
  module @plan {
    plan.storage @d "d" <activations> <device> size 64 transient
    plan.storage @h "h" <activations> <host> size 64 transient
    plan.storage @g "g" <comm_buffers> <device> size 64 transient
    // CHECK-LABEL: func.func @step
    func.func @step() {
      %d = plan.buffer @d : memref<16xf32>
      %h = plan.buffer @h : memref<16xf32>
      %g = plan.buffer @g : memref<16xf32>
      // CHECK: plan.call "ds.exp"{{.*}} on <compute> :
      plan.call "ds.exp"(%d) -> (%d) ints [] floats [] on <compute> : (memref<16xf32>) -> memref<16xf32>
      // CHECK: plan.call "comm.all_reduce"{{.*}} on <comm> : (memref<16xf32>) -> memref<16xf32> async !plan.token
      %0 = plan.call "comm.all_reduce"(%d) -> (%g) ints [] floats [1.0] on <compute> : (memref<16xf32>) -> memref<16xf32> async !plan.token
      // CHECK: plan.call "ds.copy"(%{{.*}}) -> (%{{.*}}) ints [] floats [] on <d2h> :
      %1 = plan.call "ds.copy"(%d) -> (%h) ints [] floats [] on <compute> : (memref<16xf32>) -> memref<16xf32> async !plan.token
      // CHECK: plan.call "ds.copy"(%{{.*}}) -> (%{{.*}}) ints [] floats [] on <h2d> :
      %2 = plan.call "ds.copy"(%h) -> (%d) ints [] floats [] on <compute> : (memref<16xf32>) -> memref<16xf32> async !plan.token
      // A copy within one space stays on the compute stream.
      // CHECK: plan.call "ds.copy"{{.*}} on <compute> : (memref<16xf32>) -> memref<16xf32>{{$}}
      plan.call "ds.copy"(%d) -> (%g) ints [] floats [] on <compute> : (memref<16xf32>) -> memref<16xf32>
      plan.outputs
      return
    }
  }
}

// -----

module {
  module @plan {
    plan.storage @d "d" <activations> <device> size 64 transient
    func.func @step() {
      %d = plan.buffer @d : memref<16xf32>
      // expected-error @+1 {{plan-assign-streams: no stream runs 'ds.exp' beside the compute stream}}
      %0 = plan.call "ds.exp"(%d) -> (%d) ints [] floats [] on <compute> : (memref<16xf32>) -> memref<16xf32> async !plan.token
      plan.outputs
      return
    }
  }
}
