// RUN: ds-opt %s -split-input-file -ds-zero="world-size=2 stage=2" -verify-diagnostics
// ds-zero reads gradients and the norm only through the marks of
// dialects/ds/Contracts.h, and refuses IR that breaks them by name.

ds.variable param @w : tensor<4xf32> init ones
ds.variable grad @w.grad of @w : tensor<4xf32> init zeros
func.func @micro_step(%x: tensor<4xf32>) -> tensor<f32> {
  %g = ds.neg %x : tensor<4xf32>
  %a = ds.load @w.grad : tensor<4xf32>
  %s = ds.add %a, %g : tensor<4xf32>, tensor<4xf32>
  // expected-error @+1 {{ds-zero: this store into gradient @w.grad is not marked ds.grad_accumulation, so no ZeRO stage would reduce it; gradients come from ds-autodiff}}
  ds.store %s, @w.grad : tensor<4xf32>
  %l = ds.reduce_sum %x axes [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

ds.variable param @w : tensor<4xf32> init ones
ds.variable grad @w.grad of @w : tensor<4xf32> init zeros
func.func @micro_step(%x: tensor<4xf32>) -> tensor<f32> {
  %g = ds.neg %x : tensor<4xf32>
  // The sum of this micro-step's gradient with the accumulator is missing.
  // expected-error @+1 {{ds-zero: the gradient accumulation into @w.grad is not ds.store(ds.add(ds.load @w.grad, %d)) with the sum used once (the ds.grad_accumulation contract)}}
  ds.store %g, @w.grad {ds.grad_accumulation} : tensor<4xf32>
  %l = ds.reduce_sum %x axes [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

ds.variable param @w : tensor<4xf32> init ones
ds.variable grad @w.grad of @w : tensor<4xf32> init zeros
ds.variable opt_state @w.exp_avg of @w : tensor<4xf32> init zeros
ds.variable opt_state @w.exp_avg_sq of @w : tensor<4xf32> init zeros
func.func @micro_step(%x: tensor<4xf32>) -> tensor<f32> {
  %g = ds.neg %x : tensor<4xf32>
  %a = ds.load @w.grad : tensor<4xf32>
  %s = ds.add %a, %g : tensor<4xf32>, tensor<4xf32>
  ds.store %s, @w.grad {ds.grad_accumulation} : tensor<4xf32>
  %l = ds.reduce_sum %x axes [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
// expected-error @+1 {{ds-zero: @apply has no global gradient norm (a ds.sqrt marked ds.global_grad_norm); run ds-adamw first}}
func.func @apply(%lr: tensor<f32>, %step: tensor<f32>) -> tensor<f32> {
  %p = ds.load @w : tensor<4xf32>
  %g = ds.load @w.grad : tensor<4xf32>
  %m = ds.load @w.exp_avg : tensor<4xf32>
  %v = ds.load @w.exp_avg_sq : tensor<4xf32>
  %one = ds.constant dense<1.000000e+00> : tensor<f32>
  %p2, %m2, %v2 = ds.adamw %p, %g, %m, %v lr %lr step %step scale %one betas(0.9, 0.95) eps 1.0e-8 weight_decay 0.0 : tensor<4xf32>, tensor<4xf32>
  ds.store %p2, @w : tensor<4xf32>
  ds.store %m2, @w.exp_avg : tensor<4xf32>
  ds.store %v2, @w.exp_avg_sq : tensor<4xf32>
  %n = ds.sqrt %one : tensor<f32>
  return %n : tensor<f32>
}

// -----

// Stage 2 reduce-scatters every accumulation in groups alike for all of
// them (a pipeline stage's micro-batches): a gradient accumulated more
// often than another is refused at its first extra accumulation.
ds.variable param @w : tensor<4xf32> init ones
ds.variable grad @w.grad of @w : tensor<4xf32> init zeros
ds.variable param @u : tensor<4xf32> init ones
ds.variable grad @u.grad of @u : tensor<4xf32> init zeros
func.func @micro_step(%x: tensor<4xf32>) -> tensor<f32> {
  %g = ds.neg %x : tensor<4xf32>
  %a = ds.load @w.grad : tensor<4xf32>
  %s = ds.add %a, %g : tensor<4xf32>, tensor<4xf32>
  ds.store %s, @w.grad {ds.grad_accumulation} : tensor<4xf32>
  %b = ds.load @u.grad : tensor<4xf32>
  %t = ds.add %b, %g : tensor<4xf32>, tensor<4xf32>
  ds.store %t, @u.grad {ds.grad_accumulation} : tensor<4xf32>
  %c = ds.load @w.grad : tensor<4xf32>
  %r = ds.add %c, %x : tensor<4xf32>, tensor<4xf32>
  // expected-error @+1 {{ds-zero: the gradients are accumulated different numbers of times, and ZeRO stage 2 reduces every accumulation}}
  ds.store %r, @w.grad {ds.grad_accumulation} : tensor<4xf32>
  %l = ds.reduce_sum %x axes [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
