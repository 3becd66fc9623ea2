//===- DsOptimizerOps.td - the optimizer updates ------------*- tablegen -*-===//
//
// One op per update rule, each an OptimizerUpdateOpInterface (DsBase.td):
// param, grad, its states, lr, step, scale -> param', states'. Included by
// DsOps.td, whose ops they are.
//
//===----------------------------------------------------------------------===//

#ifndef DS_OPTIMIZER_OPS_TD
#define DS_OPTIMIZER_OPS_TD

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

def DS_AdamWOp : DS_Op<"adamw",
    [DS_KernelWithAttrs, DS_InPlaceSafe, Pure, DS_OptimizerUpdate,
     AllTypesMatch<["param", "m", "v", "new_param", "new_m", "new_v"]>]> {
  // A trailing beta1_value (the cycled momentum) is optional: `f32*`.
  let kernel = DS_F32Kernel<[], ["beta1", "beta2", "eps", "weight_decay"], "f32,f32,f32,f32,f32,f32,f32,f32*->f32,f32,f32", "update">;
  let summary = "one AdamW step (decoupled weight decay, bias-corrected)";
  let description = [{
    g' = grad * scale; m' = beta1 m + (1 - beta1) g'; v' = beta2 v +
    (1 - beta2) g'^2; param' = param - lr weight_decay param
    - lr (m' / (1 - beta1^step)) / (sqrt(v' / (1 - beta2^step)) + eps).
    `scale` carries gradient clipping (and the inverse loss scale); `step`
    counts from 1. A non-finite `scale` skips the update: the results are
    the inputs (ds.overflow_guard). `grad` may be 16-bit while the
    parameter and moments are fp32 master state. With `beta1_value`
    (OneCycle's cycle_momentum) beta1 is that scalar, read each step, and
    the attribute is unused.
  }];
  let arguments = (ins DS_FloatTensor:$param, DS_FloatTensor:$grad,
                       DS_FloatTensor:$m, DS_FloatTensor:$v,
                       DS_ScalarF32:$lr, DS_ScalarF32:$step,
                       DS_ScalarF32:$scale,
                       Optional<DS_ScalarF32>:$beta1_value, F64Attr:$beta1,
                       F64Attr:$beta2, F64Attr:$eps, F64Attr:$weight_decay);
  let results = (outs DS_FloatTensor:$new_param, DS_FloatTensor:$new_m,
                      DS_FloatTensor:$new_v);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `lr` $lr `step` $step `scale` $scale
    (`beta1_value` $beta1_value^)?
    `betas` `(` $beta1 `,` $beta2 `)` `eps` $eps `weight_decay` $weight_decay
    attr-dict `:` type($param) `,` type($grad)
  }];
  let hasVerifier = 1;
}

def DS_SgdOp : DS_Op<"sgd",
    [DS_KernelWithAttrs, DS_InPlaceSafe, Pure, DS_OptimizerUpdate,
     AllTypesMatch<["param", "buf", "new_param", "new_buf"]>]> {
  // The gradient may be 16-bit (mixed precision's, read directly); the
  // parameter (its fp32 master) and the buffer are f32.
  let kernel = DS_Kernel<["nesterov"], ["momentum", "dampening", "weight_decay"], ["f32,f32|f16|bf16,f32,f32,f32,f32->f32,f32"], [], "update">;
  let summary = "one SGD step with momentum (torch.optim.SGD)";
  let description = [{
    d = grad * scale + weight_decay param; with momentum, buf' = d at
    step 1 and momentum buf + (1 - dampening) d after it, and d becomes
    d + momentum buf' (nesterov) or buf'; param' = param - lr d. Without
    momentum buf is kept as it is. A non-finite `scale` skips the update.
  }];
  let arguments = (ins DS_FloatTensor:$param, DS_FloatTensor:$grad,
                       DS_FloatTensor:$buf, DS_ScalarF32:$lr,
                       DS_ScalarF32:$step, DS_ScalarF32:$scale,
                       F64Attr:$momentum, F64Attr:$dampening,
                       F64Attr:$weight_decay, BoolAttr:$nesterov);
  let results = (outs DS_FloatTensor:$new_param, DS_FloatTensor:$new_buf);
  let assemblyFormat = [{
    $param `,` $grad `,` $buf `lr` $lr `step` $step `scale` $scale
    `momentum` $momentum `dampening` $dampening `weight_decay` $weight_decay
    `nesterov` $nesterov attr-dict `:` type($param) `,` type($grad)
  }];
  let hasVerifier = 1;
}

def DS_LionOp : DS_Op<"lion",
    [DS_KernelWithAttrs, DS_InPlaceSafe, Pure, DS_OptimizerUpdate,
     AllTypesMatch<["param", "m", "new_param", "new_m"]>]> {
  // As ds.sgd's: the gradient may be 16-bit, the rest is f32.
  let kernel = DS_Kernel<[], ["beta1", "beta2", "weight_decay"], ["f32,f32|f16|bf16,f32,f32,f32,f32,f32*->f32,f32"], [], "update">;
  let summary = "one Lion step (Chen et al. 2023, decoupled weight decay)";
  let description = [{
    g' = grad * scale; c = beta1 m + (1 - beta1) g'; param' = param -
    lr weight_decay param - lr sign(c) (sign(0) = 0); m' = beta2 m +
    (1 - beta2) g'. A non-finite `scale` skips the update. `beta1_value`
    replaces beta1 as ds.adamw's does.
  }];
  let arguments = (ins DS_FloatTensor:$param, DS_FloatTensor:$grad,
                       DS_FloatTensor:$m, DS_ScalarF32:$lr,
                       DS_ScalarF32:$step, DS_ScalarF32:$scale,
                       Optional<DS_ScalarF32>:$beta1_value,
                       F64Attr:$beta1, F64Attr:$beta2, F64Attr:$weight_decay);
  let results = (outs DS_FloatTensor:$new_param, DS_FloatTensor:$new_m);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `lr` $lr `step` $step `scale` $scale
    (`beta1_value` $beta1_value^)?
    `betas` `(` $beta1 `,` $beta2 `)` `weight_decay` $weight_decay
    attr-dict `:` type($param) `,` type($grad)
  }];
  let hasVerifier = 1;
}

def DS_AdagradOp : DS_Op<"adagrad",
    [DS_KernelWithAttrs, DS_InPlaceSafe, Pure, DS_OptimizerUpdate,
     AllTypesMatch<["param", "sum", "new_param", "new_sum"]>]> {
  // As ds.sgd's: the gradient may be 16-bit, the rest is f32.
  let kernel = DS_Kernel<[], ["lr_decay", "eps", "weight_decay"], ["f32,f32|f16|bf16,f32,f32,f32,f32->f32,f32"], [], "update">;
  let summary = "one Adagrad step (torch.optim.Adagrad)";
  let description = [{
    d = grad * scale + weight_decay param; sum' = sum + d^2; param' =
    param - lr / (1 + (step - 1) lr_decay) d / (sqrt(sum') + eps). A
    non-finite `scale` skips the update.
  }];
  let arguments = (ins DS_FloatTensor:$param, DS_FloatTensor:$grad,
                       DS_FloatTensor:$sum, DS_ScalarF32:$lr,
                       DS_ScalarF32:$step, DS_ScalarF32:$scale,
                       F64Attr:$lr_decay, F64Attr:$eps, F64Attr:$weight_decay);
  let results = (outs DS_FloatTensor:$new_param, DS_FloatTensor:$new_sum);
  let assemblyFormat = [{
    $param `,` $grad `,` $sum `lr` $lr `step` $step `scale` $scale
    `lr_decay` $lr_decay `eps` $eps `weight_decay` $weight_decay
    attr-dict `:` type($param) `,` type($grad)
  }];
  let hasVerifier = 1;
}

def DS_LambOp : DS_Op<"lamb",
    [DS_KernelWithAttrs, DS_InPlaceSafe, Pure, DS_OptimizerUpdate,
     AllTypesMatch<["param", "m", "v", "new_param", "new_m", "new_v"]>]> {
  // As ds.adagrad's: the gradient may be 16-bit, the rest is f32. Its
  // norms span the whole tensor: one call per parameter, or, given
  // `norms`, one call per ZeRO shard.
  let kernel = DS_Kernel<["bias_correction", "eps_inside_sqrt", "members..."], ["beta1", "beta2", "eps", "weight_decay", "min_coeff", "max_coeff"], ["f32,f32|f16|bf16,f32,f32,f32,f32,f32,f32*->f32,f32,f32"], [], "tensor_update">;
  let summary = "one Lamb step (DeepSpeed's FusedLamb)";
  let description = [{
    g' = grad * scale; m' = beta1 m + (1 - beta1) g'; v' = beta2 v +
    (1 - beta2) g'^2; u = m' / (sqrt(v') + eps) + weight_decay param
    (sqrt(v' + eps) with eps_inside_sqrt); the trust ratio r = |param| /
    |u| (L2 norms over the whole tensor), clamped to [min_coeff,
    max_coeff], or 1 when either norm is 0; param' = param - lr c r u with
    c = sqrt(1 - beta2^step) / (1 - beta1^step) under bias_correction, else
    1. As DeepSpeed's kernel, the bias correction scales the step, not u.
    A non-finite `scale` skips the update.

    Under ZeRO (ds-zero) the operands are this rank's shard of a flat
    group whose parameters have the element counts `members`, laid out in
    order from element 0 of rank 0's shard; `norms` holds, per member j,
    the sums of param^2 (at 2j) and u^2 (at 2j + 1) over the whole member
    (ds.lamb_norms on every rank, all-reduced), and each element takes its
    member's trust ratio. Elements past the members (padding) take 1.
  }];
  let arguments = (ins DS_FloatTensor:$param, DS_FloatTensor:$grad,
                       DS_FloatTensor:$m, DS_FloatTensor:$v,
                       DS_ScalarF32:$lr, DS_ScalarF32:$step,
                       DS_ScalarF32:$scale, F64Attr:$beta1, F64Attr:$beta2,
                       F64Attr:$eps, F64Attr:$weight_decay, F64Attr:$min_coeff,
                       F64Attr:$max_coeff, BoolAttr:$bias_correction,
                       BoolAttr:$eps_inside_sqrt,
                       Optional<DS_FloatTensor>:$norms,
                       OptionalAttr<DenseI64ArrayAttr>:$members);
  let results = (outs DS_FloatTensor:$new_param, DS_FloatTensor:$new_m,
                      DS_FloatTensor:$new_v);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `lr` $lr `step` $step `scale` $scale
    (`norms` $norms^ `members` $members `:` type($norms))?
    `betas` `(` $beta1 `,` $beta2 `)` `eps` $eps `weight_decay` $weight_decay
    `coeff` `(` $min_coeff `,` $max_coeff `)`
    attr-dict `:` type($param) `,` type($grad)
  }];
  let hasVerifier = 1;
}

def DS_LambNormsOp : DS_Op<"lamb_norms",
    [DS_KernelWithAttrs, Pure, AllTypesMatch<["param", "m", "v"]>]> {
  // ds.lamb's operand rules; the result is this rank's partial sums.
  let kernel = DS_Kernel<["eps_inside_sqrt", "members..."], ["beta1", "beta2", "eps", "weight_decay"], ["f32,f32|f16|bf16,f32,f32,f32->f32"], [], "none">;
  let summary = "a ZeRO shard's part of Lamb's per-parameter norms";
  let description = [{
    The operands are this rank's shard of a flat group, as a sharded
    ds.lamb takes them (`members`: the group's parameters' element counts,
    in order). For each member j, result[2j] is the sum of param^2 and
    result[2j + 1] the sum of u^2 over the member's elements in this shard
    (u as ds.lamb forms it from the moments updated with grad * scale);
    members outside the shard give 0. Summed over the ranks (an
    all-reduce) they are the whole parameters' norms squared. The shard's
    first element is element rank * size of the group, so the op exists
    only in plans (after ds-zero); the interpreter refuses it.
  }];
  let arguments = (ins DS_FloatTensor:$param, DS_FloatTensor:$grad,
                       DS_FloatTensor:$m, DS_FloatTensor:$v,
                       DS_ScalarF32:$scale, F64Attr:$beta1, F64Attr:$beta2,
                       F64Attr:$eps, F64Attr:$weight_decay,
                       BoolAttr:$eps_inside_sqrt,
                       DenseI64ArrayAttr:$members);
  let results = (outs DS_FloatTensor:$result);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `scale` $scale
    `betas` `(` $beta1 `,` $beta2 `)` `eps` $eps `weight_decay` $weight_decay
    `members` $members attr-dict `:` type($param) `,` type($grad) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def DS_MuonOp : DS_Op<"muon",
    [Pure, DS_OptimizerUpdate, AllTypesMatch<["param", "buf", "new_param", "new_buf"]>]> {
  // No kernel of its own: ds-expand-updates (phase `fused`) writes it as
  // ds.muon_momentum, the Newton-Schulz iteration in ds.matmul and
  // elementwise ops, and ds.muon_apply, so the backends' GEMMs run it and
  // the plan places its temporaries.
  let summary = "one Muon step (DeepSpeed's muon_update, standard Newton-Schulz)";
  let description = [{
    For a matrix parameter (rows = the first dimension, cols = the rest):
    g' = grad * scale; buf' = buf + (1 - momentum) (g' - buf); u = g' +
    momentum (buf' - g') with `nesterov`, else buf'; X = u as rows x
    cols, transposed when rows > cols, divided by (|X|_F + 1e-7), then
    `ns_steps` times A = X X^T, X = a X + (b A + c A A) X with (a, b, c) =
    (3.4445, -4.7750, 2.0315), transposed back; param' = param (1 - lr
    weight_decay) - lr sqrt(max(1, rows / cols)) X. A non-finite `scale`
    skips the update. With `heads` > 1 (DeepSpeed's per_head_muon) each of
    the `heads` consecutive row blocks of X is its own matrix: normalized,
    iterated and scaled (rows / heads by cols) apart from the others.
  }];
  let arguments = (ins DS_FloatTensor:$param, DS_FloatTensor:$grad,
                       DS_FloatTensor:$buf, DS_ScalarF32:$lr,
                       DS_ScalarF32:$step, DS_ScalarF32:$scale,
                       F64Attr:$momentum, F64Attr:$weight_decay,
                       BoolAttr:$nesterov, I64Attr:$ns_steps,
                       DefaultValuedAttr<I64Attr, "1">:$heads);
  let results = (outs DS_FloatTensor:$new_param, DS_FloatTensor:$new_buf);
  let assemblyFormat = [{
    $param `,` $grad `,` $buf `lr` $lr `step` $step `scale` $scale
    `momentum` $momentum `weight_decay` $weight_decay `ns_steps` $ns_steps
    attr-dict `:` type($param) `,` type($grad)
  }];
  let hasVerifier = 1;
}

def DS_MuonMomentumOp : DS_Op<"muon_momentum",
    [DS_KernelWithAttrs, DS_InPlaceSafe, Pure,
     AllTypesMatch<["buf", "new_buf", "direction"]>]> {
  // The gradient may be 16-bit (read directly), the rest is f32.
  let kernel = DS_Kernel<["nesterov"], ["momentum"], ["f32|f16|bf16,f32,f32->f32,f32"], [], "any_input">;
  let summary = "Muon's momentum and the direction it orthogonalizes";
  let description = [{
    g' = grad * scale; new_buf = buf + (1 - momentum) (g' - buf);
    direction = g' + momentum (new_buf - g') with `nesterov`, else new_buf.
    A non-finite `scale` keeps the buffer and gives a zero direction (the
    update skips the step: ds.muon_apply).
  }];
  let arguments = (ins DS_FloatTensor:$grad, DS_FloatTensor:$buf,
                       DS_ScalarF32:$scale, F64Attr:$momentum,
                       BoolAttr:$nesterov);
  let results = (outs DS_FloatTensor:$new_buf, DS_FloatTensor:$direction);
  let assemblyFormat = [{
    $grad `,` $buf `scale` $scale `momentum` $momentum attr-dict `:`
    type($grad) `,` type($buf)
  }];
  let hasVerifier = 1;
}

def DS_MuonApplyOp : DS_Op<"muon_apply",
    [DS_KernelWithAttrs, DS_InPlaceSafe, Pure,
     AllTypesMatch<["param", "new_param"]>]> {
  // The direction may be 16-bit (an iteration run in bf16, as DeepSpeed's
  // accelerators run it); the parameter is the f32 master.
  let kernel = DS_Kernel<[], ["weight_decay", "factor"], ["f32,f32|f16|bf16,f32,f32->f32"], [], "any_input">;
  let summary = "Muon's step from the orthogonalized direction";
  let description = [{
    new_param = param (1 - lr weight_decay) - lr factor ortho (factor:
    sqrt(max(1, rows / cols))), or param when `scale` is not finite.
  }];
  let arguments = (ins DS_FloatTensor:$param, DS_FloatTensor:$ortho,
                       DS_ScalarF32:$lr, DS_ScalarF32:$scale,
                       F64Attr:$weight_decay, F64Attr:$factor);
  let results = (outs DS_FloatTensor:$new_param);
  let assemblyFormat = [{
    $param `,` $ortho `lr` $lr `scale` $scale `weight_decay` $weight_decay
    `factor` $factor attr-dict `:` type($param) `,` type($ortho)
  }];
  let hasVerifier = 1;
}

#endif // DS_OPTIMIZER_OPS_TD
