// RUN: ds-opt %s -ds-zero="world-size=2 stage=3" -verify-diagnostics
// RUN: ds-opt %s -ds-zero="world-size=1" | FileCheck %s
// One rank: nothing to communicate.
// CHECK: module attributes {dist.world_size = 1 : i64}
// CHECK-NOT: dist.

// expected-error @+1 {{ds-zero: ZeRO stage 3 is not implemented yet (stages 0-2 are)}}
module {
  func.func @micro_step() {
    return
  }
}
