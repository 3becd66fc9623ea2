// RUN: ds-opt %s -ds-adamw="optimizer=sgd momentum=0.9 nesterov=true weight-decay=0.01" | FileCheck %s --check-prefix=SGD
// RUN: ds-opt %s -ds-adamw="optimizer=lion beta1=0.9 beta2=0.99 weight-decay=0.1" | FileCheck %s --check-prefix=LION
// RUN: ds-opt %s -ds-adamw="optimizer=adagrad lr-decay=0.01 eps=1e-10" | FileCheck %s --check-prefix=ADAGRAD
// RUN: ds-opt %s -ds-adamw="optimizer=lamb beta2=0.99 eps=1e-6 min-coeff=0.1 max-coeff=5 bias-correction=false" | FileCheck %s --check-prefix=LAMB
// RUN: not ds-opt %s -ds-adamw="optimizer=muadam" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: ds-opt %s -ds-adamw="cycle-momentum=true beta1=0.8 beta2=0.99" | FileCheck %s --check-prefix=CYCLE
// RUN: ds-opt %s -ds-adamw="optimizer=lion cycle-momentum=true" | FileCheck %s --check-prefix=LIONCYCLE
// RUN: not ds-opt %s -ds-adamw="optimizer=sgd cycle-momentum=true" 2>&1 | FileCheck %s --check-prefix=SGDCYCLE
// RUN: ds-opt %s -ds-adamw="decay-all=true no-decay=w weight-decay=0.1" | FileCheck %s --check-prefix=GROUPS
// RUN: not ds-opt %s -ds-adamw="decay-all=true no-decay=w,nope" 2>&1 | FileCheck %s --check-prefix=NOPE
// RUN: not ds-opt %s -ds-adamw="no-decay=w" 2>&1 | FileCheck %s --check-prefix=NOALL
// The other updates ds-adamw builds: one state per parameter (SGD's
// momentum_buffer, Lion's exp_avg, Adagrad's sum), weight decay on rank >= 2
// only, the parameter stored before its state, accumulators zeroed. With
// cycle-momentum (OneCycle), @apply takes beta1 as a third input and every
// AdamW or Lion update reads it. With decay-all (dsc.initialize's
// parameter groups) every parameter decays but the no-decay ones, whatever
// their rank, each marked ds.decay, and the decayed updates come first.

ds.variable param @w : tensor<3x4xf32> init normal std 2.000000e-02
ds.variable grad @w.grad of @w : tensor<3x4xf32> init zeros
ds.variable param @b : tensor<4xf32> init zeros
ds.variable grad @b.grad of @b : tensor<4xf32> init zeros

// SGD:      ds.variable grad @w.grad of @w
// SGD-NEXT: ds.variable opt_state @w.momentum_buffer of @w : tensor<3x4xf32> init zeros
// SGD-NOT:  opt_state @w.
// SGD:      ds.variable grad @b.grad of @b
// SGD-NEXT: ds.variable opt_state @b.momentum_buffer of @b : tensor<4xf32> init zeros
// SGD-LABEL: func.func @apply(
// SGD:       %[[W:.*]] = ds.load @w :
// SGD-NEXT:  %[[BUF:.*]] = ds.load @w.momentum_buffer
// SGD-NEXT:  %[[P:.*]], %[[B:.*]] = ds.sgd %[[W]], %{{.*}}, %[[BUF]] lr %arg0 step %arg1 scale %{{.*}} momentum 9.000000e-01 dampening 0.000000e+00 weight_decay 1.000000e-02 nesterov true
// SGD-NEXT:  ds.store %[[P]], @w :
// SGD-NEXT:  ds.store %[[B]], @w.momentum_buffer
// SGD:       ds.sgd {{.*}} weight_decay 0.000000e+00 nesterov true : tensor<4xf32>

// LION:      ds.variable opt_state @w.exp_avg of @w : tensor<3x4xf32> init zeros
// LION-NOT:  exp_avg_sq
// LION-LABEL: func.func @apply(
// LION:      %[[M:.*]] = ds.load @w.exp_avg
// LION-NEXT: %[[P:.*]], %[[NM:.*]] = ds.lion %{{.*}}, %{{.*}}, %[[M]] lr %arg0 step %arg1 scale %{{.*}} betas(9.000000e-01, 0.98999999999999999) weight_decay 1.000000e-01
// LION-NEXT: ds.store %[[P]], @w :
// LION-NEXT: ds.store %[[NM]], @w.exp_avg
// LION:      ds.lion {{.*}} weight_decay 0.000000e+00 : tensor<4xf32>

// ADAGRAD:      ds.variable opt_state @w.sum of @w : tensor<3x4xf32> init zeros
// ADAGRAD-LABEL: func.func @apply(
// ADAGRAD:      %[[S:.*]] = ds.load @w.sum
// ADAGRAD-NEXT: %[[P:.*]], %[[NS:.*]] = ds.adagrad %{{.*}}, %{{.*}}, %[[S]] lr %arg0 step %arg1 scale %{{.*}} lr_decay 1.000000e-02 eps 1.000000e-10 weight_decay 1.000000e-02
// ADAGRAD-NEXT: ds.store %[[P]], @w :
// ADAGRAD-NEXT: ds.store %[[NS]], @w.sum

// LAMB:      ds.variable opt_state @w.exp_avg of @w : tensor<3x4xf32> init zeros
// LAMB:      ds.variable opt_state @w.exp_avg_sq of @w : tensor<3x4xf32> init zeros
// LAMB-LABEL: func.func @apply(
// LAMB:      %[[P:.*]], %[[NM:.*]], %[[NV:.*]] = ds.lamb %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} lr %arg0 step %arg1 scale %{{.*}} betas(9.000000e-01, 0.98999999999999999) eps 9.9999999999999995E-7 weight_decay 1.000000e-02 coeff(1.000000e-01, 5.000000e+00) {bias_correction = false, eps_inside_sqrt = false} : tensor<3x4xf32>, tensor<3x4xf32>
// LAMB-NEXT: ds.store %[[P]], @w :
// LAMB-NEXT: ds.store %[[NM]], @w.exp_avg :
// LAMB-NEXT: ds.store %[[NV]], @w.exp_avg_sq :
// LAMB:      ds.lamb {{.*}} weight_decay 0.000000e+00 coeff({{.*}}) {{.*}}: tensor<4xf32>

// BAD: error: ds-adamw: unknown optimizer 'muadam' (adamw, sgd, lion, adagrad, lamb or muon)

// CYCLE-LABEL: func.func @apply(%arg0: tensor<f32> {ds.name = "lr"}, %arg1: tensor<f32> {ds.name = "step"}, %arg2: tensor<f32> {ds.name = "beta1"}) -> tensor<f32>
// CYCLE:       ds.adamw {{.*}} lr %arg0 step %arg1 scale %{{.*}} beta1_value %arg2 betas(8.000000e-01, 0.98999999999999999) eps 1.000000e-08 weight_decay 1.000000e-02 : tensor<3x4xf32>
// CYCLE:       ds.adamw {{.*}} lr %arg0 step %arg1 scale %{{.*}} beta1_value %arg2 betas({{.*}}) eps 1.000000e-08 weight_decay 0.000000e+00 : tensor<4xf32>

// LIONCYCLE-LABEL: func.func @apply(
// LIONCYCLE-SAME:  %arg2: tensor<f32> {ds.name = "beta1"}
// LIONCYCLE-COUNT-2: ds.lion {{.*}} scale %{{.*}} beta1_value %arg2 betas(

// SGDCYCLE: error: ds-adamw: cycle-momentum needs betas (adamw or lion), not sgd

// GROUPS: ds.variable param @w {{.*}} {ds.decay = false}
// GROUPS: ds.variable param @b {{.*}} {ds.decay = true}
// GROUPS-LABEL: func.func @apply(
// GROUPS:       ds.adamw {{.*}} weight_decay 1.000000e-01 : tensor<4xf32>
// GROUPS:       ds.adamw {{.*}} weight_decay 0.000000e+00 : tensor<3x4xf32>

// NOPE: error: ds-adamw: no-decay names 'nope', which is not a parameter
// NOALL: error: ds-adamw: no-decay needs decay-all
