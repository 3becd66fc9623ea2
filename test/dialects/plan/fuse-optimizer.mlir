// RUN: ds-opt %s -split-input-file --plan-fuse-optimizer | FileCheck %s

// Updates of back-to-back parameters, gradients and moments with the same
// hyper-parameters become one ds.adamw over new storage spanning each run;
// the zeroing of back-to-back gradients becomes one fill (over storage of
// its own: runs are merged one at a time). A merged call's FLOPs are its
// parts'.

// CHECK: plan.storage @[[PF:.*]] "p0+flat" <params> <device> size 128 at 0
// CHECK: plan.storage @[[ZF:.*]] "g0+flat" <grads> <device> size 128 at 0
// CHECK: plan.storage @[[GF:.*]] "g0+flat" <grads> <device> size 128 at 0
// CHECK: plan.storage @[[MF:.*]] "m0+flat" <optimizer_state> <device> size 128 at 0
// CHECK: plan.storage @[[VF:.*]] "v0+flat" <optimizer_state> <device> size 128 at 128
// CHECK-LABEL: func.func @apply
// CHECK-DAG: %[[P:.*]] = plan.buffer @[[PF]] : memref<32xf32>
// CHECK-DAG: %[[G:.*]] = plan.buffer @[[GF]] : memref<32xf32>
// CHECK-DAG: %[[M:.*]] = plan.buffer @[[MF]] : memref<32xf32>
// CHECK-DAG: %[[V:.*]] = plan.buffer @[[VF]] : memref<32xf32>
// CHECK-DAG: %[[Z:.*]] = plan.buffer @[[ZF]] : memref<32xf32>
// CHECK: plan.call "ds.adamw"(%[[P]], %[[G]], %[[M]], %[[V]], %{{.*}}, %{{.*}}, %{{.*}}) -> (%[[P]], %[[M]], %[[V]]) ints [] floats [9.000000e-01, 9.990000e-01, 1.000000e-08, 1.000000e-01] on <compute> {flops = 3.200000e+02 : f64}
// CHECK-NEXT: plan.call "ds.fill"() -> (%[[Z]]) ints [] floats [0.000000e+00] on <compute> : () -> memref<32xf32>
// CHECK-NEXT: plan.outputs
module {
  module @plan {
    plan.storage @p0 "p0" <params> <device> size 64 at 0
    plan.storage @p1 "p1" <params> <device> size 64 at 64
    plan.storage @g0 "g0" <grads> <device> size 64 at 0
    plan.storage @g1 "g1" <grads> <device> size 64 at 64
    plan.storage @m0 "m0" <optimizer_state> <device> size 64 at 0
    plan.storage @m1 "m1" <optimizer_state> <device> size 64 at 64
    plan.storage @v0 "v0" <optimizer_state> <device> size 64 at 128
    plan.storage @v1 "v1" <optimizer_state> <device> size 64 at 192
    plan.storage @s "scalars" <inputs> <device> size 12 at 0
    func.func @apply() {
      %p0 = plan.buffer @p0 : memref<16xf32>
      %p1 = plan.buffer @p1 : memref<16xf32>
      %g0 = plan.buffer @g0 : memref<16xf32>
      %g1 = plan.buffer @g1 : memref<16xf32>
      %m0 = plan.buffer @m0 : memref<16xf32>
      %m1 = plan.buffer @m1 : memref<16xf32>
      %v0 = plan.buffer @v0 : memref<16xf32>
      %v1 = plan.buffer @v1 : memref<16xf32>
      %lr = plan.buffer @s : memref<f32>
      %step = plan.buffer @s + 4 : memref<f32>
      %scale = plan.buffer @s + 8 : memref<f32>
      plan.inputs %lr, %step, %scale : memref<f32>, memref<f32>, memref<f32>
      plan.call "ds.adamw"(%p0, %g0, %m0, %v0, %lr, %step, %scale) -> (%p0, %m0, %v0) ints [] floats [0.9, 0.999, 1.0e-8, 0.1] on <compute> {flops = 160.0 : f64} : (memref<16xf32>, memref<16xf32>, memref<16xf32>, memref<16xf32>, memref<f32>, memref<f32>, memref<f32>) -> (memref<16xf32>, memref<16xf32>, memref<16xf32>)
      plan.call "ds.fill"() -> (%g0) ints [] floats [0.0] on <compute> : () -> memref<16xf32>
      plan.call "ds.adamw"(%p1, %g1, %m1, %v1, %lr, %step, %scale) -> (%p1, %m1, %v1) ints [] floats [0.9, 0.999, 1.0e-8, 0.1] on <compute> {flops = 160.0 : f64} : (memref<16xf32>, memref<16xf32>, memref<16xf32>, memref<16xf32>, memref<f32>, memref<f32>, memref<f32>) -> (memref<16xf32>, memref<16xf32>, memref<16xf32>)
      plan.call "ds.fill"() -> (%g1) ints [] floats [0.0] on <compute> : () -> memref<16xf32>
      plan.outputs
      return
    }
  }
}

// -----

// Mixed precision: the update into a transient, its copy into the master
// and its cast into the 16-bit parameter are one ds.adamw_round, which
// records the events the copy and the cast recorded; the transient is
// gone. An update that waits for an event (here for the gradient's
// collective) is not merged with its neighbour.

// CHECK-NOT: "tmp"
// CHECK-LABEL: func.func @apply
// CHECK: plan.call "ds.adamw_round"(%[[MA:[0-9]+]], %[[G16:[0-9]+]], %{{.*}}) -> (%[[MA]], %{{.*}}, %{{.*}}, %[[P16:[0-9]+]]) ints [] floats [9.000000e-01, 9.990000e-01, 1.000000e-08, 0.000000e+00] on <compute> record [3, 4]
// CHECK-NEXT: plan.call "ds.adamw"{{.*}} wait [7]
// CHECK-NEXT: plan.call "ds.adamw"{{.*}} : (memref<16xf32>,
// CHECK-NEXT: plan.outputs
module {
  module @plan {
    plan.storage @master "w.master" <optimizer_state> <device> size 64 at 0
    plan.storage @p16 "w" <params> <device> size 32 at 0
    plan.storage @g16 "w.grad" <grads> <device> size 32 at 0
    plan.storage @m "w.exp_avg" <optimizer_state> <device> size 64 at 64
    plan.storage @v "w.exp_avg_sq" <optimizer_state> <device> size 64 at 128
    plan.storage @tmp "tmp" <activations> <device> size 64 transient
    plan.storage @a0 "a0" <params> <device> size 64 at 64
    plan.storage @a1 "a1" <params> <device> size 64 at 128
    plan.storage @s "scalars" <inputs> <device> size 12 at 0
    func.func @apply() {
      %master = plan.buffer @master : memref<16xf32>
      %p16 = plan.buffer @p16 : memref<16xf16>
      %g16 = plan.buffer @g16 : memref<16xf16>
      %m = plan.buffer @m : memref<16xf32>
      %v = plan.buffer @v : memref<16xf32>
      %tmp = plan.buffer @tmp : memref<16xf32>
      %a0 = plan.buffer @a0 : memref<16xf32>
      %a1 = plan.buffer @a1 : memref<16xf32>
      %lr = plan.buffer @s : memref<f32>
      %step = plan.buffer @s + 4 : memref<f32>
      %scale = plan.buffer @s + 8 : memref<f32>
      plan.inputs %lr, %step, %scale : memref<f32>, memref<f32>, memref<f32>
      plan.call "ds.adamw"(%master, %g16, %m, %v, %lr, %step, %scale) -> (%tmp, %m, %v) ints [] floats [0.9, 0.999, 1.0e-8, 0.0] on <compute> : (memref<16xf32>, memref<16xf16>, memref<16xf32>, memref<16xf32>, memref<f32>, memref<f32>, memref<f32>) -> (memref<16xf32>, memref<16xf32>, memref<16xf32>)
      plan.call "ds.copy"(%tmp) -> (%master) ints [] floats [] on <compute> record [3] : (memref<16xf32>) -> memref<16xf32>
      plan.call "ds.cast"(%tmp) -> (%p16) ints [] floats [] on <compute> record [4] : (memref<16xf32>) -> memref<16xf16>
      plan.call "ds.adamw"(%a0, %a0, %a0, %a0, %lr, %step, %scale) -> (%a0, %a0, %a0) ints [] floats [0.9, 0.999, 1.0e-8, 0.0] on <compute> wait [7] : (memref<16xf32>, memref<16xf32>, memref<16xf32>, memref<16xf32>, memref<f32>, memref<f32>, memref<f32>) -> (memref<16xf32>, memref<16xf32>, memref<16xf32>)
      plan.call "ds.adamw"(%a1, %a1, %a1, %a1, %lr, %step, %scale) -> (%a1, %a1, %a1) ints [] floats [0.9, 0.999, 1.0e-8, 0.0] on <compute> : (memref<16xf32>, memref<16xf32>, memref<16xf32>, memref<16xf32>, memref<f32>, memref<f32>, memref<f32>) -> (memref<16xf32>, memref<16xf32>, memref<16xf32>)
      plan.outputs
      return
    }
  }
}

// -----

// The other updates fuse with their rounding the same way: ds.sgd becomes
// ds.sgd_round (its int and float attributes kept), ds.lion ds.lion_round
// with its beta1_value input; an update with no copy and cast after it
// stays as it is.

// CHECK-LABEL: func.func @apply
// CHECK: plan.call "ds.sgd_round"(%[[MS:[0-9]+]], %{{[0-9]+}}, %[[B:[0-9]+]], %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}) -> (%[[MS]], %[[B]], %{{[0-9]+}}) ints [1] floats [9.000000e-01, 0.000000e+00, 1.000000e-01] on <compute> :
// CHECK-NEXT: plan.call "ds.lion_round"(%[[ML:[0-9]+]], %{{[0-9]+}}, %[[LM:[0-9]+]], %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[B1:[0-9]+]]) -> (%[[ML]], %[[LM]], %{{[0-9]+}}) ints [] floats [9.000000e-01, 9.900000e-01, 0.000000e+00] on <compute> :
// CHECK-NEXT: plan.call "ds.adagrad"(
// CHECK-NEXT: plan.outputs
module {
  module @plan {
    plan.storage @ms "s.master" <optimizer_state> <device> size 64 at 0
    plan.storage @ps "s" <params> <device> size 32 at 0
    plan.storage @gs "s.grad" <grads> <device> size 32 at 0
    plan.storage @b "s.momentum_buffer" <optimizer_state> <device> size 64 at 64
    plan.storage @ml "l.master" <optimizer_state> <device> size 64 at 128
    plan.storage @pl "l" <params> <device> size 32 at 32
    plan.storage @gl "l.grad" <grads> <device> size 32 at 32
    plan.storage @lm "l.exp_avg" <optimizer_state> <device> size 64 at 192
    plan.storage @a "a" <params> <device> size 64 at 64
    plan.storage @tmp "tmp" <activations> <device> size 64 transient
    plan.storage @tmp2 "tmp2" <activations> <device> size 64 transient
    plan.storage @s "scalars" <inputs> <device> size 16 at 0
    func.func @apply() {
      %ms = plan.buffer @ms : memref<16xf32>
      %ps = plan.buffer @ps : memref<16xbf16>
      %gs = plan.buffer @gs : memref<16xbf16>
      %b = plan.buffer @b : memref<16xf32>
      %ml = plan.buffer @ml : memref<16xf32>
      %pl = plan.buffer @pl : memref<16xbf16>
      %gl = plan.buffer @gl : memref<16xbf16>
      %lm = plan.buffer @lm : memref<16xf32>
      %a = plan.buffer @a : memref<16xf32>
      %tmp = plan.buffer @tmp : memref<16xf32>
      %tmp2 = plan.buffer @tmp2 : memref<16xf32>
      %lr = plan.buffer @s : memref<f32>
      %step = plan.buffer @s + 4 : memref<f32>
      %scale = plan.buffer @s + 8 : memref<f32>
      %beta1 = plan.buffer @s + 12 : memref<f32>
      plan.inputs %lr, %step, %scale, %beta1 : memref<f32>, memref<f32>, memref<f32>, memref<f32>
      plan.call "ds.sgd"(%ms, %gs, %b, %lr, %step, %scale) -> (%tmp, %b) ints [1] floats [0.9, 0.0, 0.1] on <compute> : (memref<16xf32>, memref<16xbf16>, memref<16xf32>, memref<f32>, memref<f32>, memref<f32>) -> (memref<16xf32>, memref<16xf32>)
      plan.call "ds.copy"(%tmp) -> (%ms) ints [] floats [] on <compute> : (memref<16xf32>) -> memref<16xf32>
      plan.call "ds.cast"(%tmp) -> (%ps) ints [] floats [] on <compute> : (memref<16xf32>) -> memref<16xbf16>
      plan.call "ds.lion"(%ml, %gl, %lm, %lr, %step, %scale, %beta1) -> (%tmp2, %lm) ints [] floats [0.9, 0.99, 0.0] on <compute> : (memref<16xf32>, memref<16xbf16>, memref<16xf32>, memref<f32>, memref<f32>, memref<f32>, memref<f32>) -> (memref<16xf32>, memref<16xf32>)
      plan.call "ds.copy"(%tmp2) -> (%ml) ints [] floats [] on <compute> : (memref<16xf32>) -> memref<16xf32>
      plan.call "ds.cast"(%tmp2) -> (%pl) ints [] floats [] on <compute> : (memref<16xf32>) -> memref<16xbf16>
      plan.call "ds.adagrad"(%a, %a, %a, %lr, %step, %scale) -> (%a, %a) ints [] floats [0.0, 1.0e-10, 0.0] on <compute> : (memref<16xf32>, memref<16xf32>, memref<16xf32>, memref<f32>, memref<f32>, memref<f32>) -> (memref<16xf32>, memref<16xf32>)
      plan.outputs
      return
    }
  }
}

// -----

// Mixed-precision updates of back-to-back parameters merge too, once each
// is one ds.adamw_round: the masters, gradients and moments as above, and
// the 16-bit parameters they write over a flat range of their own. When the
// 16-bit parameters are not back to back (the next case), the calls stay
// apart.

// CHECK: plan.storage @[[RPF:.*]] "w0+flat" <params> <device> size 64 at 0
// CHECK-LABEL: func.func @apply
// CHECK-DAG: %[[RP:.*]] = plan.buffer @[[RPF]] : memref<32xf16>
// CHECK: plan.call "ds.adamw_round"(%[[RM:[0-9]+]], %[[RG:[0-9]+]], %[[RA:[0-9]+]], %[[RV:[0-9]+]], %{{.*}}, %{{.*}}, %{{.*}}) -> (%[[RM]], %[[RA]], %[[RV]], %[[RP]]) ints [] floats [9.000000e-01, 9.990000e-01, 1.000000e-08, 0.000000e+00] on <compute> {flops = {{.*}}} : (memref<32xf32>, memref<32xf16>, memref<32xf32>, memref<32xf32>, memref<f32>, memref<f32>, memref<f32>) -> (memref<32xf32>, memref<32xf32>, memref<32xf32>, memref<32xf16>)
// CHECK-NEXT: plan.outputs
module {
  module @plan {
    plan.storage @w0m "w0.master" <optimizer_state> <device> size 64 at 0
    plan.storage @w1m "w1.master" <optimizer_state> <device> size 64 at 64
    plan.storage @w0 "w0" <params> <device> size 32 at 0
    plan.storage @w1 "w1" <params> <device> size 32 at 32
    plan.storage @w2 "w2" <params> <device> size 32 at 96
    plan.storage @w0g "w0.grad" <grads> <device> size 32 at 0
    plan.storage @w1g "w1.grad" <grads> <device> size 32 at 32
    plan.storage @w0a "w0.exp_avg" <optimizer_state> <device> size 64 at 128
    plan.storage @w1a "w1.exp_avg" <optimizer_state> <device> size 64 at 192
    plan.storage @w0v "w0.exp_avg_sq" <optimizer_state> <device> size 64 at 256
    plan.storage @w1v "w1.exp_avg_sq" <optimizer_state> <device> size 64 at 320
    plan.storage @tmp "tmp" <activations> <device> size 64 transient
    plan.storage @s "scalars" <inputs> <device> size 12 at 0
    func.func @apply() {
      %m0 = plan.buffer @w0m : memref<16xf32>
      %m1 = plan.buffer @w1m : memref<16xf32>
      %p0 = plan.buffer @w0 : memref<16xf16>
      %p1 = plan.buffer @w1 : memref<16xf16>
      %g0 = plan.buffer @w0g : memref<16xf16>
      %g1 = plan.buffer @w1g : memref<16xf16>
      %a0 = plan.buffer @w0a : memref<16xf32>
      %a1 = plan.buffer @w1a : memref<16xf32>
      %v0 = plan.buffer @w0v : memref<16xf32>
      %v1 = plan.buffer @w1v : memref<16xf32>
      %tmp = plan.buffer @tmp : memref<16xf32>
      %lr = plan.buffer @s : memref<f32>
      %step = plan.buffer @s + 4 : memref<f32>
      %scale = plan.buffer @s + 8 : memref<f32>
      plan.inputs %lr, %step, %scale : memref<f32>, memref<f32>, memref<f32>
      plan.call "ds.adamw"(%m0, %g0, %a0, %v0, %lr, %step, %scale) -> (%tmp, %a0, %v0) ints [] floats [0.9, 0.999, 1.0e-8, 0.0] on <compute> {flops = 160.0 : f64} : (memref<16xf32>, memref<16xf16>, memref<16xf32>, memref<16xf32>, memref<f32>, memref<f32>, memref<f32>) -> (memref<16xf32>, memref<16xf32>, memref<16xf32>)
      plan.call "ds.copy"(%tmp) -> (%m0) ints [] floats [] on <compute> : (memref<16xf32>) -> memref<16xf32>
      plan.call "ds.cast"(%tmp) -> (%p0) ints [] floats [] on <compute> : (memref<16xf32>) -> memref<16xf16>
      plan.call "ds.adamw"(%m1, %g1, %a1, %v1, %lr, %step, %scale) -> (%tmp, %a1, %v1) ints [] floats [0.9, 0.999, 1.0e-8, 0.0] on <compute> {flops = 160.0 : f64} : (memref<16xf32>, memref<16xf16>, memref<16xf32>, memref<16xf32>, memref<f32>, memref<f32>, memref<f32>) -> (memref<16xf32>, memref<16xf32>, memref<16xf32>)
      plan.call "ds.copy"(%tmp) -> (%m1) ints [] floats [] on <compute> : (memref<16xf32>) -> memref<16xf32>
      plan.call "ds.cast"(%tmp) -> (%p1) ints [] floats [] on <compute> : (memref<16xf32>) -> memref<16xf16>
      plan.outputs
      return
    }
  }
}

// -----

// CHECK-LABEL: func.func @apply
// CHECK: plan.call "ds.adamw_round"{{.*}} : (memref<16xf32>,
// CHECK-NEXT: plan.call "ds.adamw_round"{{.*}} : (memref<16xf32>,
// CHECK-NEXT: plan.outputs
module {
  module @plan {
    plan.storage @w0m "w0.master" <optimizer_state> <device> size 64 at 0
    plan.storage @w1m "w1.master" <optimizer_state> <device> size 64 at 64
    plan.storage @w0 "w0" <params> <device> size 32 at 0
    plan.storage @w1 "w1" <params> <device> size 32 at 32
    plan.storage @w2 "w2" <params> <device> size 32 at 96
    plan.storage @w0g "w0.grad" <grads> <device> size 32 at 0
    plan.storage @w1g "w1.grad" <grads> <device> size 32 at 32
    plan.storage @w0a "w0.exp_avg" <optimizer_state> <device> size 64 at 128
    plan.storage @w1a "w1.exp_avg" <optimizer_state> <device> size 64 at 192
    plan.storage @w0v "w0.exp_avg_sq" <optimizer_state> <device> size 64 at 256
    plan.storage @w1v "w1.exp_avg_sq" <optimizer_state> <device> size 64 at 320
    plan.storage @tmp "tmp" <activations> <device> size 64 transient
    plan.storage @s "scalars" <inputs> <device> size 12 at 0
    func.func @apply() {
      %m0 = plan.buffer @w0m : memref<16xf32>
      %m1 = plan.buffer @w1m : memref<16xf32>
      %p0 = plan.buffer @w0 : memref<16xf16>
      %p2 = plan.buffer @w2 : memref<16xf16>
      %g0 = plan.buffer @w0g : memref<16xf16>
      %g1 = plan.buffer @w1g : memref<16xf16>
      %a0 = plan.buffer @w0a : memref<16xf32>
      %a1 = plan.buffer @w1a : memref<16xf32>
      %v0 = plan.buffer @w0v : memref<16xf32>
      %v1 = plan.buffer @w1v : memref<16xf32>
      %tmp = plan.buffer @tmp : memref<16xf32>
      %lr = plan.buffer @s : memref<f32>
      %step = plan.buffer @s + 4 : memref<f32>
      %scale = plan.buffer @s + 8 : memref<f32>
      plan.inputs %lr, %step, %scale : memref<f32>, memref<f32>, memref<f32>
      plan.call "ds.adamw"(%m0, %g0, %a0, %v0, %lr, %step, %scale) -> (%tmp, %a0, %v0) ints [] floats [0.9, 0.999, 1.0e-8, 0.0] on <compute> : (memref<16xf32>, memref<16xf16>, memref<16xf32>, memref<16xf32>, memref<f32>, memref<f32>, memref<f32>) -> (memref<16xf32>, memref<16xf32>, memref<16xf32>)
      plan.call "ds.copy"(%tmp) -> (%m0) ints [] floats [] on <compute> : (memref<16xf32>) -> memref<16xf32>
      plan.call "ds.cast"(%tmp) -> (%p0) ints [] floats [] on <compute> : (memref<16xf32>) -> memref<16xf16>
      plan.call "ds.adamw"(%m1, %g1, %a1, %v1, %lr, %step, %scale) -> (%tmp, %a1, %v1) ints [] floats [0.9, 0.999, 1.0e-8, 0.0] on <compute> : (memref<16xf32>, memref<16xf16>, memref<16xf32>, memref<16xf32>, memref<f32>, memref<f32>, memref<f32>) -> (memref<16xf32>, memref<16xf32>, memref<16xf32>)
      plan.call "ds.copy"(%tmp) -> (%m1) ints [] floats [] on <compute> : (memref<16xf32>) -> memref<16xf32>
      plan.call "ds.cast"(%tmp) -> (%p2) ints [] floats [] on <compute> : (memref<16xf32>) -> memref<16xf16>
      plan.outputs
      return
    }
  }
}
