module @gpt2 {
  ds.variable param @transformer.wte.weight : tensor<8x4xf32> init normal std 2.000000e-02
  ds.variable param @transformer.wpe.weight : tensor<4x4xf32> init normal std 2.000000e-02
  ds.variable param @transformer.h.0.ln_1.weight : tensor<4xf32> init ones
  ds.variable param @transformer.h.0.ln_1.bias : tensor<4xf32> init zeros
  ds.variable param @transformer.h.0.attn.c_attn.weight : tensor<12x4xf32> init normal std 2.000000e-02
  ds.variable param @transformer.h.0.attn.c_attn.bias : tensor<12xf32> init zeros
  ds.variable param @transformer.h.0.attn.c_proj.weight : tensor<4x4xf32> init normal std 0.014142135623730949
  ds.variable param @transformer.h.0.attn.c_proj.bias : tensor<4xf32> init zeros
  ds.variable param @transformer.h.0.ln_2.weight : tensor<4xf32> init ones
  ds.variable param @transformer.h.0.ln_2.bias : tensor<4xf32> init zeros
  ds.variable param @transformer.h.0.mlp.c_fc.weight : tensor<16x4xf32> init normal std 2.000000e-02
  ds.variable param @transformer.h.0.mlp.c_fc.bias : tensor<16xf32> init zeros
  ds.variable param @transformer.h.0.mlp.c_proj.weight : tensor<4x16xf32> init normal std 0.014142135623730949
  ds.variable param @transformer.h.0.mlp.c_proj.bias : tensor<4xf32> init zeros
  ds.variable param @transformer.ln_f.weight : tensor<4xf32> init ones
  ds.variable param @transformer.ln_f.bias : tensor<4xf32> init zeros
  func.func @forward(%arg0: tensor<4x4xi32>, %arg1: tensor<4x4xi32>) -> tensor<f32> {
    %0 = ds.load @transformer.wte.weight : tensor<8x4xf32>
    %1 = ds.embedding %0, %arg0 : tensor<8x4xf32>, tensor<4x4xi32> -> tensor<4x4x4xf32>
    %2 = ds.iota dim 0 : tensor<4xi32>
    %3 = ds.load @transformer.wpe.weight : tensor<4x4xf32>
    %4 = ds.embedding %3, %2 : tensor<4x4xf32>, tensor<4xi32> -> tensor<4x4xf32>
    %5 = ds.add %1, %4 : tensor<4x4x4xf32>, tensor<4x4xf32>
    %6 = ds.load @transformer.h.0.ln_1.weight : tensor<4xf32>
    %7 = ds.load @transformer.h.0.ln_1.bias : tensor<4xf32>
    %8 = ds.layer_norm %5, %6, %7 eps 1.000000e-05 : tensor<4x4x4xf32>, tensor<4xf32>, tensor<4xf32>
    %9 = ds.load @transformer.h.0.attn.c_attn.weight : tensor<12x4xf32>
    %10 = ds.matmul %8, %9 {transpose_rhs} : tensor<4x4x4xf32>, tensor<12x4xf32> -> tensor<4x4x12xf32>
    %11 = ds.load @transformer.h.0.attn.c_attn.bias : tensor<12xf32>
    %12 = ds.add %10, %11 : tensor<4x4x12xf32>, tensor<12xf32>
    %13:3 = ds.split %12 axis 2 sizes [4, 4, 4] : tensor<4x4x12xf32> -> tensor<4x4x4xf32>, tensor<4x4x4xf32>, tensor<4x4x4xf32>
    %14 = ds.reshape %13#0 : tensor<4x4x4xf32> -> tensor<4x4x1x4xf32>
    %15 = ds.transpose %14 [0, 2, 1, 3] : tensor<4x4x1x4xf32> -> tensor<4x1x4x4xf32>
    %16 = ds.reshape %13#1 : tensor<4x4x4xf32> -> tensor<4x4x1x4xf32>
    %17 = ds.transpose %16 [0, 2, 1, 3] : tensor<4x4x1x4xf32> -> tensor<4x1x4x4xf32>
    %18 = ds.reshape %13#2 : tensor<4x4x4xf32> -> tensor<4x4x1x4xf32>
    %19 = ds.transpose %18 [0, 2, 1, 3] : tensor<4x4x1x4xf32> -> tensor<4x1x4x4xf32>
    %20 = ds.attention %15, %17, %19 scale 5.000000e-01 causal : tensor<4x1x4x4xf32>, tensor<4x1x4x4xf32>, tensor<4x1x4x4xf32> -> tensor<4x1x4x4xf32>
    %21 = ds.transpose %20 [0, 2, 1, 3] : tensor<4x1x4x4xf32> -> tensor<4x4x1x4xf32>
    %22 = ds.reshape %21 : tensor<4x4x1x4xf32> -> tensor<4x4x4xf32>
    %23 = ds.load @transformer.h.0.attn.c_proj.weight : tensor<4x4xf32>
    %24 = ds.matmul %22, %23 {transpose_rhs} : tensor<4x4x4xf32>, tensor<4x4xf32> -> tensor<4x4x4xf32>
    %25 = ds.load @transformer.h.0.attn.c_proj.bias : tensor<4xf32>
    %26 = ds.add %24, %25 : tensor<4x4x4xf32>, tensor<4xf32>
    %27 = ds.add %5, %26 : tensor<4x4x4xf32>, tensor<4x4x4xf32>
    %28 = ds.load @transformer.h.0.ln_2.weight : tensor<4xf32>
    %29 = ds.load @transformer.h.0.ln_2.bias : tensor<4xf32>
    %30 = ds.layer_norm %27, %28, %29 eps 1.000000e-05 : tensor<4x4x4xf32>, tensor<4xf32>, tensor<4xf32>
    %31 = ds.load @transformer.h.0.mlp.c_fc.weight : tensor<16x4xf32>
    %32 = ds.matmul %30, %31 {transpose_rhs} : tensor<4x4x4xf32>, tensor<16x4xf32> -> tensor<4x4x16xf32>
    %33 = ds.load @transformer.h.0.mlp.c_fc.bias : tensor<16xf32>
    %34 = ds.add %32, %33 : tensor<4x4x16xf32>, tensor<16xf32>
    %35 = ds.gelu tanh %34 : tensor<4x4x16xf32>
    %36 = ds.load @transformer.h.0.mlp.c_proj.weight : tensor<4x16xf32>
    %37 = ds.matmul %35, %36 {transpose_rhs} : tensor<4x4x16xf32>, tensor<4x16xf32> -> tensor<4x4x4xf32>
    %38 = ds.load @transformer.h.0.mlp.c_proj.bias : tensor<4xf32>
    %39 = ds.add %37, %38 : tensor<4x4x4xf32>, tensor<4xf32>
    %40 = ds.add %27, %39 : tensor<4x4x4xf32>, tensor<4x4x4xf32>
    %41 = ds.load @transformer.ln_f.weight : tensor<4xf32>
    %42 = ds.load @transformer.ln_f.bias : tensor<4xf32>
    %43 = ds.layer_norm %40, %41, %42 eps 1.000000e-05 : tensor<4x4x4xf32>, tensor<4xf32>, tensor<4xf32>
    %44 = ds.load @transformer.wte.weight : tensor<8x4xf32>
    %45 = ds.matmul %43, %44 {transpose_rhs} : tensor<4x4x4xf32>, tensor<8x4xf32> -> tensor<4x4x8xf32>
    %46 = ds.cross_entropy %45, %arg1 : tensor<4x4x8xf32>, tensor<4x4xi32> -> tensor<f32>
    return %46 : tensor<f32>
  }
}
