// RUN: ds-opt %s -split-input-file -verify-diagnostics
// Every verifier and shape-inference message of the ds dialect.

// expected-error @+1 {{'ds.variable' op init normal needs a std}}
ds.variable param @w : tensor<4xf32> init normal

// -----

// expected-error @+1 {{'ds.variable' op std is only meaningful with init normal}}
ds.variable param @w : tensor<4xf32> init zeros std 1.0

// -----

// expected-error @+1 {{'ds.variable' op std must be positive and finite, got 0}}
ds.variable param @w : tensor<4xf32> init normal std 0.0

// -----

// NaN compared false with "<= 0" and compiled; dsrun then refused the plan.
// expected-error @+1 {{'ds.variable' op std must be positive and finite, got nan}}
ds.variable param @w : tensor<4xf32> init normal std 0x7FF8000000000000

// -----

// expected-error @+1 {{'ds.variable' op std must be positive and finite, got INF}}
ds.variable param @w : tensor<4xf32> init normal std 0x7FF0000000000000

// -----

// A 0-row embedding table aborted in autodiff (EmbeddingGradOp::build).
// expected-error @+1 {{'ds.variable' op holds no elements (shape 0x8): every dimension must be at least 1}}
ds.variable param @w : tensor<0x8xf32> init zeros

// -----

// expected-error @+1 {{'ds.variable' op a grad variable needs `of @param`}}
ds.variable grad @g : tensor<4xf32> init zeros

// -----

ds.variable param @w : tensor<4xf32> init zeros
// expected-error @+1 {{'ds.variable' op shape differs from its param @w}}
ds.variable grad @g of @w : tensor<5xf32> init zeros

// -----

ds.variable param @w : tensor<4xf32> init zeros
func.func @f() {
  // expected-error @+1 {{'ds.load' op type 'tensor<5xf32>' does not match variable @w of type 'tensor<4xf32>'}}
  %0 = ds.load @w : tensor<5xf32>
  return
}

// -----

func.func @f(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ds.store' op refers to @nope, which is not a variable}}
  ds.store %x, @nope : tensor<4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @+1 {{'ds.iota' op dim 2 is out of range for rank 2}}
  %0 = ds.iota dim 2 : tensor<4x4xi32>
  return
}

// -----

func.func @f(%a: tensor<4x3xf32>, %b: tensor<5xf32>) {
  // expected-error @+1 {{operand shapes 4x3 and 5 are not broadcast-compatible}}
  %0 = ds.add %a, %b : tensor<4x3xf32>, tensor<5xf32>
  return
}

// -----

func.func @f(%a: tensor<4xf32>, %b: tensor<4xf64>) {
  // expected-error @+1 {{operands have different element types 'f32' and 'f64'}}
  %0 = ds.mul %a, %b : tensor<4xf32>, tensor<4xf64>
  return
}

// -----

func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{'ds.dropout' op rate must be in [0, 1), got 1}}
  %0 = ds.dropout %a rate 1.0 id 0 : tensor<4xf32>
  return
}

// -----

func.func @f(%a: tensor<4xf32>) {
  // expected-error @+1 {{'ds.cast' op requires the same shape for all operands and results}}
  %0 = ds.cast %a : tensor<4xf32> -> tensor<5xf16>
  return
}

// -----

func.func @f(%a: tensor<4x3xf32>, %b: tensor<4x3xf32>) {
  // expected-error @+2 {{contracting dimensions differ: lhs has 3, rhs has 4}}
  // expected-error @+1 {{'ds.matmul' op failed to infer returned types}}
  %0 = ds.matmul %a, %b : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @f(%a: tensor<3xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+2 {{operands must have rank >= 2, got 3 and 3x4}}
  // expected-error @+1 {{'ds.matmul' op failed to infer returned types}}
  %0 = ds.matmul %a, %b : tensor<3xf32>, tensor<3x4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @f(%a: tensor<2x4x3xf32>, %b: tensor<3x3x4xf32>) {
  // expected-error @+2 {{batch dimensions 2 and 3 are not broadcast-compatible}}
  // expected-error @+1 {{'ds.matmul' op failed to infer returned types}}
  %0 = ds.matmul %a, %b : tensor<2x4x3xf32>, tensor<3x3x4xf32> -> tensor<2x4x4xf32>
  return
}

// -----

func.func @f(%a: tensor<4x3xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+2 {{'ds.matmul' op inferred type(s) 'tensor<4x4xf32>' are incompatible with return type(s) of operation 'tensor<4x3xf32>'}}
  // expected-error @+1 {{'ds.matmul' op failed to infer returned types}}
  %0 = ds.matmul %a, %b : tensor<4x3xf32>, tensor<3x4xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{'ds.layer_norm' op weight must be [8] (the last dimension of x), got 4}}
  %0 = ds.layer_norm %x, %w eps 1.0e-5 : tensor<2x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{'ds.layer_norm' op bias must be [8] (the last dimension of x), got 2}}
  %0 = ds.layer_norm %x, %w, %b eps 1.0e-5 : tensor<2x8xf32>, tensor<8xf32>, tensor<2xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'ds.layer_norm' op eps must be non-negative}}
  %0 = ds.layer_norm %x, %w eps -1.0 : tensor<2x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8xf64>) {
  // expected-error @+1 {{'ds.rms_norm' op weight has element type 'f64', x has 'f32'}}
  %0 = ds.rms_norm %x, %w eps 1.0e-5 : tensor<2x8xf32>, tensor<8xf64>
  return
}

// -----

func.func @f(%q: tensor<2x3x5x4xf32>, %k: tensor<2x3x5x6xf32>) {
  // expected-error @+2 {{q and k head sizes differ: 4 vs 6}}
  // expected-error @+1 {{'ds.attention' op failed to infer returned types}}
  %0 = ds.attention %q, %k, %k scale 0.5 : tensor<2x3x5x4xf32>, tensor<2x3x5x6xf32>, tensor<2x3x5x6xf32> -> tensor<2x3x5x6xf32>
  return
}

// -----

func.func @f(%q: tensor<2x3x5x4xf32>, %k: tensor<2x2x5x4xf32>) {
  // expected-error @+2 {{batch and head dimensions differ: q is 2x3x5x4, k is 2x2x5x4, v is 2x2x5x4}}
  // expected-error @+1 {{'ds.attention' op failed to infer returned types}}
  %0 = ds.attention %q, %k, %k scale 0.5 : tensor<2x3x5x4xf32>, tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32> -> tensor<2x3x5x4xf32>
  return
}

// -----

func.func @f(%q: tensor<2x3x5x4xf32>, %k: tensor<2x3x6x4xf32>) {
  // expected-error @+2 {{batch and head dimensions differ: q is 2x3x5x4, k is 2x3x6x4, v is 2x3x6x4}}
  // expected-error @+1 {{'ds.attention' op failed to infer returned types}}
  %0 = ds.attention %q, %k, %k scale 0.5 seq_major : tensor<2x3x5x4xf32>, tensor<2x3x6x4xf32>, tensor<2x3x6x4xf32> -> tensor<2x3x5x4xf32>
  return
}

// -----

func.func @f(%q: tensor<3x5x4xf32>) {
  // expected-error @+2 {{q, k and v must be [B, T, H, D]}}
  // expected-error @+1 {{'ds.attention' op failed to infer returned types}}
  %0 = ds.attention %q, %q, %q scale 0.5 seq_major : tensor<3x5x4xf32>, tensor<3x5x4xf32>, tensor<3x5x4xf32> -> tensor<3x5x4xf32>
  return
}

// -----

func.func @f(%q: tensor<3x5x4xf32>) {
  // expected-error @+2 {{q, k and v must be [B, H, T, D]}}
  // expected-error @+1 {{'ds.attention' op failed to infer returned types}}
  %0 = ds.attention %q, %q, %q scale 0.5 : tensor<3x5x4xf32>, tensor<3x5x4xf32>, tensor<3x5x4xf32> -> tensor<3x5x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x5x3xf32>) {
  // expected-error @+1 {{'ds.rotary' op head size 3 must be even to rotate pairs}}
  %0 = ds.rotary %x theta 10000.0 : tensor<2x5x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x5x4xf32>) {
  // expected-error @+1 {{'ds.rotary' op x must be [B, T, H, D] with seq_major}}
  %0 = ds.rotary %x theta 10000.0 seq_major : tensor<2x5x4xf32>
  return
}

// -----

func.func @f(%t: tensor<16xf32>, %i: tensor<2x5xi32>) {
  // expected-error @+2 {{table must be [V, C], got 16}}
  // expected-error @+1 {{'ds.embedding' op failed to infer returned types}}
  %0 = ds.embedding %t, %i : tensor<16xf32>, tensor<2x5xi32> -> tensor<2x5xf32>
  return
}

// -----

func.func @f(%i: tensor<2x5xi32>, %g: tensor<2x4x8xf32>) {
  // expected-error @+2 {{grad must be indices' shape + [C], got 2x4x8 for indices 2x5}}
  // expected-error @+1 {{'ds.embedding_grad' op failed to infer returned types}}
  %0 = ds.embedding_grad %i, %g vocab 16 : tensor<2x5xi32>, tensor<2x4x8xf32> -> tensor<16x8xf32>
  return
}

// -----

func.func @f(%l: tensor<2x5x16xf32>, %t: tensor<2x4xi32>) {
  // expected-error @+2 {{targets must have the shape of logits without the class dimension: logits are 2x5x16, targets are 2x4}}
  // expected-error @+1 {{'ds.cross_entropy' op failed to infer returned types}}
  %0 = ds.cross_entropy %l, %t : tensor<2x5x16xf32>, tensor<2x4xi32> -> tensor<f32>
  return
}

// -----

func.func @f(%l: tensor<2x5x16xf32>, %t: tensor<2x5xf32>) {
  // expected-error @+1 {{'ds.cross_entropy' op operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2x5xf32>'}}
  %0 = ds.cross_entropy %l, %t : tensor<2x5x16xf32>, tensor<2x5xf32> -> tensor<f32>
  return
}

// -----

func.func @f(%l: tensor<2x5x16xf32>, %t: tensor<2x5xi32>, %g: tensor<2xf32>) {
  // expected-error @+1 {{'ds.cross_entropy_grad' op grad must be a scalar}}
  %0 = ds.cross_entropy_grad %l, %t, %g : tensor<2x5x16xf32>, tensor<2x5xi32>, tensor<2xf32>
  return
}

// -----

func.func @f(%h: tensor<2x5x8xf32>, %w: tensor<16x8xf32>, %t: tensor<2x5xi32>, %g: tensor<f32>) {
  // expected-error @+1 {{chunk_rows 3 must divide the 10 rows}}
  %0:4 = ds.linear_cross_entropy %h, %w, %t, %g chunk_rows 3 : tensor<2x5x8xf32>, tensor<16x8xf32>, tensor<2x5xi32>, tensor<f32>
  return
}

// -----

func.func @f(%h: tensor<2x5x8xf32>, %w: tensor<16x4xf32>, %t: tensor<2x5xi32>, %g: tensor<f32>) {
  // expected-error @+1 {{weight must be [V, D] for h [..., D] of its element type: h is 2x5x8, weight is 16x4}}
  %0:4 = ds.linear_cross_entropy %h, %w, %t, %g chunk_rows 5 : tensor<2x5x8xf32>, tensor<16x4xf32>, tensor<2x5xi32>, tensor<f32>
  return
}

// -----

func.func @f(%h: tensor<2x5x8xf32>, %w: tensor<16x8xf32>, %t: tensor<10xi32>, %g: tensor<f32>) {
  // expected-error @+1 {{targets must have the shape of h without its last dimension: h is 2x5x8, targets are 10}}
  %0:4 = ds.linear_cross_entropy %h, %w, %t, %g chunk_rows 5 : tensor<2x5x8xf32>, tensor<16x8xf32>, tensor<10xi32>, tensor<f32>
  return
}

// -----

func.func @f(%x: tensor<16x8xf32>, %i: tensor<2x5xi32>) {
  // expected-error @+1 {{'ds.embedding' op parts must be at least 1, got 0}}
  %0 = ds.embedding %x, %i parts 0 : tensor<16x8xf32>, tensor<2x5xi32> -> tensor<2x5x8xf32>
  return
}

// -----

func.func @f(%l: tensor<2x5x16xf32>, %t: tensor<2x5xi32>, %m: tensor<2x4xf32>) {
  // expected-error @+1 {{'ds.cross_entropy_part' op row_max must have the targets' shape}}
  %0 = ds.cross_entropy_part %l, %t, %m parts 2 : tensor<2x5x16xf32>, tensor<2x5xi32>, tensor<2x4xf32> -> tensor<2x2x5xf32>
  return
}

// -----

func.func @f(%s: tensor<2x2x4xf32>, %t: tensor<2x5xi32>) {
  // expected-error @+2 {{stats must be [2] + targets' shape, got 2x2x4 for targets 2x5}}
  // expected-error @+1 {{'ds.cross_entropy_part_loss' op failed to infer returned types}}
  %0 = ds.cross_entropy_part_loss %s, %t : tensor<2x2x4xf32>, tensor<2x5xi32> -> tensor<f32>
  return
}

// -----

func.func @f(%l: tensor<2x5x16xf32>, %t: tensor<2x5xi32>, %m: tensor<2x5xf32>, %s: tensor<2x5xf32>, %g: tensor<f32>) {
  // expected-error @+1 {{'ds.cross_entropy_part_grad' op stats must be [2] + the targets' shape}}
  %0 = ds.cross_entropy_part_grad %l, %t, %m, %s, %g parts 2 : tensor<2x5x16xf32>, tensor<2x5xi32>, tensor<2x5xf32>, tensor<2x5xf32>, tensor<f32>
  return
}

// -----

func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{'ds.reshape' op cannot reshape 2x6 (12 elements) to 5x2 (10 elements)}}
  %0 = ds.reshape %x : tensor<2x6xf32> -> tensor<5x2xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+2 {{permutation [0, 0] is not a permutation of 2 dimensions}}
  // expected-error @+1 {{'ds.transpose' op failed to infer returned types}}
  %0 = ds.transpose %x [0, 0] : tensor<2x6xf32> -> tensor<2x6xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+2 {{slice [4, 8) of dimension 1 is outside [0, 6)}}
  // expected-error @+1 {{'ds.slice' op failed to infer returned types}}
  %0 = ds.slice %x offsets [0, 4] sizes [2, 4] : tensor<2x6xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+2 {{offsets and sizes need one entry per dimension (2)}}
  // expected-error @+1 {{'ds.slice' op failed to infer returned types}}
  %0 = ds.slice %x offsets [0] sizes [2] : tensor<2x6xf32> -> tensor<2xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+2 {{padding must be non-negative}}
  // expected-error @+1 {{'ds.pad' op failed to infer returned types}}
  %0 = ds.pad %x low [0, -1] high [0, 0] : tensor<2x6xf32> -> tensor<2x5xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6xf32>, %y: tensor<3x6xf32>) {
  // expected-error @+2 {{inputs differ in dimension 0 (2x6 vs 3x6)}}
  // expected-error @+1 {{'ds.concat' op failed to infer returned types}}
  %0 = ds.concat %x, %y axis 1 : tensor<2x6xf32>, tensor<3x6xf32> -> tensor<2x12xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'ds.concat' op failed to infer returned types}}
  %0 = ds.concat %x axis 2 : tensor<2x6xf32> -> tensor<2x6xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+2 {{sizes add up to 5 but dimension 1 has 6}}
  // expected-error @+1 {{'ds.split' op failed to infer returned types}}
  %0:2 = ds.split %x axis 1 sizes [2, 3] : tensor<2x6xf32> -> tensor<2x2xf32>, tensor<2x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{'ds.broadcast' op cannot broadcast 2x6 to 3x6}}
  %0 = ds.broadcast %x : tensor<2x6xf32> -> tensor<3x6xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+2 {{axes must be increasing and in [0, 2)}}
  // expected-error @+1 {{'ds.reduce_sum' op failed to infer returned types}}
  %0 = ds.reduce_sum %x axes [1, 0] : tensor<2x6xf32> -> tensor<f32>
  return
}

// -----

func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+2 {{axes must be increasing and in [0, 2)}}
  // expected-error @+1 {{'ds.reduce_max' op failed to infer returned types}}
  %0 = ds.reduce_max %x axes [2] : tensor<2x6xf32> -> tensor<2x6xf32>
  return
}

// -----

func.func @f(%p: tensor<4x3xf32>, %g: tensor<3x4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'ds.adamw' op grad shape 3x4 differs from param shape 4x3}}
  %0:3 = ds.adamw %p, %g, %p, %p lr %s step %s scale %s betas(0.9, 0.95) eps 1.0e-8 weight_decay 0.1 : tensor<4x3xf32>, tensor<3x4xf32>
  return
}

// -----

func.func @f(%p: tensor<4x3xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'ds.sgd' op nesterov needs momentum > 0 and dampening 0}}
  %0:2 = ds.sgd %p, %p, %p lr %s step %s scale %s momentum 0.9 dampening 0.1 weight_decay 0.0 nesterov true : tensor<4x3xf32>, tensor<4x3xf32>
  return
}

// -----

func.func @f(%p: tensor<4x3xf32>, %g: tensor<3x4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'ds.sgd' op grad shape 3x4 differs from param shape 4x3}}
  %0:2 = ds.sgd %p, %g, %p lr %s step %s scale %s momentum 0.9 dampening 0.0 weight_decay 0.0 nesterov false : tensor<4x3xf32>, tensor<3x4xf32>
  return
}

// -----

func.func @f(%p: tensor<4x3xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'ds.adagrad' op eps must be positive and finite}}
  %0:2 = ds.adagrad %p, %p, %p lr %s step %s scale %s lr_decay 0.0 eps 0.0 weight_decay 0.0 : tensor<4x3xf32>, tensor<4x3xf32>
  return
}

// -----

func.func @f(%p: tensor<4x3xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'ds.lion' op weight_decay must be >= 0 and finite}}
  %0:2 = ds.lion %p, %p, %p lr %s step %s scale %s betas(0.9, 0.99) weight_decay -0.1 : tensor<4x3xf32>, tensor<4x3xf32>
  return
}

// -----

func.func @f(%p: tensor<4x3xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'ds.adamw' op betas must be in [0, 1)}}
  %0:3 = ds.adamw %p, %p, %p, %p lr %s step %s scale %s betas(0.9, 1.0) eps 1.0e-8 weight_decay 0.1 : tensor<4x3xf32>, tensor<4x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6xi32>) {
  // expected-error @+1 {{'ds.exp' op operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<2x6xi32>'}}
  %0 = ds.exp %x : tensor<2x6xi32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'ds.softmax' op requires the same type for all operands and results}}
  %0 = "ds.softmax"(%x) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>, %g: tensor<2x3xf64>) {
  // expected-error @+1 {{'ds.gelu_grad' op requires the same type for all operands and results}}
  %0 = "ds.gelu_grad"(%x, %g) {approximate = 1 : i32} : (tensor<2x3xf32>, tensor<2x3xf64>) -> tensor<2x3xf32>
  return
}

// -----

func.func @f(%y: tensor<2x3xf32>, %g: tensor<2x4xf32>) {
  // expected-error @+1 {{'ds.softmax_grad' op requires the same type for all operands and results}}
  %0 = "ds.softmax_grad"(%y, %g) : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'ds.constant' op failed to verify that all of {value, result} have same type}}
  %0 = "ds.constant"() {value = dense<1.0> : tensor<2x3xf32>} : () -> tensor<3x2xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'ds.layer_norm_grad' op failed to verify that all of {x, grad, dx} have same type}}
  %0:3 = "ds.layer_norm_grad"(%x, %w, %w) {eps = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @f(%q: tensor<1x1x4x8xf32>) {
  // expected-error @+1 {{'ds.attention_grad' op failed to verify that all of {q, dq} have same type}}
  %0:3 = "ds.attention_grad"(%q, %q, %q, %q) {scale = 1.0 : f64} : (tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>) -> (tensor<1x1x4x4xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'ds.bias_gelu' op bias must be [8] (the last dimension of x), got 4}}
  %0:2 = ds.bias_gelu tanh %x, %b : tensor<2x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{'ds.matmul_bias' op bias must be [4] (the result's last dimension), got 8}}
  %0 = ds.matmul_bias %x, %w, %b : tensor<2x8xf32>, tensor<8x4xf32>, tensor<8xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'ds.matmul_bias' op result must be 'tensor<2x4xf32>' (the matmul's), got 'tensor<4x2xf32>'}}
  %0 = ds.matmul_bias %x, %w, %b : tensor<2x8xf32>, tensor<8x4xf32>, tensor<4xf32> -> tensor<4x2xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %b: tensor<4xbf16>) {
  // expected-error @+1 {{'ds.matmul_bias' op bias has element type 'bf16', the result has 'f32'}}
  %0 = ds.matmul_bias %x, %w, %b : tensor<2x8xf32>, tensor<8x4xf32>, tensor<4xbf16> -> tensor<2x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<4x4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'ds.matmul_bias_gelu' op contracting dimensions differ: lhs has 8, rhs has 4}}
  %0:2 = ds.matmul_bias_gelu tanh %x, %w, %b : tensor<2x8xf32>, tensor<4x4xf32>, tensor<4xf32> -> tensor<2x4xf32>, tensor<2x4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'ds.matmul_bias_gelu' op sum and result must have the same type, got 'tensor<2x4xf32>' and 'tensor<2x4xbf16>'}}
  %0:2 = ds.matmul_bias_gelu tanh %x, %w, %b : tensor<2x8xf32>, tensor<8x4xf32>, tensor<4xf32> -> tensor<2x4xf32>, tensor<2x4xbf16>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<2xf32>) {
  // expected-error @+1 {{'ds.add_layer_norm' op weight must be [8] (the last dimension of x), got 2}}
  %0:2 = ds.add_layer_norm %x, %x, %w eps 1.0e-5 : tensor<2x8xf32>, tensor<2xf32>
  return
}

// -----

func.func @f(%p: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'ds.adamw' op eps must be positive}}
  %0:3 = ds.adamw %p, %p, %p, %p lr %s step %s scale %s betas(0.9, 0.95) eps 0.0 weight_decay 0.1 : tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x6xf32>) {
  // expected-error @+2 {{'ds.split' op inferred type(s) 'tensor<2x2xf32>', 'tensor<2x4xf32>' are incompatible with return type(s) of operation 'tensor<2x3xf32>', 'tensor<2x3xf32>'}}
  // expected-error @+1 {{'ds.split' op failed to infer returned types}}
  %0:2 = "ds.split"(%x) {axis = 1 : i64, sizes = array<i64: 2, 4>} : (tensor<2x6xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %p: tensor<2x8xf32>) {
  // expected-error @+1 {{'ds.matmul_gelu_grad' op x must be 'tensor<2x4xf32>' (the matmul's), got 'tensor<2x8xf32>'}}
  %0:2 = ds.matmul_gelu_grad tanh %x, %w, %p : tensor<2x8xf32>, tensor<8x4xf32>, tensor<2x8xf32> -> tensor<2x4xf32>, tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %p: tensor<2x4xf32>) {
  // expected-error @+1 {{'ds.matmul_gelu_grad' op dbias must be 'tensor<4xf32>' (the product's last dimension), got 'tensor<2xf32>'}}
  %0:2 = ds.matmul_gelu_grad tanh %x, %w, %p : tensor<2x8xf32>, tensor<8x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>, tensor<2xf32>
  return
}

// -----

func.func @f(%p: tensor<4x3xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'ds.lamb' op coeff needs 0 < min_coeff <= max_coeff, finite}}
  %0:3 = ds.lamb %p, %p, %p, %p lr %s step %s scale %s betas(0.9, 0.999) eps 1.0e-8 weight_decay 0.0 coeff(1.0, 0.5) {bias_correction = true, eps_inside_sqrt = false} : tensor<4x3xf32>, tensor<4x3xf32>
  return
}

// -----

func.func @f(%p: tensor<4x3xf32>, %s: tensor<f32>, %n: tensor<6xf32>) {
  // expected-error @+1 {{'ds.lamb' op norms must be f32 of 2 x members (4) elements}}
  %0:3 = ds.lamb %p, %p, %p, %p lr %s step %s scale %s norms %n members [6, 6] : tensor<6xf32> betas(0.9, 0.999) eps 1.0e-8 weight_decay 0.0 coeff(0.01, 10.0) {bias_correction = true, eps_inside_sqrt = false} : tensor<4x3xf32>, tensor<4x3xf32>
  return
}

// -----

func.func @f(%p: tensor<4x3xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'ds.lamb' op takes norms and members together or neither}}
  %0:3 = ds.lamb %p, %p, %p, %p lr %s step %s scale %s betas(0.9, 0.999) eps 1.0e-8 weight_decay 0.0 coeff(0.01, 10.0) {bias_correction = true, eps_inside_sqrt = false, members = array<i64: 12>} : tensor<4x3xf32>, tensor<4x3xf32>
  return
}

// -----

func.func @f(%p: tensor<4x3xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'ds.lamb_norms' op members must be one or more positive counts}}
  %0 = ds.lamb_norms %p, %p, %p, %p scale %s betas(0.9, 0.999) eps 1.0e-8 weight_decay 0.0 members [12, 0] {eps_inside_sqrt = false} : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4xf32>
  return
}

// -----

func.func @f(%p: tensor<12xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'ds.muon' op updates a matrix: the parameter needs rank >= 2 and elements, got 'tensor<12xf32>'}}
  %0:2 = ds.muon %p, %p, %p lr %s step %s scale %s momentum 0.95 weight_decay 0.0 ns_steps 5 {nesterov = true} : tensor<12xf32>, tensor<12xf32>
  return
}

// -----

func.func @f(%p: tensor<4x3xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'ds.muon' op heads must be >= 1 and divide the 4 rows, got 3}}
  %0:2 = ds.muon %p, %p, %p lr %s step %s scale %s momentum 0.9 weight_decay 0.0 ns_steps 5 {heads = 3 : i64, nesterov = true} : tensor<4x3xf32>, tensor<4x3xf32>
  return
}

// -----

func.func @f(%p: tensor<4x3xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'ds.muon' op momentum must be in [0, 1)}}
  %0:2 = ds.muon %p, %p, %p lr %s step %s scale %s momentum 1.0 weight_decay 0.0 ns_steps 5 {nesterov = true} : tensor<4x3xf32>, tensor<4x3xf32>
  return
}

// -----

func.func @f(%p: tensor<4x3xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{'ds.muon_apply' op factor must be >= 1 and finite}}
  %0 = ds.muon_apply %p, %p lr %s scale %s weight_decay 0.0 factor 0.5 : tensor<4x3xf32>, tensor<4x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x8xf32>, %c: tensor<2x1xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'ds.fused_elementwise' op input of type 'tensor<2x1xf32>' is neither the group's shape nor its trailing dims}}
  %0 = ds.fused_elementwise %x, %c : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>, %b: tensor<2x1xf32>):
    %s = ds.add %a, %b : tensor<2x8xf32>, tensor<2x1xf32>
    ds.yield %s : tensor<2x8xf32>
  }
  return %0 : tensor<2x8xf32>
}

// -----

func.func @f(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = ds.fused_elementwise %x : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    %e = ds.exp %a : tensor<2x8xf32>
    // expected-error @+1 {{'ds.softmax' op cannot be in a ds.fused_elementwise body}}
    %s = ds.softmax %e : tensor<2x8xf32>
    ds.yield %s : tensor<2x8xf32>
  }
  return %0 : tensor<2x8xf32>
}

// -----

func.func @f(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'ds.fused_elementwise' op cannot yield an input}}
  %0 = ds.fused_elementwise %x : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    ds.yield %a : tensor<2x8xf32>
  }
  return %0 : tensor<2x8xf32>
}

// -----

func.func @f(%x: tensor<2x8xf32>) -> tensor<f32> {
  // expected-error @+1 {{'ds.fused_elementwise' op body holds no elementwise op}}
  %0 = ds.fused_elementwise %x : (tensor<2x8xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<2x8xf32>):
    %s = ds.reduce_sum %a axes [0, 1] : tensor<2x8xf32> -> tensor<f32>
    ds.yield %s : tensor<f32>
  }
  return %0 : tensor<f32>
}

// -----

func.func @f(%x: tensor<2x8xf32>) -> tensor<2xf32> {
  %0 = ds.fused_elementwise %x : (tensor<2x8xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    %e = ds.exp %a : tensor<2x8xf32>
    // expected-error @+1 {{'ds.reduce_sum' op in a ds.fused_elementwise body must sum a value of the group's shape over its leading dims into an f32, f16 or bf16 tensor}}
    %s = ds.reduce_sum %e axes [1] : tensor<2x8xf32> -> tensor<2xf32>
    ds.yield %s : tensor<2xf32>
  }
  return %0 : tensor<2xf32>
}

// -----

func.func @f(%x: tensor<2x8xf32>) -> (tensor<f32>, tensor<8xf32>) {
  %0:2 = ds.fused_elementwise %x : (tensor<2x8xf32>) -> (tensor<f32>, tensor<8xf32>) {
  ^bb0(%a: tensor<2x8xf32>):
    %e = ds.exp %a : tensor<2x8xf32>
    %s = ds.reduce_sum %e axes [0, 1] : tensor<2x8xf32> -> tensor<f32>
    // expected-error @+1 {{'ds.reduce_sum' op is a ds.fused_elementwise body's second sum (at most one)}}
    %c = ds.reduce_sum %e axes [0] : tensor<2x8xf32> -> tensor<8xf32>
    ds.yield %s, %c : tensor<f32>, tensor<8xf32>
  }
  return %0#0, %0#1 : tensor<f32>, tensor<8xf32>
}

// -----

func.func @f(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %0 = ds.fused_elementwise %x : (tensor<2x8xf32>) -> tensor<2x8xf32> {
  ^bb0(%a: tensor<2x8xf32>):
    %e = ds.exp %a : tensor<2x8xf32>
    // expected-error @+1 {{'ds.reduce_sum' op in a ds.fused_elementwise body is read by another op (only ds.yield may read a sum)}}
    %s = ds.reduce_sum %e axes [0, 1] : tensor<2x8xf32> -> tensor<f32>
    %m = ds.mul %e, %s : tensor<2x8xf32>, tensor<f32>
    ds.yield %m : tensor<2x8xf32>
  }
  return %0 : tensor<2x8xf32>
}
