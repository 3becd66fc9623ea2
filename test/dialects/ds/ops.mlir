// RUN: ds-opt %s | ds-opt | FileCheck %s
// Every ds op round-trips through its assembly format.

// CHECK: ds.variable param @w : tensor<16x8xf32> init normal std 2.000000e-02
ds.variable param @w : tensor<16x8xf32> init normal std 2.000000e-02
// CHECK: ds.variable param @b : tensor<8xf32> init zeros
ds.variable param @b : tensor<8xf32> init zeros
// CHECK: ds.variable param @g : tensor<8xf32> init ones
ds.variable param @g : tensor<8xf32> init ones
// CHECK: ds.variable grad @w.grad of @w : tensor<16x8xf32> init zeros
ds.variable grad @w.grad of @w : tensor<16x8xf32> init zeros
// CHECK: ds.variable opt_state @w.exp_avg of @w : tensor<16x8xf32> init zeros
ds.variable opt_state @w.exp_avg of @w : tensor<16x8xf32> init zeros

// CHECK-LABEL: func @state
func.func @state() {
  // CHECK: %[[W:.*]] = ds.load @w : tensor<16x8xf32>
  %w = ds.load @w : tensor<16x8xf32>
  // CHECK: ds.store %[[W]], @w.grad : tensor<16x8xf32>
  ds.store %w, @w.grad : tensor<16x8xf32>
  return
}

// CHECK-LABEL: func @constants
func.func @constants() -> (tensor<2x3xf32>, tensor<4xi32>) {
  // CHECK: ds.constant dense<1.500000e+00> : tensor<2x3xf32>
  %c = ds.constant dense<1.5> : tensor<2x3xf32>
  // CHECK: ds.iota dim 0 : tensor<4xi32>
  %i = ds.iota dim 0 : tensor<4xi32>
  return %c, %i : tensor<2x3xf32>, tensor<4xi32>
}

// CHECK-LABEL: func @elementwise
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // CHECK: ds.add %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32>
  %0 = ds.add %a, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: ds.sub
  %1 = ds.sub %a, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: ds.mul
  %2 = ds.mul %a, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: ds.div
  %3 = ds.div %a, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: ds.minimum
  %4 = ds.minimum %a, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: ds.maximum
  %5 = ds.maximum %a, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: ds.equal
  %6 = ds.equal %a, %b : tensor<2x3xf32>, tensor<3xf32>
  // CHECK: ds.neg %{{.*}} : tensor<2x3xf32>
  %7 = ds.neg %a : tensor<2x3xf32>
  // CHECK: ds.exp
  %8 = ds.exp %a : tensor<2x3xf32>
  // CHECK: ds.log
  %9 = ds.log %a : tensor<2x3xf32>
  // CHECK: ds.tanh
  %10 = ds.tanh %a : tensor<2x3xf32>
  // CHECK: ds.sqrt
  %11 = ds.sqrt %a : tensor<2x3xf32>
  // CHECK: ds.rsqrt
  %12 = ds.rsqrt %a : tensor<2x3xf32>
  // CHECK: ds.relu
  %13 = ds.relu %a : tensor<2x3xf32>
  // CHECK: ds.silu
  %14 = ds.silu %a : tensor<2x3xf32>
  // CHECK: ds.gelu tanh %{{.*}} : tensor<2x3xf32>
  %15 = ds.gelu tanh %a : tensor<2x3xf32>
  // CHECK: ds.gelu none
  %16 = ds.gelu none %a : tensor<2x3xf32>
  // CHECK: ds.relu_grad %{{.*}}, %{{.*}} : tensor<2x3xf32>
  %17 = ds.relu_grad %a, %a : tensor<2x3xf32>
  // CHECK: ds.silu_grad
  %18 = ds.silu_grad %a, %a : tensor<2x3xf32>
  // CHECK: ds.swiglu %{{.*}}, %{{.*}} : tensor<2x3xf32>
  %swiglu = ds.swiglu %a, %a : tensor<2x3xf32>
  // CHECK: ds.gelu_grad tanh
  %19 = ds.gelu_grad tanh %a, %a : tensor<2x3xf32>
  // CHECK: ds.cast %{{.*}} : tensor<2x3xf32> -> tensor<2x3xbf16>
  %20 = ds.cast %a : tensor<2x3xf32> -> tensor<2x3xbf16>
  // CHECK: ds.cast %{{.*}} : tensor<2x3xf32> -> tensor<2x3xf16>
  %21 = ds.cast %a : tensor<2x3xf32> -> tensor<2x3xf16>
  // CHECK: ds.dropout %{{.*}} rate 1.000000e-01 id 7 : tensor<2x3xf32>
  %22 = ds.dropout %a rate 0.1 id 7 : tensor<2x3xf32>
  return
}

// CHECK-LABEL: func @contractions
func.func @contractions(%x: tensor<2x5x8xf32>, %w: tensor<12x8xf32>,
                        %g: tensor<8xf32>, %q: tensor<2x3x5x4xf32>,
                        %kv7: tensor<2x7x5x4xf32>) {
  // CHECK: ds.matmul %{{.*}}, %{{.*}} {transpose_rhs} : tensor<2x5x8xf32>, tensor<12x8xf32> -> tensor<2x5x12xf32>
  %0 = ds.matmul %x, %w {transpose_rhs} : tensor<2x5x8xf32>, tensor<12x8xf32> -> tensor<2x5x12xf32>
  // CHECK: ds.layer_norm %{{.*}}, %{{.*}}, %{{.*}} eps 1.000000e-05 : tensor<2x5x8xf32>, tensor<8xf32>, tensor<8xf32>
  %1 = ds.layer_norm %x, %g, %g eps 1.0e-5 : tensor<2x5x8xf32>, tensor<8xf32>, tensor<8xf32>
  // CHECK: ds.layer_norm %{{.*}}, %{{.*}} eps 1.000000e-05 : tensor<2x5x8xf32>, tensor<8xf32>{{$}}
  %2 = ds.layer_norm %x, %g eps 1.0e-5 : tensor<2x5x8xf32>, tensor<8xf32>
  // CHECK: = ds.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} eps 1.000000e-05 : tensor<2x5x8xf32>, tensor<8xf32>
  %3:3 = ds.layer_norm_grad %x, %g, %x eps 1.0e-5 : tensor<2x5x8xf32>, tensor<8xf32>
  // CHECK: ds.rms_norm %{{.*}}, %{{.*}} eps 9.9999999999999995E-7 : tensor<2x5x8xf32>, tensor<8xf32>
  %4 = ds.rms_norm %x, %g eps 1.0e-6 : tensor<2x5x8xf32>, tensor<8xf32>
  // CHECK: ds.rms_norm_grad
  %5:2 = ds.rms_norm_grad %x, %g, %x eps 1.0e-6 : tensor<2x5x8xf32>, tensor<8xf32>
  // CHECK: ds.softmax %{{.*}} : tensor<2x5x8xf32>
  %6 = ds.softmax %x : tensor<2x5x8xf32>
  // CHECK: ds.softmax_grad
  %7 = ds.softmax_grad %6, %x : tensor<2x5x8xf32>
  // CHECK: ds.attention %{{.*}}, %{{.*}}, %{{.*}} scale 5.000000e-01 causal : tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32> -> tensor<2x3x5x4xf32>
  %8 = ds.attention %q, %q, %q scale 0.5 causal : tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32> -> tensor<2x3x5x4xf32>
  // CHECK: ds.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} scale 5.000000e-01 causal
  %9:3 = ds.attention_grad %q, %q, %q, %8 scale 0.5 causal : tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>, tensor<2x3x5x4xf32>
  // seq_major: [B, T, H, D]; k and v of 7 positions, 3 heads.
  // CHECK: ds.attention %{{.*}}, %{{.*}}, %{{.*}} scale 5.000000e-01 causal seq_major : tensor<2x3x5x4xf32>, tensor<2x7x5x4xf32>, tensor<2x7x5x4xf32> -> tensor<2x3x5x4xf32>
  %sm = ds.attention %q, %kv7, %kv7 scale 0.5 causal seq_major : tensor<2x3x5x4xf32>, tensor<2x7x5x4xf32>, tensor<2x7x5x4xf32> -> tensor<2x3x5x4xf32>
  // CHECK: ds.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} scale 5.000000e-01 seq_major :
  %smg:3 = ds.attention_grad %q, %kv7, %kv7, %sm scale 0.5 seq_major : tensor<2x3x5x4xf32>, tensor<2x7x5x4xf32>, tensor<2x7x5x4xf32>, tensor<2x3x5x4xf32>
  // CHECK: ds.rotary %{{.*}} theta 1.000000e+04 : tensor<2x3x5x4xf32>
  %10 = ds.rotary %q theta 10000.0 : tensor<2x3x5x4xf32>
  // CHECK: ds.rotary %{{.*}} theta 1.000000e+04 inverse seq_major : tensor<2x3x5x4xf32>
  %rsm = ds.rotary %q theta 10000.0 inverse seq_major : tensor<2x3x5x4xf32>
  // CHECK: ds.rotary %{{.*}} theta 1.000000e+04 inverse : tensor<2x3x5x4xf32>
  %11 = ds.rotary %q theta 10000.0 inverse : tensor<2x3x5x4xf32>
  return
}

// CHECK-LABEL: func @lookup_and_loss
func.func @lookup_and_loss(%t: tensor<16x8xf32>, %i: tensor<2x5xi32>,
                           %l: tensor<2x5x16xf32>, %s: tensor<f32>) {
  // CHECK: ds.embedding %{{.*}}, %{{.*}} : tensor<16x8xf32>, tensor<2x5xi32> -> tensor<2x5x8xf32>
  %0 = ds.embedding %t, %i : tensor<16x8xf32>, tensor<2x5xi32> -> tensor<2x5x8xf32>
  // CHECK: ds.embedding_grad %{{.*}}, %{{.*}} vocab 16 : tensor<2x5xi32>, tensor<2x5x8xf32> -> tensor<16x8xf32>
  %1 = ds.embedding_grad %i, %0 vocab 16 : tensor<2x5xi32>, tensor<2x5x8xf32> -> tensor<16x8xf32>
  // CHECK: ds.cross_entropy %{{.*}}, %{{.*}} : tensor<2x5x16xf32>, tensor<2x5xi32> -> tensor<f32>
  %2 = ds.cross_entropy %l, %i : tensor<2x5x16xf32>, tensor<2x5xi32> -> tensor<f32>
  // CHECK: ds.cross_entropy %{{.*}}, %{{.*}} {ignore_index = 0 : i64}
  %3 = ds.cross_entropy %l, %i {ignore_index = 0} : tensor<2x5x16xf32>, tensor<2x5xi32> -> tensor<f32>
  // CHECK: ds.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x5x16xf32>, tensor<2x5xi32>, tensor<f32>
  %4 = ds.cross_entropy_grad %l, %i, %s : tensor<2x5x16xf32>, tensor<2x5xi32>, tensor<f32>
  // 16-bit logits: the loss is fp32, the seed may be fp32.
  %lb = ds.cast %l : tensor<2x5x16xf32> -> tensor<2x5x16xbf16>
  // CHECK: ds.cross_entropy %{{.*}}, %{{.*}} : tensor<2x5x16xbf16>, tensor<2x5xi32> -> tensor<f32>
  %5 = ds.cross_entropy %lb, %i : tensor<2x5x16xbf16>, tensor<2x5xi32> -> tensor<f32>
  // CHECK: ds.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x5x16xbf16>, tensor<2x5xi32>, tensor<f32>
  %6 = ds.cross_entropy_grad %lb, %i, %s : tensor<2x5x16xbf16>, tensor<2x5xi32>, tensor<f32>
  // The head and its loss in one op (phase fused): h [2, 5, 8] against the
  // 16 x 8 table, 5 rows a chunk.
  // CHECK: %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} = ds.linear_cross_entropy %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} chunk_rows 5 : tensor<2x5x8xf32>, tensor<16x8xf32>, tensor<2x5xi32>, tensor<f32>
  %7:4 = ds.linear_cross_entropy %0, %t, %i, %s chunk_rows 5 : tensor<2x5x8xf32>, tensor<16x8xf32>, tensor<2x5xi32>, tensor<f32>
  return
}

// Vocabulary parallelism (phase shard): one rank's rows of a table of 4 x 16
// rows, one rank's 16 columns of a row of 64 logits.
// CHECK-LABEL: func @vocabulary_parts
func.func @vocabulary_parts(%t: tensor<16x8xf32>, %i: tensor<2x5xi32>,
                            %l: tensor<2x5x16xbf16>, %m: tensor<2x5xbf16>,
                            %s: tensor<f32>) {
  // CHECK: ds.embedding %{{.*}}, %{{.*}} parts 4 : tensor<16x8xf32>, tensor<2x5xi32> -> tensor<2x5x8xf32>
  %0 = ds.embedding %t, %i parts 4 : tensor<16x8xf32>, tensor<2x5xi32> -> tensor<2x5x8xf32>
  // CHECK: ds.embedding_grad %{{.*}}, %{{.*}} vocab 16 parts 4 : tensor<2x5xi32>, tensor<2x5x8xf32> -> tensor<16x8xf32>
  %1 = ds.embedding_grad %i, %0 vocab 16 parts 4 : tensor<2x5xi32>, tensor<2x5x8xf32> -> tensor<16x8xf32>
  // The statistics are fp32 for 16-bit logits.
  // CHECK: ds.cross_entropy_part %{{.*}}, %{{.*}}, %{{.*}} parts 4 : tensor<2x5x16xbf16>, tensor<2x5xi32>, tensor<2x5xbf16> -> tensor<2x2x5xf32>
  %2 = ds.cross_entropy_part %l, %i, %m parts 4 : tensor<2x5x16xbf16>, tensor<2x5xi32>, tensor<2x5xbf16> -> tensor<2x2x5xf32>
  // CHECK: ds.cross_entropy_part_loss %{{.*}}, %{{.*}} {ignore_index = -100 : i64} : tensor<2x2x5xf32>, tensor<2x5xi32> -> tensor<f32>
  %3 = ds.cross_entropy_part_loss %2, %i {ignore_index = -100} : tensor<2x2x5xf32>, tensor<2x5xi32> -> tensor<f32>
  // CHECK: ds.cross_entropy_part_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} parts 4 : tensor<2x5x16xbf16>, tensor<2x5xi32>, tensor<2x5xbf16>, tensor<2x2x5xf32>, tensor<f32>
  %4 = ds.cross_entropy_part_grad %l, %i, %m, %2, %s parts 4 : tensor<2x5x16xbf16>, tensor<2x5xi32>, tensor<2x5xbf16>, tensor<2x2x5xf32>, tensor<f32>
  return
}

// CHECK-LABEL: func @shapes
func.func @shapes(%x: tensor<2x6xf32>) {
  // CHECK: ds.reshape %{{.*}} : tensor<2x6xf32> -> tensor<3x4xf32>
  %0 = ds.reshape %x : tensor<2x6xf32> -> tensor<3x4xf32>
  // CHECK: ds.transpose %{{.*}} [1, 0] : tensor<2x6xf32> -> tensor<6x2xf32>
  %1 = ds.transpose %x [1, 0] : tensor<2x6xf32> -> tensor<6x2xf32>
  // CHECK: ds.slice %{{.*}} offsets [0, 2] sizes [2, 3] : tensor<2x6xf32> -> tensor<2x3xf32>
  %2 = ds.slice %x offsets [0, 2] sizes [2, 3] : tensor<2x6xf32> -> tensor<2x3xf32>
  // CHECK: ds.pad %{{.*}} low [0, 2] high [1, 1] : tensor<2x3xf32> -> tensor<3x6xf32>
  %3 = ds.pad %2 low [0, 2] high [1, 1] : tensor<2x3xf32> -> tensor<3x6xf32>
  // CHECK: ds.concat %{{.*}}, %{{.*}} axis 1 : tensor<2x6xf32>, tensor<2x3xf32> -> tensor<2x9xf32>
  %4 = ds.concat %x, %2 axis 1 : tensor<2x6xf32>, tensor<2x3xf32> -> tensor<2x9xf32>
  // CHECK: ds.split %{{.*}} axis 1 sizes [1, 5] : tensor<2x6xf32> -> tensor<2x1xf32>, tensor<2x5xf32>
  %5:2 = ds.split %x axis 1 sizes [1, 5] : tensor<2x6xf32> -> tensor<2x1xf32>, tensor<2x5xf32>
  // CHECK: ds.broadcast %{{.*}} : tensor<2x6xf32> -> tensor<4x2x6xf32>
  %6 = ds.broadcast %x : tensor<2x6xf32> -> tensor<4x2x6xf32>
  // CHECK: ds.reduce_sum %{{.*}} axes [1] : tensor<2x6xf32> -> tensor<2xf32>
  %7 = ds.reduce_sum %x axes [1] : tensor<2x6xf32> -> tensor<2xf32>
  // CHECK: ds.reduce_mean %{{.*}} axes [0] keepdim : tensor<2x6xf32> -> tensor<1x6xf32>
  %8 = ds.reduce_mean %x axes [0] keepdim : tensor<2x6xf32> -> tensor<1x6xf32>
  // CHECK: ds.reduce_max %{{.*}} axes [0, 1] : tensor<2x6xf32> -> tensor<f32>
  %9 = ds.reduce_max %x axes [0, 1] : tensor<2x6xf32> -> tensor<f32>
  return
}

// CHECK-LABEL: func @optimizer
func.func @optimizer(%p: tensor<4x3xf32>, %g16: tensor<4x3xbf16>, %lr: tensor<f32>) {
  // CHECK: ds.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} lr %{{.*}} step %{{.*}} scale %{{.*}} betas(9.000000e-01, 0.94999999999999996) eps 1.000000e-08 weight_decay 1.000000e-01 : tensor<4x3xf32>, tensor<4x3xf32>
  %0:3 = ds.adamw %p, %p, %p, %p lr %lr step %lr scale %lr betas(0.9, 0.95) eps 1.0e-8 weight_decay 0.1 : tensor<4x3xf32>, tensor<4x3xf32>
  // CHECK: ds.overflow_guard %{{.*}}, %{{.*}} : tensor<f32>
  %1 = ds.overflow_guard %lr, %lr : tensor<f32>
  // CHECK: ds.sgd %{{.*}}, %{{.*}}, %{{.*}} lr %{{.*}} step %{{.*}} scale %{{.*}} momentum 9.000000e-01 dampening 0.000000e+00 weight_decay 1.000000e-02 nesterov true : tensor<4x3xf32>, tensor<4x3xbf16>
  %2:2 = ds.sgd %p, %g16, %p lr %lr step %lr scale %lr momentum 0.9 dampening 0.0 weight_decay 0.01 nesterov true : tensor<4x3xf32>, tensor<4x3xbf16>
  // CHECK: ds.lion %{{.*}}, %{{.*}}, %{{.*}} lr %{{.*}} step %{{.*}} scale %{{.*}} betas(9.000000e-01, 0.98999999999999999) weight_decay 1.000000e-01 : tensor<4x3xf32>, tensor<4x3xf32>
  %3:2 = ds.lion %p, %p, %p lr %lr step %lr scale %lr betas(0.9, 0.99) weight_decay 0.1 : tensor<4x3xf32>, tensor<4x3xf32>
  // CHECK: ds.adagrad %{{.*}}, %{{.*}}, %{{.*}} lr %{{.*}} step %{{.*}} scale %{{.*}} lr_decay 0.000000e+00 eps 1.000000e-10 weight_decay 0.000000e+00 : tensor<4x3xf32>, tensor<4x3xf32>
  %4:2 = ds.adagrad %p, %p, %p lr %lr step %lr scale %lr lr_decay 0.0 eps 1.0e-10 weight_decay 0.0 : tensor<4x3xf32>, tensor<4x3xf32>
  // CHECK: ds.lamb %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} lr %{{.*}} step %{{.*}} scale %{{.*}} betas(9.000000e-01, 0.99899999999999999) eps 1.000000e-08 weight_decay 1.000000e-02 coeff(1.000000e-02, 1.000000e+01) {bias_correction = true, eps_inside_sqrt = false} : tensor<4x3xf32>, tensor<4x3xbf16>
  %5:3 = ds.lamb %p, %g16, %p, %p lr %lr step %lr scale %lr betas(0.9, 0.999) eps 1.0e-8 weight_decay 0.01 coeff(0.01, 10.0) {bias_correction = true, eps_inside_sqrt = false} : tensor<4x3xf32>, tensor<4x3xbf16>
  // CHECK: %[[N:.*]] = ds.lamb_norms %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} scale %{{.*}} betas(9.000000e-01, 0.99899999999999999) eps 1.000000e-08 weight_decay 1.000000e-02 members [5, 7] {eps_inside_sqrt = false} : tensor<4x3xf32>, tensor<4x3xbf16> -> tensor<4xf32>
  %n = ds.lamb_norms %p, %g16, %p, %p scale %lr betas(0.9, 0.999) eps 1.0e-8 weight_decay 0.01 members [5, 7] {eps_inside_sqrt = false} : tensor<4x3xf32>, tensor<4x3xbf16> -> tensor<4xf32>
  // CHECK: ds.lamb %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} lr %{{.*}} step %{{.*}} scale %{{.*}} norms %[[N]] members [5, 7] : tensor<4xf32> betas
  %6:3 = ds.lamb %p, %g16, %p, %p lr %lr step %lr scale %lr norms %n members [5, 7] : tensor<4xf32> betas(0.9, 0.999) eps 1.0e-8 weight_decay 0.01 coeff(0.01, 10.0) {bias_correction = true, eps_inside_sqrt = false} : tensor<4x3xf32>, tensor<4x3xbf16>
  // CHECK: ds.muon %{{.*}}, %{{.*}}, %{{.*}} lr %{{.*}} step %{{.*}} scale %{{.*}} momentum 0.94999999999999996 weight_decay 1.000000e-01 ns_steps 5 {nesterov = true} : tensor<4x3xf32>, tensor<4x3xbf16>
  %7:2 = ds.muon %p, %g16, %p lr %lr step %lr scale %lr momentum 0.95 weight_decay 0.1 ns_steps 5 {nesterov = true} : tensor<4x3xf32>, tensor<4x3xbf16>
  // CHECK: ds.muon {{.*}} ns_steps 5 {heads = 2 : i64, nesterov = true} : tensor<4x3xf32>, tensor<4x3xf32>
  %h:2 = ds.muon %p, %p, %p lr %lr step %lr scale %lr momentum 0.95 weight_decay 0.1 ns_steps 5 {heads = 2 : i64, nesterov = true} : tensor<4x3xf32>, tensor<4x3xf32>
  // CHECK: ds.muon_momentum %{{.*}}, %{{.*}} scale %{{.*}} momentum 0.94999999999999996 {nesterov = false} : tensor<4x3xbf16>, tensor<4x3xf32>
  %8:2 = ds.muon_momentum %g16, %p scale %lr momentum 0.95 {nesterov = false} : tensor<4x3xbf16>, tensor<4x3xf32>
  // CHECK: ds.muon_apply %{{.*}}, %{{.*}} lr %{{.*}} scale %{{.*}} weight_decay 0.000000e+00 factor 1.000000e+00 : tensor<4x3xf32>, tensor<4x3xbf16>
  %9 = ds.muon_apply %p, %g16 lr %lr scale %lr weight_decay 0.0 factor 1.0 : tensor<4x3xf32>, tensor<4x3xbf16>
  return
}

// CHECK-LABEL: func @fused
func.func @fused(%x: tensor<2x8xf32>, %b: tensor<8xf32>) {
  // CHECK: ds.bias_gelu tanh %{{.*}}, %{{.*}} : tensor<2x8xf32>, tensor<8xf32>
  %0:2 = ds.bias_gelu tanh %x, %b : tensor<2x8xf32>, tensor<8xf32>
  // CHECK: ds.matmul_bias %{{.*}}, %{{.*}}, %{{.*}} {transpose_lhs} : tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32> -> tensor<8x8xf32>
  %mb = ds.matmul_bias %x, %x, %b {transpose_lhs} : tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32> -> tensor<8x8xf32>
  // CHECK: ds.matmul_bias_gelu none %{{.*}}, %{{.*}}, %{{.*}} {transpose_lhs} : tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32> -> tensor<8x8xf32>, tensor<8x8xf32>
  %mg:2 = ds.matmul_bias_gelu none %x, %x, %b {transpose_lhs} : tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32> -> tensor<8x8xf32>, tensor<8x8xf32>
  // CHECK: ds.matmul_gelu_grad tanh %{{.*}}, %{{.*}}, %{{.*}} {transpose_lhs} : tensor<2x8xf32>, tensor<2x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>, tensor<8xf32>
  %gg:2 = ds.matmul_gelu_grad tanh %x, %x, %mb {transpose_lhs} : tensor<2x8xf32>, tensor<2x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>, tensor<8xf32>
  // CHECK: ds.add_layer_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} eps 1.000000e-05 : tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>
  %1:2 = ds.add_layer_norm %x, %0#0, %b, %b eps 1.0e-5 : tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>
  // CHECK: ds.add_layer_norm %{{.*}}, %{{.*}}, %{{.*}} eps 1.000000e-05 : tensor<2x8xf32>, tensor<8xf32>
  %2:2 = ds.add_layer_norm %x, %1#1, %b eps 1.0e-5 : tensor<2x8xf32>, tensor<8xf32>
  return
}

// CHECK-LABEL: func @fused_elementwise
func.func @fused_elementwise(%x: tensor<2x8xbf16>, %b: tensor<8xbf16>) -> (tensor<2x8xbf16>, tensor<2x8xf32>) {
  // CHECK: %{{.*}}:2 = ds.fused_elementwise %{{.*}}, %{{.*}} : (tensor<2x8xbf16>, tensor<8xbf16>) -> (tensor<2x8xbf16>, tensor<2x8xf32>) {
  // CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<2x8xbf16>, %[[B:.*]]: tensor<8xbf16>):
  // CHECK-NEXT:   %[[S:.*]] = ds.add %[[X]], %[[B]] : tensor<2x8xbf16>, tensor<8xbf16>
  // CHECK-NEXT:   %[[W:.*]] = ds.cast %[[S]] : tensor<2x8xbf16> -> tensor<2x8xf32>
  // CHECK-NEXT:   ds.yield %[[S]], %[[W]] : tensor<2x8xbf16>, tensor<2x8xf32>
  %0:2 = ds.fused_elementwise %x, %b : (tensor<2x8xbf16>, tensor<8xbf16>) -> (tensor<2x8xbf16>, tensor<2x8xf32>) {
  ^bb0(%a0: tensor<2x8xbf16>, %a1: tensor<8xbf16>):
    %s = ds.add %a0, %a1 : tensor<2x8xbf16>, tensor<8xbf16>
    %w = ds.cast %s : tensor<2x8xbf16> -> tensor<2x8xf32>
    ds.yield %s, %w : tensor<2x8xbf16>, tensor<2x8xf32>
  }
  return %0#0, %0#1 : tensor<2x8xbf16>, tensor<2x8xf32>
}

// A group ending in a sum over its leading dims: its result is the group's
// trailing dims.
// CHECK-LABEL: func @fused_elementwise_sum
func.func @fused_elementwise_sum(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>) {
  // CHECK: %{{.*}}:2 = ds.fused_elementwise %{{.*}} : (tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>) {
  // CHECK:   ds.reduce_sum %{{.*}} axes [0] : tensor<2x8xf32> -> tensor<8xf32>
  %0:2 = ds.fused_elementwise %x : (tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>) {
  ^bb0(%a: tensor<2x8xf32>):
    %e = ds.exp %a : tensor<2x8xf32>
    %s = ds.reduce_sum %e axes [0] : tensor<2x8xf32> -> tensor<8xf32>
    ds.yield %e, %s : tensor<2x8xf32>, tensor<8xf32>
  }
  return %0#0, %0#1 : tensor<2x8xf32>, tensor<8xf32>
}
