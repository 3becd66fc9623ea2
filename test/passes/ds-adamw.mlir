// RUN: ds-opt %s -ds-adamw="beta1=0.9 beta2=0.95 weight-decay=0.1 grad-clip=1.0" | FileCheck %s
// @apply: global norm, clip scale min(1, clip / (norm + 1e-6)), AdamW with
// decay on rank >= 2 only, accumulators zeroed.

ds.variable param @w : tensor<3x4xf32> init normal std 2.000000e-02
ds.variable grad @w.grad of @w : tensor<3x4xf32> init zeros
ds.variable param @b : tensor<4xf32> init zeros
ds.variable grad @b.grad of @b : tensor<4xf32> init zeros

// CHECK:      ds.variable grad @w.grad of @w
// CHECK-NEXT: ds.variable opt_state @w.exp_avg of @w : tensor<3x4xf32> init zeros
// CHECK-NEXT: ds.variable opt_state @w.exp_avg_sq of @w : tensor<3x4xf32> init zeros
// CHECK:      ds.variable grad @b.grad of @b
// CHECK-NEXT: ds.variable opt_state @b.exp_avg of @b : tensor<4xf32> init zeros
// CHECK-NEXT: ds.variable opt_state @b.exp_avg_sq of @b : tensor<4xf32> init zeros

// CHECK-LABEL: func.func @apply(
// CHECK-SAME:    %[[LR:.*]]: tensor<f32> {ds.name = "lr"}, %[[STEP:.*]]: tensor<f32> {ds.name = "step"}) -> tensor<f32>
// CHECK:        %[[GW:.*]] = ds.load @w.grad
// CHECK:        %[[SQW:.*]] = ds.mul %[[GW]], %[[GW]]
// CHECK:        %[[NW:.*]] = ds.reduce_sum %[[SQW]] axes [0, 1] : tensor<3x4xf32> -> tensor<f32>
// CHECK:        %[[GB:.*]] = ds.load @b.grad
// CHECK:        %[[SQB:.*]] = ds.mul %[[GB]], %[[GB]]
// CHECK:        %[[NB:.*]] = ds.reduce_sum %[[SQB]] axes [0] : tensor<4xf32> -> tensor<f32>
// CHECK:        %[[TOT:.*]] = ds.add %[[NW]], %[[NB]]
// CHECK:        %[[NORM:.*]] = ds.sqrt %[[TOT]]
// CHECK:        %[[CLIP:.*]] = ds.constant dense<1.000000e+00> : tensor<f32>
// CHECK:        %[[EPS:.*]] = ds.constant dense<9.99999997E-7> : tensor<f32>
// CHECK:        %[[DEN:.*]] = ds.add %[[NORM]], %[[EPS]]
// CHECK:        %[[RATIO:.*]] = ds.div %[[CLIP]], %[[DEN]]
// CHECK:        %[[ONE:.*]] = ds.constant dense<1.000000e+00> : tensor<f32>
// CHECK:        %[[SCALE:.*]] = ds.minimum %[[RATIO]], %[[ONE]]
// CHECK:        %[[P:.*]] = ds.load @w :
// CHECK:        %[[M:.*]] = ds.load @w.exp_avg :
// CHECK:        %[[V:.*]] = ds.load @w.exp_avg_sq :
// CHECK:        %[[NP:.*]], %[[NM:.*]], %[[NV:.*]] = ds.adamw %[[P]], %[[GW]], %[[M]], %[[V]] lr %[[LR]] step %[[STEP]] scale %[[SCALE]] betas(9.000000e-01, 0.94999999999999996) eps 1.000000e-08 weight_decay 1.000000e-01
// CHECK:        ds.store %[[NP]], @w
// CHECK:        ds.store %[[NM]], @w.exp_avg
// CHECK:        ds.store %[[NV]], @w.exp_avg_sq
// CHECK:        %[[ZERO:.*]] = ds.constant dense<0.000000e+00> : tensor<3x4xf32>
// CHECK:        ds.store %[[ZERO]], @w.grad
// Biases are not decayed.
// CHECK:        ds.adamw {{.*}} weight_decay 0.000000e+00 : tensor<4xf32>, tensor<4xf32>
// CHECK:        ds.store {{.*}}, @b.grad
// CHECK:        return %[[NORM]] : tensor<f32>
