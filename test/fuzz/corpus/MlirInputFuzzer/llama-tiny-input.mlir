module @llama {
  ds.variable param @model.embed_tokens.weight : tensor<8x4xf32> init normal std 2.000000e-02
  ds.variable param @model.layers.0.input_layernorm.weight : tensor<4xf32> init ones
  ds.variable param @model.layers.0.self_attn.q_proj.weight : tensor<4x4xf32> init normal std 2.000000e-02
  ds.variable param @model.layers.0.self_attn.k_proj.weight : tensor<4x4xf32> init normal std 2.000000e-02
  ds.variable param @model.layers.0.self_attn.v_proj.weight : tensor<4x4xf32> init normal std 2.000000e-02
  ds.variable param @model.layers.0.self_attn.o_proj.weight : tensor<4x4xf32> init normal std 2.000000e-02
  ds.variable param @model.layers.0.post_attention_layernorm.weight : tensor<4xf32> init ones
  ds.variable param @model.layers.0.mlp.gate_proj.weight : tensor<8x4xf32> init normal std 2.000000e-02
  ds.variable param @model.layers.0.mlp.up_proj.weight : tensor<8x4xf32> init normal std 2.000000e-02
  ds.variable param @model.layers.0.mlp.down_proj.weight : tensor<4x8xf32> init normal std 2.000000e-02
  ds.variable param @model.norm.weight : tensor<4xf32> init ones
  ds.variable param @lm_head.weight : tensor<8x4xf32> init normal std 2.000000e-02
  func.func @forward(%arg0: tensor<4x4xi32>, %arg1: tensor<4x4xi32>) -> tensor<f32> {
    %0 = ds.load @model.embed_tokens.weight : tensor<8x4xf32>
    %1 = ds.embedding %0, %arg0 : tensor<8x4xf32>, tensor<4x4xi32> -> tensor<4x4x4xf32>
    %2 = ds.load @model.layers.0.input_layernorm.weight : tensor<4xf32>
    %3 = ds.rms_norm %1, %2 eps 1.000000e-05 : tensor<4x4x4xf32>, tensor<4xf32>
    %4 = ds.load @model.layers.0.self_attn.q_proj.weight : tensor<4x4xf32>
    %5 = ds.matmul %3, %4 {transpose_rhs} : tensor<4x4x4xf32>, tensor<4x4xf32> -> tensor<4x4x4xf32>
    %6 = ds.reshape %5 : tensor<4x4x4xf32> -> tensor<4x4x1x4xf32>
    %7 = ds.transpose %6 [0, 2, 1, 3] : tensor<4x4x1x4xf32> -> tensor<4x1x4x4xf32>
    %8 = ds.load @model.layers.0.self_attn.k_proj.weight : tensor<4x4xf32>
    %9 = ds.matmul %3, %8 {transpose_rhs} : tensor<4x4x4xf32>, tensor<4x4xf32> -> tensor<4x4x4xf32>
    %10 = ds.reshape %9 : tensor<4x4x4xf32> -> tensor<4x4x1x4xf32>
    %11 = ds.transpose %10 [0, 2, 1, 3] : tensor<4x4x1x4xf32> -> tensor<4x1x4x4xf32>
    %12 = ds.load @model.layers.0.self_attn.v_proj.weight : tensor<4x4xf32>
    %13 = ds.matmul %3, %12 {transpose_rhs} : tensor<4x4x4xf32>, tensor<4x4xf32> -> tensor<4x4x4xf32>
    %14 = ds.reshape %13 : tensor<4x4x4xf32> -> tensor<4x4x1x4xf32>
    %15 = ds.transpose %14 [0, 2, 1, 3] : tensor<4x4x1x4xf32> -> tensor<4x1x4x4xf32>
    %16 = ds.rotary %7 theta 1.000000e+04 : tensor<4x1x4x4xf32>
    %17 = ds.rotary %11 theta 1.000000e+04 : tensor<4x1x4x4xf32>
    %18 = ds.attention %16, %17, %15 scale 5.000000e-01 causal : tensor<4x1x4x4xf32>, tensor<4x1x4x4xf32>, tensor<4x1x4x4xf32> -> tensor<4x1x4x4xf32>
    %19 = ds.transpose %18 [0, 2, 1, 3] : tensor<4x1x4x4xf32> -> tensor<4x4x1x4xf32>
    %20 = ds.reshape %19 : tensor<4x4x1x4xf32> -> tensor<4x4x4xf32>
    %21 = ds.load @model.layers.0.self_attn.o_proj.weight : tensor<4x4xf32>
    %22 = ds.matmul %20, %21 {transpose_rhs} : tensor<4x4x4xf32>, tensor<4x4xf32> -> tensor<4x4x4xf32>
    %23 = ds.add %1, %22 : tensor<4x4x4xf32>, tensor<4x4x4xf32>
    %24 = ds.load @model.layers.0.post_attention_layernorm.weight : tensor<4xf32>
    %25 = ds.rms_norm %23, %24 eps 1.000000e-05 : tensor<4x4x4xf32>, tensor<4xf32>
    %26 = ds.load @model.layers.0.mlp.gate_proj.weight : tensor<8x4xf32>
    %27 = ds.matmul %25, %26 {transpose_rhs} : tensor<4x4x4xf32>, tensor<8x4xf32> -> tensor<4x4x8xf32>
    %28 = ds.load @model.layers.0.mlp.up_proj.weight : tensor<8x4xf32>
    %29 = ds.matmul %25, %28 {transpose_rhs} : tensor<4x4x4xf32>, tensor<8x4xf32> -> tensor<4x4x8xf32>
    %30 = ds.silu %27 : tensor<4x4x8xf32>
    %31 = ds.mul %30, %29 : tensor<4x4x8xf32>, tensor<4x4x8xf32>
    %32 = ds.load @model.layers.0.mlp.down_proj.weight : tensor<4x8xf32>
    %33 = ds.matmul %31, %32 {transpose_rhs} : tensor<4x4x8xf32>, tensor<4x8xf32> -> tensor<4x4x4xf32>
    %34 = ds.add %23, %33 : tensor<4x4x4xf32>, tensor<4x4x4xf32>
    %35 = ds.load @model.norm.weight : tensor<4xf32>
    %36 = ds.rms_norm %34, %35 eps 1.000000e-05 : tensor<4x4x4xf32>, tensor<4xf32>
    %37 = ds.load @lm_head.weight : tensor<8x4xf32>
    %38 = ds.matmul %36, %37 {transpose_rhs} : tensor<4x4x4xf32>, tensor<8x4xf32> -> tensor<4x4x8xf32>
    %39 = ds.cross_entropy %38, %arg1 : tensor<4x4x8xf32>, tensor<4x4xi32> -> tensor<f32>
    return %39 : tensor<f32>
  }
}
