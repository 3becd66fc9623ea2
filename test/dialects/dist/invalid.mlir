// RUN: ds-opt %s -split-input-file -verify-diagnostics

func.func @f(%x: tensor<8xf32>) {
  // expected-error @+1 {{'dist.reduce_scatter' op the full tensor must be 1-D with 3 x the slice's elements, got 'tensor<8xf32>' and 'tensor<4xf32>'}}
  %0 = dist.reduce_scatter %x scale 1.0 ranks 3 : tensor<8xf32> -> tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<9xf32>) {
  // expected-error @+1 {{'dist.all_to_all' op x must be 1-D with a multiple of 2 elements (one block a rank), got 'tensor<9xf32>'}}
  %0 = dist.all_to_all %x ranks 2 : tensor<9xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dist.all_gather' op cannot change the element type}}
  %0 = dist.all_gather %x ranks 2 : tensor<4xf32> -> tensor<8xf64>
  return
}

// -----

func.func @f(%x: tensor<8xf32>) {
  // expected-error @+1 {{'dist.shard' op needs at least one rank}}
  %0 = dist.shard %x ranks 0 : tensor<8xf32> -> tensor<8xf32>
  return
}

// -----

func.func @f(%x: tensor<8xf32>) {
  // expected-error @+1 {{'dist.all_reduce' op failed to verify that all of {x, result} have same type}}
  %0 = "dist.all_reduce"(%x) {scale = 1.0 : f64} : (tensor<8xf32>) -> tensor<4xf32>
  return
}
