// RUN: ds-opt %s -split-input-file -ds-verify-input -verify-diagnostics | FileCheck %s
// The input contract, one violation per case.

// A valid forward graph passes unchanged.
// CHECK: ds.variable param @w
// CHECK: func.func @forward
ds.variable param @w : tensor<4xf32> init normal std 2.000000e-02
func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
  %w = ds.load @w : tensor<4xf32>
  %y = ds.mul %w, %x : tensor<4xf32>, tensor<4xf32>
  %l = ds.reduce_sum %y axes [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{input contract: no `func.func @forward` (the function that returns the loss) in the module}}
module {
  ds.variable param @w : tensor<4xf32> init zeros
}

// -----

ds.variable param @w : tensor<4xf32> init zeros
// expected-error @+1 {{input contract: @forward must return one scalar loss of type tensor<f32>, returns 'tensor<4xf32>'}}
func.func @forward() -> tensor<4xf32> {
  %w = ds.load @w : tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

ds.variable param @w : tensor<4xf32> init zeros
func.func private @helper(tensor<4xf32>) -> tensor<f32>
func.func @forward() -> tensor<f32> {
  %w = ds.load @w : tensor<4xf32>
  // expected-error @+1 {{input contract: 'func.call' is not a ds op; dsc can only train through ds ops}}
  %l = func.call @helper(%w) : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

ds.variable param @w : tensor<4xf32> init zeros
// expected-error @+1 {{input contract: argument #0 of @forward has type 'tensor<?xf32>'; inputs must be tensors with static shapes}}
func.func @forward(%x: tensor<?xf32>) -> tensor<f32> {
  %w = ds.load @w : tensor<4xf32>
  %l = ds.reduce_sum %w axes [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

ds.variable param @w : tensor<4xf32> init zeros
func.func @forward() -> tensor<f32> {
  %w = ds.load @w : tensor<4xf32>
  // expected-error @+1 {{input contract: @forward must not write variables}}
  ds.store %w, @w : tensor<4xf32>
  %l = ds.reduce_sum %w axes [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

ds.variable param @w : tensor<4xf32> init zeros
// expected-error @+1 {{input contract: variable @w.grad is a 'grad'; the input declares parameters only (dsc adds gradients and optimizer state)}}
ds.variable grad @w.grad of @w : tensor<4xf32> init zeros
func.func @forward() -> tensor<f32> {
  %w = ds.load @w : tensor<4xf32>
  %l = ds.reduce_sum %w axes [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

ds.variable param @w : tensor<4xf32> init zeros
func.func @forward() -> tensor<f32> {
  %w = ds.load @w : tensor<4xf32>
  %a = ds.dropout %w rate 0.1 id 3 : tensor<4xf32>
  // expected-error @+1 {{input contract: dropout id 3 is used twice; each dropout site needs its own id}}
  %b = ds.dropout %a rate 0.1 id 3 : tensor<4xf32>
  %l = ds.reduce_sum %b axes [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{input contract: the loss reads no parameter; nothing to train}}
func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
  %l = ds.reduce_sum %x axes [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
