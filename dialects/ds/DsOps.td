//===- DsOps.td - ds dialect operations -------------------*- tablegen -*-===//

#ifndef DS_OPS_TD
#define DS_OPS_TD

include "dialects/ds/DsBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Model state
//===----------------------------------------------------------------------===//

def DS_VariableOp : DS_Op<"variable",
    [Symbol, IsolatedFromAbove,
     DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a named piece of model state";
  let description = [{
    Declares persistent state: a parameter, a gradient accumulator or an
    optimizer moment. The name is the checkpoint name (nanoGPT / Hugging Face
    state-dict names for parameters); gradients and moments name the
    parameter they belong to with `of`. `init` says how the runtime fills it:
    `normal` draws N(0, std^2) from the counter-based RNG keyed by the name.

    ```mlir
    ds.variable param @"transformer.wte.weight" : tensor<256x64xf32> init normal std 2.000000e-02
    ```
  }];
  let arguments = (ins DS_VariableKindAttr:$kind, SymbolNameAttr:$sym_name,
                       OptionalAttr<FlatSymbolRefAttr>:$of,
                       TypeAttrOf<DS_FloatTensor>:$type, DS_InitKindAttr:$init,
                       OptionalAttr<F64Attr>:$std);
  let assemblyFormat = [{
    $kind $sym_name (`of` $of^)? `:` $type `init` $init (`std` $std^)?
    attr-dict
  }];
  // verify() checks the op alone; verifySymbolUses checks `of` through the
  // verifier's cached symbol table (a lookup per variable that scanned the
  // module made verification quadratic in the number of variables).
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
  }];
}

def DS_LoadOp : DS_Op<"load",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     MemoryEffects<[MemRead]>]> {
  let summary = "reads a variable";
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def DS_StoreOp : DS_Op<"store",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     MemoryEffects<[MemWrite]>]> {
  let summary = "writes a variable";
  let arguments = (ins DS_FloatTensor:$value, FlatSymbolRefAttr:$name);
  let assemblyFormat = "$value `,` $name attr-dict `:` type($value)";
}

//===----------------------------------------------------------------------===//
// Constants and index generation
//===----------------------------------------------------------------------===//

def DS_ConstantOp : DS_Op<"constant",
    [ConstantLike, Pure, AllTypesMatch<["value", "result"]>]> {
  let summary = "a constant tensor";
  let arguments = (ins ElementsAttr:$value);
  let results = (outs DS_AnyTensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def DS_IotaOp : DS_Op<"iota", [DS_KernelWithAttrs, Pure]> {
  let kernel = DS_Kernel<["dim"], [], ["->f32|f64|i32|i64"], [], "none">;
  let summary = "indices along one dimension";
  let description = [{
    Each element is its index along `dim`: `ds.iota dim 0 : tensor<4xi32>`
    is [0, 1, 2, 3]. Used for learned position embeddings.
  }];
  let arguments = (ins I64Attr:$dim);
  let results = (outs DS_AnyTensor:$result);
  let assemblyFormat = "`dim` $dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class DS_BinaryOp<string mnemonic, list<Trait> traits = []>
    : DS_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor,
                                           DS_KernelOpInterface])> {
  let kernel = DS_F32Kernel<[], [], "f32,f32->f32", "any_input">;
  let description = [{
    Elementwise with numpy broadcasting: trailing dimensions align and a
    dimension of size 1 expands.
  }];
  let arguments = (ins DS_FloatTensor:$lhs, DS_FloatTensor:$rhs);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)
  }];
}

class DS_VJPBinaryOp<string mnemonic>
    : DS_BinaryOp<mnemonic, [DeclareOpInterfaceMethods<DS_VJPOpInterface>,
                             DS_InPlaceSafe]>;

def DS_AddOp : DS_VJPBinaryOp<"add"> { let summary = "lhs + rhs"; }
def DS_SubOp : DS_VJPBinaryOp<"sub"> { let summary = "lhs - rhs"; }
def DS_MulOp : DS_VJPBinaryOp<"mul"> { let summary = "lhs * rhs"; }
def DS_DivOp : DS_VJPBinaryOp<"div"> { let summary = "lhs / rhs"; }
def DS_MinimumOp : DS_BinaryOp<"minimum", [DS_InPlaceSafe]> {
  let summary = "min(lhs, rhs)";
}
def DS_MaximumOp : DS_BinaryOp<"maximum", [DS_InPlaceSafe]> {
  let summary = "max(lhs, rhs)";
}
def DS_OverflowGuardOp : DS_Op<"overflow_guard",
    [DS_KernelOpInterface, Pure, AllTypesMatch<["scale", "result"]>]> {
  let kernel = DS_F32Kernel<[], [], "f32,f32->f32", "none">;
  let summary = "the update scale, or NaN when the gradients overflowed";
  let description = [{
    `scale` where `norm` (the global gradient norm) is finite, NaN where it
    is not. ds.adamw leaves its parameter and moments untouched when its
    scale is not finite, so this is how mixed precision skips the update of
    a step whose gradients overflowed (ds-precision inserts it).
  }];
  let arguments = (ins DS_ScalarF32:$scale, DS_ScalarF32:$norm);
  let results = (outs DS_ScalarF32:$result);
  let assemblyFormat = "$scale `,` $norm attr-dict `:` type($scale)";
}

def DS_EqualOp : DS_BinaryOp<"equal"> {
  let summary = "1 where lhs == rhs, else 0";
}

class DS_UnaryOp<string mnemonic, list<Trait> kernel = [DS_KernelOpInterface]>
    : DS_Op<mnemonic, !listconcat(kernel, [Pure, SameOperandsAndResultType,
        DeclareOpInterfaceMethods<DS_VJPOpInterface>, DS_InPlaceSafe])> {
  let kernel = DS_F32Kernel<[], [], "f32->f32", "any_input">;
  let arguments = (ins DS_FloatTensor:$x);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def DS_NegOp : DS_UnaryOp<"neg"> { let summary = "-x"; }
def DS_ExpOp : DS_UnaryOp<"exp"> { let summary = "e^x"; }
def DS_LogOp : DS_UnaryOp<"log"> { let summary = "natural logarithm"; }
def DS_TanhOp : DS_UnaryOp<"tanh"> { let summary = "hyperbolic tangent"; }
def DS_SqrtOp : DS_UnaryOp<"sqrt"> { let summary = "square root"; }
def DS_RsqrtOp : DS_UnaryOp<"rsqrt"> { let summary = "1 / sqrt(x)"; }
def DS_ReluOp : DS_UnaryOp<"relu"> { let summary = "max(x, 0)"; }
def DS_SiluOp : DS_UnaryOp<"silu"> { let summary = "x * sigmoid(x)"; }

def DS_GeluOp : DS_UnaryOp<"gelu", [DS_KernelWithAttrs]> {
  let kernel = DS_F32Kernel<["approximate"], [], "f32->f32", "any_input">;
  let summary = "Gaussian error linear unit";
  let description = [{
    `tanh`: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (GPT-2's form);
    `none`: 0.5 x (1 + erf(x / sqrt(2))), as PyTorch's `nn.GELU()`.
  }];
  let arguments = (ins DS_GeluApproximationAttr:$approximate,
                       DS_FloatTensor:$x);
  let assemblyFormat = "$approximate $x attr-dict `:` type($x)";
}

class DS_ActivationGradOp<string mnemonic,
                          list<Trait> kernel = [DS_KernelOpInterface]>
    : DS_Op<mnemonic, !listconcat(kernel, [Pure, SameOperandsAndResultType,
                                           DS_InPlaceSafe])> {
  let kernel = DS_F32Kernel<[], [], "f32,f32->f32", "any_input">;
  let summary = "grad * activation'(x)";
  let arguments = (ins DS_FloatTensor:$x, DS_FloatTensor:$grad);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$x `,` $grad attr-dict `:` type($x)";
}

def DS_ReluGradOp : DS_ActivationGradOp<"relu_grad">;
def DS_SiluGradOp : DS_ActivationGradOp<"silu_grad">;
def DS_GeluGradOp : DS_ActivationGradOp<"gelu_grad", [DS_KernelWithAttrs]> {
  let kernel = DS_F32Kernel<["approximate"], [], "f32,f32->f32", "any_input">;
  let arguments = (ins DS_GeluApproximationAttr:$approximate,
                       DS_FloatTensor:$x, DS_FloatTensor:$grad);
  let assemblyFormat = "$approximate $x `,` $grad attr-dict `:` type($x)";
}

def DS_SwigluOp : DS_Op<"swiglu",
    [DS_KernelOpInterface, DS_InPlaceSafe, Pure, SameOperandsAndResultType,
     DeclareOpInterfaceMethods<DS_VJPOpInterface>]> {
  let summary = "silu(gate) * up: Llama's gated feed-forward activation";
  let description = [{
    Hugging Face's `act_fn(gate_proj(x)) * up_proj(x)` in one kernel, so
    silu(gate) is neither written nor kept for the backward. The VJP reuses
    the forward's pieces: ds.silu_grad(gate, grad * up) for gate and
    grad * silu(gate) for up.
  }];
  let arguments = (ins DS_FloatTensor:$gate, DS_FloatTensor:$up);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$gate `,` $up attr-dict `:` type($gate)";
  let kernel = DS_F32Kernel<[], [], "f32,f32->f32", "any_input">;
}

def DS_CastOp : DS_Op<"cast",
    [DS_KernelOpInterface, Pure, SameOperandsAndResultShape,
     DeclareOpInterfaceMethods<DS_VJPOpInterface>]> {
  let kernel = DS_Kernel<[], [], ["float->float"], [], "any_input">;
  let summary = "converts between f64, f32, f16 and bf16";
  let description = "Rounds to nearest even when narrowing.";
  let arguments = (ins DS_FloatTensor:$x);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

def DS_DropoutOp : DS_Op<"dropout",
    [DS_KernelWithAttrs, DS_InPlaceSafe, Pure, SameOperandsAndResultType,
     DeclareOpInterfaceMethods<DS_VJPOpInterface>]> {
  let kernel = DS_F32Kernel<["id", "parts", "part_dim", "sample_offset"],
                            ["rate"], "f32->f32", "any_input">;
  let summary = "inverted dropout with a counter-based mask";
  let description = [{
    Element e is kept when uniform(seed, id, step, g) >= rate and then scaled
    by 1 / (1 - rate), where g is e's global index: the leading dimension is
    the micro-batch, which starts at global sample s, so g = s * (elements
    per sample) + e. The seed, the step and s come from the execution
    context; `id` is unique per dropout site, so the mask is reproducible by
    any recomputation and the same however the global batch is split over
    ranks and micro-steps.

    With `parts` P > 1 (sequence parallelism, phase shard), x is the
    rank's part of an activation cut along dimension `part_dim` into P
    contiguous parts, the one numbered by the rank's place in its
    tensor-parallel group: e is then the element's index in the whole
    activation, so every rank draws the mask one rank would.

    With `sample_offset` k > 0, x's leading dimension starts k samples
    into the micro-batch (s + k): a chunk of it (ds-chunk-micro-batch), or
    micro-batch k / B of a pipeline stage's unrolled step (ds-pipeline),
    draws the mask the whole micro-batch would.
  }];
  let arguments = (ins DS_FloatTensor:$x, F64Attr:$rate, I64Attr:$id,
                       DefaultValuedAttr<I64Attr, "1">:$parts,
                       DefaultValuedAttr<I64Attr, "0">:$part_dim,
                       DefaultValuedAttr<I64Attr, "0">:$sample_offset);
  let results = (outs DS_FloatTensor:$result);
  let builders = [
    // A dropout on a whole activation.
    OpBuilder<(ins "::mlir::Value":$x, "::mlir::FloatAttr":$rate,
                   "::mlir::IntegerAttr":$id), [{
      build($_builder, $_state, x.getType(), x, rate, id,
            $_builder.getI64IntegerAttr(1), $_builder.getI64IntegerAttr(0),
            $_builder.getI64IntegerAttr(0));
    }]>
  ];
  let assemblyFormat = [{
    $x `rate` $rate `id` $id (`parts` $parts^)? (`along` $part_dim^)?
    (`from_sample` $sample_offset^)? attr-dict `:` type($x)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Contractions and normalizations
//===----------------------------------------------------------------------===//

def DS_MatmulOp : DS_Op<"matmul",
    [DeclareOpInterfaceMethods<DS_KernelOpInterface,
         ["getKernelAttributes", "getFlops"]>, Pure, InferTypeOpAdaptor,
     DeclareOpInterfaceMethods<DS_VJPOpInterface>]> {
  let kernel = DS_Kernel<["transpose_lhs", "transpose_rhs"], [], ["f32,f32->f32"], ["bf16,bf16->bf16|f32", "f16,f16->f16|f32"], "none">;
  let summary = "batched matrix product";
  let description = [{
    lhs is [..., M, K] ([..., K, M] with `transpose_lhs`), rhs is [..., K, N]
    ([..., N, K] with `transpose_rhs`); batch dimensions broadcast, so a 2-D
    rhs applies to every batch of lhs (a linear layer).
  }];
  let arguments = (ins DS_FloatTensor:$lhs, DS_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
}

def DS_LayerNormOp : DS_Op<"layer_norm",
    [DS_KernelWithAttrs, Pure, AllTypesMatch<["x", "result"]>,
     DeclareOpInterfaceMethods<DS_VJPOpInterface>]> {
  let kernel = DS_F32Kernel<[], ["eps"], "f32*->f32", "any_input">;
  let summary = "layer normalization over the last dimension";
  let description = [{
    (x - mean) / sqrt(var + eps) * weight + bias, with the biased variance;
    `bias` is optional (nanoGPT's `bias=False`).
  }];
  let arguments = (ins DS_FloatTensor:$x, DS_FloatTensor:$weight,
                       Optional<DS_FloatTensor>:$bias, F64Attr:$eps);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $weight (`,` $bias^)? `eps` $eps attr-dict `:` type($x) `,`
    type($weight) (`,` type($bias)^)?
  }];
  let hasVerifier = 1;
}

def DS_LayerNormGradOp : DS_Op<"layer_norm_grad",
    [DS_KernelWithAttrs, Pure, AllTypesMatch<["x", "grad", "dx"]>,
     AllTypesMatch<["weight", "dweight", "dbias"]>]> {
  let kernel = DS_F32Kernel<[], ["eps"], "f32,f32,f32->f32,f32,f32", "none">;
  let summary = "cotangents of layer_norm's x, weight and bias";
  let arguments = (ins DS_FloatTensor:$x, DS_FloatTensor:$weight,
                       DS_FloatTensor:$grad, F64Attr:$eps);
  let results = (outs DS_FloatTensor:$dx, DS_FloatTensor:$dweight,
                      DS_FloatTensor:$dbias);
  let assemblyFormat = [{
    $x `,` $weight `,` $grad `eps` $eps attr-dict `:` type($x) `,`
    type($weight)
  }];
}

def DS_RmsNormOp : DS_Op<"rms_norm",
    [DS_KernelWithAttrs, Pure, AllTypesMatch<["x", "result"]>,
     DeclareOpInterfaceMethods<DS_VJPOpInterface>]> {
  let kernel = DS_F32Kernel<[], ["eps"], "f32,f32->f32", "any_input">;
  let summary = "RMS normalization over the last dimension";
  let description = "x / sqrt(mean(x^2) + eps) * weight";
  let arguments = (ins DS_FloatTensor:$x, DS_FloatTensor:$weight,
                       F64Attr:$eps);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $weight `eps` $eps attr-dict `:` type($x) `,` type($weight)
  }];
  let hasVerifier = 1;
}

def DS_RmsNormGradOp : DS_Op<"rms_norm_grad",
    [DS_KernelWithAttrs, Pure, AllTypesMatch<["x", "grad", "dx"]>,
     AllTypesMatch<["weight", "dweight"]>]> {
  let kernel = DS_F32Kernel<[], ["eps"], "f32,f32,f32->f32,f32", "none">;
  let summary = "cotangents of rms_norm's x and weight";
  let arguments = (ins DS_FloatTensor:$x, DS_FloatTensor:$weight,
                       DS_FloatTensor:$grad, F64Attr:$eps);
  let results = (outs DS_FloatTensor:$dx, DS_FloatTensor:$dweight);
  let assemblyFormat = [{
    $x `,` $weight `,` $grad `eps` $eps attr-dict `:` type($x) `,`
    type($weight)
  }];
}

def DS_SoftmaxOp : DS_Op<"softmax",
    [DS_KernelOpInterface, Pure, SameOperandsAndResultType,
     DeclareOpInterfaceMethods<DS_VJPOpInterface>]> {
  let kernel = DS_F32Kernel<[], [], "f32->f32", "any_input">;
  let summary = "softmax over the last dimension";
  let arguments = (ins DS_FloatTensor:$x);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def DS_SoftmaxGradOp : DS_Op<"softmax_grad",
    [DS_KernelOpInterface, Pure, SameOperandsAndResultType]> {
  let kernel = DS_F32Kernel<[], [], "f32,f32->f32", "any_input">;
  let summary = "y * (grad - sum(grad * y)) over the last dimension";
  let arguments = (ins DS_FloatTensor:$y, DS_FloatTensor:$grad);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = "$y `,` $grad attr-dict `:` type($y)";
}

def DS_AttentionOp : DS_Op<"attention",
    [DeclareOpInterfaceMethods<DS_KernelOpInterface,
         ["getKernelAttributes", "getFlops"]>, Pure, InferTypeOpAdaptor,
     DeclareOpInterfaceMethods<DS_VJPOpInterface>]> {
  let kernel = DS_F32Kernel<["causal", "seq_major"], ["scale"], "f32,f32,f32->f32", "none">;
  let summary = "scaled dot-product attention";
  let description = [{
    q [B, H, Tq, D], k [B, H, Tk, D], v [B, H, Tk, Dv] -> [B, H, Tq, Dv]:
    softmax(scale * q k^T) v. With `causal`, query i sees keys
    j <= i + (Tk - Tq). With `seq_major` every operand and the result are
    [B, T, H, D] instead (the heads of a position side by side, as the
    projections write them): phase `fused` folds the transposes around an
    attention into it (ds-fold-attention-layout); sharding and autodiff
    see the [B, H, T, D] form only.
  }];
  let arguments = (ins DS_FloatTensor:$q, DS_FloatTensor:$k,
                       DS_FloatTensor:$v, F64Attr:$scale, UnitAttr:$causal,
                       UnitAttr:$seq_major);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $q `,` $k `,` $v `scale` $scale (`causal` $causal^)?
    (`seq_major` $seq_major^)? attr-dict `:`
    type($q) `,` type($k) `,` type($v) `->` type($result)
  }];
}

def DS_AttentionGradOp : DS_Op<"attention_grad",
    [DeclareOpInterfaceMethods<DS_KernelOpInterface,
         ["getKernelAttributes", "getFlops"]>, Pure, AllTypesMatch<["q", "dq"]>, AllTypesMatch<["k", "dk"]>,
     AllTypesMatch<["v", "dv"]>]> {
  let kernel = DS_F32Kernel<["causal", "seq_major"], ["scale"], "f32,f32,f32,f32->f32,f32,f32", "none">;
  let summary = "cotangents of attention's q, k and v";
  let arguments = (ins DS_FloatTensor:$q, DS_FloatTensor:$k,
                       DS_FloatTensor:$v, DS_FloatTensor:$grad,
                       F64Attr:$scale, UnitAttr:$causal,
                       UnitAttr:$seq_major);
  let results = (outs DS_FloatTensor:$dq, DS_FloatTensor:$dk,
                      DS_FloatTensor:$dv);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $grad `scale` $scale (`causal` $causal^)?
    (`seq_major` $seq_major^)? attr-dict
    `:` type($q) `,` type($k) `,` type($v) `,` type($grad)
  }];
}

def DS_RotaryOp : DS_Op<"rotary",
    [DS_KernelWithAttrs, Pure, SameOperandsAndResultType,
     DeclareOpInterfaceMethods<DS_VJPOpInterface>]> {
  let kernel = DS_F32Kernel<["inverse", "seq_major"], ["theta"], "f32->f32", "any_input">;
  let summary = "rotary position embedding (Hugging Face rotate_half form)";
  let description = [{
    x is [..., T, D] with D even; position t is the index along dim -2. Pair
    (i, i + D/2) is rotated by t * theta^(-2i/D); `inverse` rotates back,
    which is also the VJP since the rotation is orthogonal. With
    `seq_major` x is [B, T, H, D] (attention's seq_major form) and the
    position is the index along dim 1.
  }];
  let arguments = (ins DS_FloatTensor:$x, F64Attr:$theta, UnitAttr:$inverse,
                       UnitAttr:$seq_major);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $x `theta` $theta (`inverse` $inverse^)? (`seq_major` $seq_major^)?
    attr-dict `:` type($x)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Lookup and loss
//===----------------------------------------------------------------------===//

def DS_EmbeddingOp : DS_Op<"embedding",
    [DS_KernelWithAttrs, Pure, InferTypeOpAdaptor,
     DeclareOpInterfaceMethods<DS_VJPOpInterface>]> {
  let kernel = DS_F32Kernel<["parts"], [], "f32,idx->f32", "none">;
  let summary = "rows of a table gathered by integer indices";
  let description = [{
    table [V, C], indices [...] -> [..., C].

    With `parts` P > 1 (vocabulary parallelism, phase shard) the table is
    the rank's rows [r V, (r + 1) V) of a [P V, C] table, r its place in
    its tensor-parallel group: an index outside them gives a row of zeros,
    so the sum over the group is the lookup in the whole table.
  }];
  let arguments = (ins DS_FloatTensor:$table, DS_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "1">:$parts);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $indices (`parts` $parts^)? attr-dict `:` type($table) `,`
    type($indices) `->` type($result)
  }];
  let hasVerifier = 1;
}

def DS_EmbeddingGradOp : DS_Op<"embedding_grad",
    [DS_KernelWithAttrs, Pure, InferTypeOpAdaptor]> {
  let kernel = DS_F32Kernel<["parts"], [], "idx,f32->f32", "none">;
  let summary = "scatter-add of row cotangents into a [V, C] table";
  let description = [{
    With `parts` P > 1 the result is the rank's rows [r V, (r + 1) V) of
    the [P V, C] table's cotangent (`vocab` is V, the rows a rank holds).
  }];
  let arguments = (ins DS_IndexTensor:$indices, DS_FloatTensor:$grad,
                       I64Attr:$vocab_size,
                       DefaultValuedAttr<I64Attr, "1">:$parts);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $indices `,` $grad `vocab` $vocab_size (`parts` $parts^)? attr-dict `:`
    type($indices) `,` type($grad) `->` type($result)
  }];
  let hasVerifier = 1;
}

def DS_CrossEntropyOp : DS_Op<"cross_entropy",
    [DS_KernelWithAttrs, Pure, InferTypeOpAdaptor,
     DeclareOpInterfaceMethods<DS_VJPOpInterface>]> {
  let kernel = DS_F32Kernel<["ignore_index"], [], "f32,idx->f32", "none">;
  let summary = "mean softmax cross-entropy of logits against targets";
  let description = [{
    logits [..., V], targets [...] -> scalar: the mean over positions whose
    target is not `ignore_index` of logsumexp(logits) - logits[target].
  }];
  let arguments = (ins DS_FloatTensor:$logits, DS_IndexTensor:$targets,
                       DefaultValuedAttr<I64Attr, "-1">:$ignore_index);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets attr-dict `:` type($logits) `,` type($targets) `->`
    type($result)
  }];
}

def DS_CrossEntropyGradOp : DS_Op<"cross_entropy_grad",
    [DS_KernelWithAttrs, Pure, AllTypesMatch<["logits", "result"]>]> {
  let kernel = DS_F32Kernel<["ignore_index"], [], "f32,idx,f32->f32", "any_input">;
  let summary = "cotangent of cross_entropy's logits";
  let arguments = (ins DS_FloatTensor:$logits, DS_IndexTensor:$targets,
                       DS_FloatTensor:$grad,
                       DefaultValuedAttr<I64Attr, "-1">:$ignore_index);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets `,` $grad attr-dict `:` type($logits) `,`
    type($targets) `,` type($grad)
  }];
  let hasVerifier = 1;
}

// Vocabulary-parallel cross-entropy (phase shard): each rank holds the
// logits of its part of the vocabulary, [..., V] of [..., P V], and the
// loss is made from per-row statistics summed over the group, so the
// logits are never gathered (docs/tensor-parallel.md).

def DS_CrossEntropyPartOp : DS_Op<"cross_entropy_part",
    [DS_KernelWithAttrs, Pure, InferTypeOpAdaptor]> {
  let kernel = DS_F32Kernel<["ignore_index", "parts"], [],
                            "f32,idx,f32->f32", "none">;
  let summary = "one rank's share of a vocabulary-parallel cross-entropy";
  let description = [{
    logits [..., V] are the rank's columns [r V, (r + 1) V) of [..., P V],
    r its place in its tensor-parallel group; row_max [...] is each row's
    maximum over the whole vocabulary. The result [2, ...] holds, per row,
    the sum of exp(logit - row_max) over the rank's columns, then the
    target's logit - row_max where the rank holds the target (0 elsewhere,
    and for ignored rows). Summed over the group, the rows' statistics give
    the loss (ds.cross_entropy_part_loss) and the gradient
    (ds.cross_entropy_part_grad).
  }];
  let arguments = (ins DS_FloatTensor:$logits, DS_IndexTensor:$targets,
                       DS_FloatTensor:$row_max,
                       DefaultValuedAttr<I64Attr, "-1">:$ignore_index,
                       I64Attr:$parts);
  let results = (outs DS_FloatTensor:$stats);
  let assemblyFormat = [{
    $logits `,` $targets `,` $row_max `parts` $parts attr-dict `:`
    type($logits) `,` type($targets) `,` type($row_max) `->` type($stats)
  }];
  let hasVerifier = 1;
}

def DS_CrossEntropyPartLossOp : DS_Op<"cross_entropy_part_loss",
    [DS_KernelWithAttrs, Pure, InferTypeOpAdaptor]> {
  let kernel = DS_F32Kernel<["ignore_index"], [], "f32,idx->f32", "none">;
  let summary = "the mean cross-entropy from rows' summed statistics";
  let description = [{
    stats [2, ...] are ds.cross_entropy_part's, summed over the group: the
    loss is the mean over rows whose target is not `ignore_index` of
    log(sum) - (target logit - row max); 0 when every row is ignored.
  }];
  let arguments = (ins DS_FloatTensor:$stats, DS_IndexTensor:$targets,
                       DefaultValuedAttr<I64Attr, "-1">:$ignore_index);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $stats `,` $targets attr-dict `:` type($stats) `,` type($targets) `->`
    type($result)
  }];
}

def DS_CrossEntropyPartGradOp : DS_Op<"cross_entropy_part_grad",
    [DS_KernelWithAttrs, Pure, AllTypesMatch<["logits", "result"]>]> {
  let kernel = DS_F32Kernel<["ignore_index", "parts"], [],
                            "f32,idx,f32,f32,f32->f32", "any_input">;
  let summary = "cotangent of one rank's logits in a vocabulary-parallel loss";
  let description = [{
    grad / (rows not ignored) * (softmax - one-hot) on the rank's columns:
    the softmax from row_max and the summed stats' first plane, the one-hot
    where the rank holds the target; zero rows where it is ignored.
  }];
  let arguments = (ins DS_FloatTensor:$logits, DS_IndexTensor:$targets,
                       DS_FloatTensor:$row_max, DS_FloatTensor:$stats,
                       DS_FloatTensor:$grad,
                       DefaultValuedAttr<I64Attr, "-1">:$ignore_index,
                       I64Attr:$parts);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $targets `,` $row_max `,` $stats `,` $grad `parts` $parts
    attr-dict `:` type($logits) `,` type($targets) `,` type($row_max) `,`
    type($stats) `,` type($grad)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

def DS_ReshapeOp : DS_Op<"reshape",
    [Pure, DeclareOpInterfaceMethods<DS_VJPOpInterface>]> {
  let summary = "same elements in row-major order, another shape";
  let arguments = (ins DS_AnyTensor:$x);
  let results = (outs DS_AnyTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def DS_TransposeOp : DS_Op<"transpose",
    [DS_KernelWithAttrs, Pure, InferTypeOpAdaptor,
     DeclareOpInterfaceMethods<DS_VJPOpInterface>]> {
  let kernel = DS_GenericKernel<["permutation..."], "T->T">;
  let summary = "permutes dimensions: result dim i is x dim permutation[i]";
  let arguments = (ins DS_AnyTensor:$x, DenseI64ArrayAttr:$permutation);
  let results = (outs DS_AnyTensor:$result);
  let assemblyFormat = [{
    $x $permutation attr-dict `:` type($x) `->` type($result)
  }];
}

def DS_SliceOp : DS_Op<"slice",
    [DS_KernelWithAttrs, Pure, InferTypeOpAdaptor,
     DeclareOpInterfaceMethods<DS_VJPOpInterface>]> {
  let kernel = DS_GenericKernel<["offsets..."], "T->T">;
  let summary = "a contiguous box of x";
  let arguments = (ins DS_AnyTensor:$x, DenseI64ArrayAttr:$offsets,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs DS_AnyTensor:$result);
  let assemblyFormat = [{
    $x `offsets` $offsets `sizes` $sizes attr-dict `:` type($x) `->`
    type($result)
  }];
}

def DS_PadOp : DS_Op<"pad",
    [DS_KernelWithAttrs, Pure, InferTypeOpAdaptor,
     DeclareOpInterfaceMethods<DS_VJPOpInterface>]> {
  let kernel = DS_GenericKernel<["low..."], "T->T">;
  let summary = "zero padding before (low) and after (high) each dimension";
  let arguments = (ins DS_FloatTensor:$x, DenseI64ArrayAttr:$low,
                       DenseI64ArrayAttr:$high);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $x `low` $low `high` $high attr-dict `:` type($x) `->` type($result)
  }];
}

def DS_ConcatOp : DS_Op<"concat",
    [DS_KernelWithAttrs, Pure, InferTypeOpAdaptor,
     DeclareOpInterfaceMethods<DS_VJPOpInterface>]> {
  let kernel = DS_GenericKernel<["axis"], "T*->T">;
  let summary = "joins tensors along an axis";
  let arguments = (ins Variadic<DS_AnyTensor>:$inputs, I64Attr:$axis);
  let results = (outs DS_AnyTensor:$result);
  let assemblyFormat = [{
    $inputs `axis` $axis attr-dict `:` type($inputs) `->` type($result)
  }];
}

def DS_SplitOp : DS_Op<"split",
    [DS_KernelWithAttrs, Pure, InferTypeOpAdaptor,
     DeclareOpInterfaceMethods<DS_VJPOpInterface>]> {
  let kernel = DS_GenericKernel<["axis"], "T->T*">;
  let summary = "cuts a tensor into consecutive pieces along an axis";
  let arguments = (ins DS_AnyTensor:$x, I64Attr:$axis,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<DS_AnyTensor>:$results);
  let assemblyFormat = [{
    $x `axis` $axis `sizes` $sizes attr-dict `:` type($x) `->` type($results)
  }];
}

def DS_BroadcastOp : DS_Op<"broadcast",
    [DS_KernelOpInterface, Pure, DeclareOpInterfaceMethods<DS_VJPOpInterface>]> {
  let kernel = DS_GenericKernel<[], "T->T">;
  let summary = "expands x to the result shape with numpy's rules";
  let arguments = (ins DS_AnyTensor:$x);
  let results = (outs DS_AnyTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
}

class DS_ReduceOp<string mnemonic, list<Trait> traits = []>
    : DS_Op<mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor,
                                           DS_KernelWithAttrs])> {
  let kernel = DS_F32Kernel<["axes..."], [], "f32->f32", "none">;
  let arguments = (ins DS_FloatTensor:$x, DenseI64ArrayAttr:$axes,
                       UnitAttr:$keepdim);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $x `axes` $axes (`keepdim` $keepdim^)? attr-dict `:` type($x) `->`
    type($result)
  }];
}

def DS_ReduceSumOp : DS_ReduceOp<"reduce_sum",
    [DeclareOpInterfaceMethods<DS_VJPOpInterface>]> {
  let summary = "sum over axes";
}
def DS_ReduceMeanOp : DS_ReduceOp<"reduce_mean",
    [DeclareOpInterfaceMethods<DS_VJPOpInterface>]> {
  let summary = "mean over axes";
}
def DS_ReduceMaxOp : DS_ReduceOp<"reduce_max",
    [DeclareOpInterfaceMethods<DS_VJPOpInterface>]> {
  let summary = "maximum over axes";
  let description = [{
    The VJP sends the cotangent to every element equal to the maximum.
  }];
}

//===----------------------------------------------------------------------===//
// Fused (made by the `fused` phase, never by autodiff)
//===----------------------------------------------------------------------===//

def DS_BiasGeluOp : DS_Op<"bias_gelu",
    [DS_KernelWithAttrs, Pure, AllTypesMatch<["x", "sum", "result"]>]> {
  let kernel = DS_F32Kernel<["approximate"], [], "f32,f32->f32,f32", "any_input">;
  let summary = "sum = x + bias; result = gelu(sum), in one pass";
  let description = [{
    `bias` runs along the last dimension of `x`. Both results are kept
    because the backward pass needs the pre-activation.
  }];
  let arguments = (ins DS_GeluApproximationAttr:$approximate,
                       DS_FloatTensor:$x, DS_FloatTensor:$bias);
  let results = (outs DS_FloatTensor:$sum, DS_FloatTensor:$result);
  let assemblyFormat = [{
    $approximate $x `,` $bias attr-dict `:` type($x) `,` type($bias)
  }];
  let hasVerifier = 1;
}

def DS_MatmulBiasOp : DS_Op<"matmul_bias",
    [DeclareOpInterfaceMethods<DS_KernelOpInterface,
         ["getKernelAttributes", "getFlops"]>, Pure]> {
  let kernel = DS_Kernel<["transpose_lhs", "transpose_rhs"], [], ["f32,f32,f32->f32"], ["bf16,bf16,bf16->bf16", "f16,f16,f16->f16"], "none">;
  let summary = "ds.matmul with a bias added to each row of its result";
  let description = [{
    result = matmul(lhs, rhs) + bias, `bias` [N] along the last dimension:
    a linear layer as one kernel (cuBLASLt's BIAS epilogue). The product is
    rounded to the result type before the bias is added, as unfused; a
    backend that adds the bias to the f32 accumulator instead differs by
    that rounding (docs/ds-dialect.md).
  }];
  let arguments = (ins DS_FloatTensor:$lhs, DS_FloatTensor:$rhs,
                       DS_FloatTensor:$bias, UnitAttr:$transpose_lhs,
                       UnitAttr:$transpose_rhs);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $bias attr-dict `:` type($lhs) `,` type($rhs) `,`
    type($bias) `->` type($result)
  }];
  let hasVerifier = 1;
}

def DS_MatmulBiasGeluOp : DS_Op<"matmul_bias_gelu",
    [DeclareOpInterfaceMethods<DS_KernelOpInterface,
         ["getKernelAttributes", "getFlops"]>, Pure]> {
  let kernel = DS_Kernel<["transpose_lhs", "transpose_rhs", "approximate"], [], ["f32,f32,f32->f32,f32"], ["bf16,bf16,bf16->bf16,bf16", "f16,f16,f16->f16,f16"], "none">;
  let summary = "sum = matmul(lhs, rhs) + bias; result = gelu(sum)";
  let description = [{
    ds.matmul_bias followed by ds.bias_gelu's GELU, in one kernel
    (cuBLASLt's GELU_AUX_BIAS epilogue for the tanh form). `sum`, the
    pre-activation, is kept for the backward pass.
  }];
  let arguments = (ins DS_GeluApproximationAttr:$approximate,
                       DS_FloatTensor:$lhs, DS_FloatTensor:$rhs,
                       DS_FloatTensor:$bias, UnitAttr:$transpose_lhs,
                       UnitAttr:$transpose_rhs);
  let results = (outs DS_FloatTensor:$sum, DS_FloatTensor:$result);
  let assemblyFormat = [{
    $approximate $lhs `,` $rhs `,` $bias attr-dict `:` type($lhs) `,`
    type($rhs) `,` type($bias) `->` type($sum) `,` type($result)
  }];
  let hasVerifier = 1;
}

def DS_MatmulGeluGradOp : DS_Op<"matmul_gelu_grad",
    [DeclareOpInterfaceMethods<DS_KernelOpInterface,
         ["getKernelAttributes", "getFlops"]>, Pure]> {
  let kernel = DS_Kernel<["transpose_lhs", "transpose_rhs", "approximate"], [], ["f32,f32,f32->f32,f32"], ["bf16,bf16,bf16->bf16,bf16", "f16,f16,f16->f16,f16"], "none">;
  let summary = "grad = gelu_grad(x, matmul(lhs, rhs)); dbias = its row sum";
  let description = [{
    The backward of ds.matmul_bias_gelu's GELU and bias in one kernel
    (cuBLASLt's DGELU_BGRAD epilogue): the incoming gradient's product
    with the next layer's weight, times GELU's derivative at the saved
    pre-activation `x`, and that summed over every dimension but the last
    (the bias gradient, [N]). Each step rounded to its type, as unfused.
  }];
  let arguments = (ins DS_GeluApproximationAttr:$approximate,
                       DS_FloatTensor:$lhs, DS_FloatTensor:$rhs,
                       DS_FloatTensor:$x, UnitAttr:$transpose_lhs,
                       UnitAttr:$transpose_rhs);
  let results = (outs DS_FloatTensor:$grad, DS_FloatTensor:$dbias);
  let assemblyFormat = [{
    $approximate $lhs `,` $rhs `,` $x attr-dict `:` type($lhs) `,`
    type($rhs) `,` type($x) `->` type($grad) `,` type($dbias)
  }];
  let hasVerifier = 1;
}

def DS_AddLayerNormOp : DS_Op<"add_layer_norm",
    [DS_KernelWithAttrs, Pure, AllTypesMatch<["x", "residual", "sum", "result"]>]> {
  let kernel = DS_F32Kernel<[], ["eps"], "f32*->f32,f32", "any_input">;
  let summary = "sum = x + residual; result = layer_norm(sum), in one pass";
  let arguments = (ins DS_FloatTensor:$x, DS_FloatTensor:$residual,
                       DS_FloatTensor:$weight, Optional<DS_FloatTensor>:$bias,
                       F64Attr:$eps);
  let results = (outs DS_FloatTensor:$sum, DS_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $residual `,` $weight (`,` $bias^)? `eps` $eps attr-dict `:`
    type($x) `,` type($weight) (`,` type($bias)^)?
  }];
  let hasVerifier = 1;
}

// An LM head and its loss in one op (phase fused).
include "dialects/ds/DsFusedLossOps.td"

// Elementwise chains in one op (phase fused).
include "dialects/ds/DsFusedElementwiseOps.td"

// The optimizer updates (OptimizerUpdateOpInterface).
include "dialects/ds/DsOptimizerOps.td"

//===----------------------------------------------------------------------===//
// Kernels no single op lowers to (plan lowering emits them)
//===----------------------------------------------------------------------===//

/// Copies a buffer's bytes (between memory spaces, or into a variable).
def DS_CopyKernel
    : DS_KernelDef<"ds.copy", ["x"], ["out"],
                   DS_Kernel<[], [], ["any->any"], [], "any_input">>;
/// Sets every element to `value` (zeroing accumulators).
def DS_FillKernel
    : DS_KernelDef<"ds.fill", [], ["out"],
                   DS_Kernel<[], ["value"], ["->any"], [], "none">>;
/// ds.adamw followed by the rounding of p' into its 16-bit copy p16, in one
/// pass (plan lowering's optimizer fusion).
def DS_AdamWRoundKernel
    : DS_KernelDef<"ds.adamw_round",
                   ["param", "grad", "m", "v", "lr", "step", "scale",
                    "beta1_value?"],
                   ["new_param", "new_m", "new_v", "param16"],
                   DS_Kernel<[], ["beta1", "beta2", "eps", "weight_decay"],
                             ["f32,f32|f16|bf16,f32,f32,f32,f32,f32,f32*->f32,f32,f32,f16|bf16"],
                             [], "update">>;
/// ds.sgd, ds.lion and ds.adagrad each followed by the rounding of p' into
/// its 16-bit copy p16, as ds.adamw_round does for ds.adamw.
def DS_SgdRoundKernel
    : DS_KernelDef<"ds.sgd_round",
                   ["param", "grad", "buf", "lr", "step", "scale"],
                   ["new_param", "new_buf", "param16"],
                   DS_Kernel<["nesterov"], ["momentum", "dampening", "weight_decay"],
                             ["f32,f32|f16|bf16,f32,f32,f32,f32->f32,f32,f16|bf16"],
                             [], "update">>;
def DS_LionRoundKernel
    : DS_KernelDef<"ds.lion_round",
                   ["param", "grad", "m", "lr", "step", "scale", "beta1_value?"],
                   ["new_param", "new_m", "param16"],
                   DS_Kernel<[], ["beta1", "beta2", "weight_decay"],
                             ["f32,f32|f16|bf16,f32,f32,f32,f32,f32*->f32,f32,f16|bf16"],
                             [], "update">>;
def DS_AdagradRoundKernel
    : DS_KernelDef<"ds.adagrad_round",
                   ["param", "grad", "sum", "lr", "step", "scale"],
                   ["new_param", "new_sum", "param16"],
                   DS_Kernel<[], ["lr_decay", "eps", "weight_decay"],
                             ["f32,f32|f16|bf16,f32,f32,f32,f32->f32,f32,f16|bf16"],
                             [], "update">>;

#endif // DS_OPS_TD
