// RUN: ds-opt %s -ds-zero="world-size=2 stage=1" -verify-diagnostics
// RUN: ds-opt %s -ds-zero="world-size=1" | FileCheck %s
// One rank: nothing to communicate.
// CHECK: module attributes {dist.world_size = 1 : i64}
// CHECK-NOT: dist.

// expected-error @+1 {{ds-zero: ZeRO stage 1 is not implemented yet (stage 0 is)}}
module {
  func.func @micro_step() {
    return
  }
}
