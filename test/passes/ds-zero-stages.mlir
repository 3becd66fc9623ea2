// RUN: ds-opt %s -ds-zero="world-size=2 stage=4" -verify-diagnostics
// RUN: ds-opt %s -ds-zero="world-size=1 stage=3" | FileCheck %s
// One rank: nothing to communicate, whatever the stage.
// CHECK: module attributes {dist.world_size = 1 : i64}
// CHECK-NOT: dist.

// expected-error @+1 {{ds-zero: world-size and bucket-size must be >= 1 and stage in 0..3}}
module {
  func.func @micro_step() {
    return
  }
}
