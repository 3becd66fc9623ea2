// RUN: ds-opt %s --plan-insert-events | FileCheck %s

// An asynchronous call waits for an event the compute call before it
// records, and for what was awaited on other streams since that compute
// call; it records its own event. A plan.await hands that event to the next
// compute call. Events are numbered in the order they are made.

module {
  module @plan {
    plan.storage @w "w" <params> <device> size 64 at 0
    plan.storage @a "a" <activations> <device> size 64 transient
    plan.storage @b "b" <activations> <device> size 64 transient
    plan.storage @g "g" <comm_buffers> <device> size 64 transient
    plan.storage @h "h" <activations> <host> size 64 transient
    plan.storage @h2 "h2" <activations> <host> size 64 transient
    // CHECK-LABEL: func.func @step() attributes {plan.events = 6 : i64}
    // CHECK-NOT: plan.await
    // CHECK-NOT: !plan.token
    func.func @step() {
      %w = plan.buffer @w : memref<16xf32>
      %a = plan.buffer @a : memref<16xf32>
      %b = plan.buffer @b : memref<16xf32>
      %g = plan.buffer @g : memref<16xf32>
      %h = plan.buffer @h : memref<16xf32>
      %h2 = plan.buffer @h2 : memref<16xf32>
      // CHECK: plan.call "ds.exp"(%{{.*}}) -> (%{{.*}}) ints [] floats [] on <compute> record [0, 2, 4] :
      plan.call "ds.exp"(%w) -> (%a) ints [] floats [] on <compute> : (memref<16xf32>) -> memref<16xf32>
      // CHECK-NEXT: plan.call "comm.all_reduce"{{.*}} on <comm> wait [0] record [1] : (memref<16xf32>) -> memref<16xf32>{{$}}
      %t1 = plan.call "comm.all_reduce"(%a) -> (%g) ints [] floats [1.0] on <comm> : (memref<16xf32>) -> memref<16xf32> async !plan.token
      // CHECK-NEXT: plan.call "ds.copy"{{.*}} on <d2h> wait [2] record [3] :
      %t2 = plan.call "ds.copy"(%a) -> (%h) ints [] floats [] on <d2h> : (memref<16xf32>) -> memref<16xf32> async !plan.token
      plan.await %t1
      // The all-reduce's result copied to the host: after the all-reduce.
      // CHECK-NEXT: plan.call "ds.copy"{{.*}} on <d2h> wait [4, 1] record [5] :
      %t3 = plan.call "ds.copy"(%g) -> (%h2) ints [] floats [] on <d2h> : (memref<16xf32>) -> memref<16xf32> async !plan.token
      // CHECK-NEXT: plan.call "ds.exp"{{.*}} on <compute> wait [1] :
      plan.call "ds.exp"(%g) -> (%b) ints [] floats [] on <compute> : (memref<16xf32>) -> memref<16xf32>
      plan.await %t3
      plan.await %t2
      // CHECK-NEXT: plan.call "ds.add"{{.*}} on <compute> in <host> wait [5, 3] :
      plan.call "ds.add"(%h, %h2) -> (%h) ints [] floats [] on <compute> in <host> : (memref<16xf32>, memref<16xf32>) -> memref<16xf32>
      plan.outputs
      return
    }
  }
}
