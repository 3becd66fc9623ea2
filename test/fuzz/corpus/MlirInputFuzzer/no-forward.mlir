ds.variable param @w : tensor<4xf32> init zeros
