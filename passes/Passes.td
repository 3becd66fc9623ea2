//===- Passes.td - dsc passes ---------------------------------*- tablegen -*-===//
#ifndef DSC_PASSES_TD
#define DSC_PASSES_TD

include "mlir/Pass/PassBase.td"

def DsVerifyInput : Pass<"ds-verify-input", "::mlir::ModuleOp"> {
  let summary = "checks the input contract of a forward graph";
  let description = [{
    The forward graph is `func.func @forward(...) -> tensor<f32>` returning
    the loss, made of `ds` ops on statically shaped tensors, reading only
    `ds.variable param`s that carry an initializer. Violations are reported
    at the offending op in terms of the model, not of the pass.

    With `dsrun-inputs` (dsc sets it when it writes a plan file), @forward
    must also take what dsrun feeds a training step: token ids and target
    ids, two `tensor<BxTxi32>` of one shape, in that order.
  }];
  let options = [
    Option<"dsrunInputs", "dsrun-inputs", "bool", /*default=*/"false",
           "require @forward(tokens, targets), both tensor<BxTxi32>">,
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DsAutodiff : Pass<"ds-autodiff", "::mlir::ModuleOp"> {
  let summary = "builds @micro_step: forward, backward, gradient accumulation";
  let description = [{
    Clones @forward into @micro_step and appends the reverse pass built from
    each op's VJPOpInterface. Only ops between a parameter and the loss are
    differentiated; gradients of a parameter read twice (tied embeddings)
    are summed. Each parameter with a gradient gets a `ds.variable grad`
    accumulator to which @micro_step adds d(loss)/d(param) scaled by
    1/(accumulation-steps x world-size), so the micro-steps of all ranks,
    summed, give the gradient of the mean loss.
  }];
  let options = [
    Option<"accumulationSteps", "accumulation-steps", "int64_t", "1",
           "micro-batches per optimizer step">,
    Option<"worldSize", "world-size", "int64_t", "1",
           "ranks whose gradients are summed (the seed is divided by it too)">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DsAdamW : Pass<"ds-adamw", "::mlir::ModuleOp"> {
  let summary = "builds @apply: gradient clipping and the optimizer update";
  let description = [{
    Adds the optimizer's state for every parameter with a gradient
    accumulator (AdamW: `exp_avg` and `exp_avg_sq`; SGD: `momentum_buffer`;
    Lion: `exp_avg`; Adagrad: `sum`; Lamb: AdamW's; Muon: `momentum_buffer`
    for its matrices, AdamW's for the rest) and a function
    `@apply(%lr: tensor<f32>, %step: tensor<f32>) -> tensor<f32>` (with
    cycle-momentum, a third input `%beta1`) that
    computes the global gradient norm (returned), scales gradients by
    min(1, grad-clip / (norm + 1e-6)) when grad-clip > 0, applies the
    update (ds.adamw, ds.sgd, ds.lion, ds.adagrad, ds.lamb, or ds.muon for
    matrices named without "embed" or "lm_head" and ds.adamw for the rest;
    weight decay only on parameters of rank >= 2, as nanoGPT) and zeroes
    the accumulators.
  }];
  let options = [
    Option<"beta1", "beta1", "double", "0.9", "first-moment decay">,
    Option<"beta2", "beta2", "double", "0.999", "second-moment decay">,
    Option<"eps", "eps", "double", "1e-8", "denominator epsilon">,
    Option<"weightDecay", "weight-decay", "double", "0.01",
           "decoupled weight decay for parameters of rank >= 2">,
    Option<"gradClip", "grad-clip", "double", "0.0",
           "global gradient-norm clip; 0 disables clipping">,
    Option<"optimizer", "optimizer", "std::string", "\"adamw\"",
           "the update: adamw, sgd, lion, adagrad, lamb or muon (betas are "
           "Lion's, Lamb's and Muon's AdamW half's too, eps Adagrad's and "
           "Lamb's; momentum and nesterov Muon's too)">,
    Option<"lrDecay", "lr-decay", "double", "0.0", "Adagrad's lr_decay">,
    Option<"momentum", "momentum", "double", "0.0", "SGD's momentum">,
    Option<"dampening", "dampening", "double", "0.0", "SGD's dampening">,
    Option<"nesterov", "nesterov", "bool", "false", "SGD: Nesterov momentum">,
    Option<"cycleMomentum", "cycle-momentum", "bool", "false",
           "AdamW and Lion: beta1 is a third input of @apply, `beta1`, read "
           "each step (OneCycle's cycle_momentum)">,
    Option<"decayAll", "decay-all", "bool", "false",
           "every parameter decays but those of no-decay (DeepSpeed's rule "
           "for parameter groups); else rank >= 2 decays">,
    Option<"noDecay", "no-decay", "std::string", "\"\"",
           "with decay-all: the parameters that do not decay, by name, "
           "separated by commas">,
    Option<"minCoeff", "min-coeff", "double", "0.01",
           "Lamb: the trust ratio's lower clamp">,
    Option<"maxCoeff", "max-coeff", "double", "10.0",
           "Lamb: the trust ratio's upper clamp">,
    Option<"biasCorrection", "bias-correction", "bool", "true",
           "Lamb: bias-corrected step size">,
    Option<"epsInsideSqrt", "eps-inside-sqrt", "bool", "false",
           "Lamb: sqrt(v + eps) instead of sqrt(v) + eps">,
    Option<"muonLrRatio", "muon-lr-ratio", "double", "1.0",
           "Muon: its matrices' lr over the schedule's (muon_lr / lr; the "
           "AdamW half takes the schedule's)">,
    Option<"nsSteps", "ns-steps", "int64_t", "5",
           "Muon: Newton-Schulz iterations">,
    Option<"perHeadMuon", "per-head-muon", "bool", "false",
           "Muon: a matrix whose ds.variable has ds.attention_heads = H "
           "iterates each of its H blocks of rows apart (DeepSpeed's "
           "per_head_muon); an error when no Muon matrix has it">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DsEval : Pass<"ds-eval", "::mlir::ModuleOp"> {
  let summary = "builds @eval and @sample_T: the forward, dropout off";
  let description = [{
    Clones @forward into `@eval(tokens, targets) -> (loss, logits)` with
    every ds.dropout replaced by its input: the held-out loss and the
    logits for sampling come from the same kernels as training's forward
    pass. Each @forward_sample_T (dsc's one-row copies of a built-in model)
    becomes `@sample_T(tokens, position) -> logits` the same way, without
    the loss, its LM head on the row at `position` alone.
  }];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DsPrecision : Pass<"ds-precision", "::mlir::ModuleOp"> {
  let summary = "fp16/bf16 training: 16-bit model, fp32 master weights";
  let description = [{
    Phase `precision` (docs/precision.md). Parameters and gradient
    accumulators become `dtype`; every function but @apply computes in it
    (the kernels accumulate in fp32 and round their results; the loss stays
    fp32). Each parameter the optimizer updates gets an fp32 `master`
    variable, which @apply's AdamW updates together with the fp32 moments
    and then casts back into the 16-bit parameter. The global gradient norm
    is summed in fp32. With `loss-scaling`, @micro_step and @apply take a
    `loss_scale` input: the reverse pass's seed (ds.loss_seed) is multiplied
    by it and @apply divides the norm and the update by it. With
    `check-overflow`, a non-finite norm turns the update scale into NaN
    (ds.overflow_guard), which makes every ds.adamw skip its update.
  }];
  let options = [
    Option<"dtype", "dtype", "::mlir::ds::LowPrecision",
           "::mlir::ds::LowPrecision::bf16", "the 16-bit type",
           [{::llvm::cl::values(
             clEnumValN(::mlir::ds::LowPrecision::bf16, "bf16",
                        "bfloat16: f32's range"),
             clEnumValN(::mlir::ds::LowPrecision::f16, "f16",
                        "IEEE half: the loss is scaled"))}]>,
    Option<"lossScaling", "loss-scaling", "bool", "false",
           "scale the loss by a `loss_scale` input (fp16)">,
    Option<"checkOverflow", "check-overflow", "bool", "true",
           "skip the update of a step whose gradient norm is not finite">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DsRemat : Pass<"ds-remat", "::mlir::ModuleOp"> {
  let summary = "rematerialization: which forward values backward recomputes";
  let description = [{
    Phase `remat` (docs/remat.md). @micro_step's backward reads forward
    values; under a policy other than `none` some of them are not kept but
    recomputed: each is cloned (marked `ds.recompute`) right before its
    first use after the loss seed, from kept values, parameters and inputs,
    and the clone serves every later use. Recomputed dropout draws the same
    mask (its key is the op's id and the step, not the op). `layers` keeps
    the inputs of each group of `every` transformer blocks (blocks are the
    parameters' numbered prefixes, `transformer.h.3`); `selective` keeps
    GEMM outputs and norm inputs and recomputes the rest (attention core,
    GELU, dropout, norms, bias adds, layout ops); `auto` picks, among the
    hand policies and the exact minimum cuts of saved bytes + w x recomputed
    FLOPs over a sweep of w, the plan with the fewest recomputed FLOPs whose
    activation peak (the planner's, after the rest of the pipeline) fits
    `activation-memory` bytes.
  }];
  let options = [
    Option<"policy", "policy", "::mlir::ds::remat::Policy",
           "::mlir::ds::remat::Policy::none", "what the backward recomputes",
           "::mlir::ds::remat::policyValues()">,
    Option<"every", "every", "int64_t", "::mlir::ds::remat::kDefaultEvery",
           "layers: transformer blocks per checkpoint">,
    Option<"activationMemory", "activation-memory", "int64_t",
           "::mlir::ds::remat::kDefaultActivationMemory",
           "auto: the activation peak's budget in bytes (0: as small as "
           "possible)">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DsExpandUpdates : Pass<"ds-expand-updates", "::mlir::ModuleOp"> {
  let summary = "writes composite optimizer updates as kernels";
  let description = [{
    Phase `fused`, first: each `ds.muon` becomes `ds.muon_momentum`, the
    Newton-Schulz iteration as `ds.matmul` and elementwise ops on the
    direction viewed as a rows x cols matrix (a tall one iterated on X^T X
    instead of X X^T, so it needs no transposes: B is symmetric, so
    (B X^T)^T = X B), and `ds.muon_apply`, at the update's place and with
    its `dist.host` mark. The backends' GEMMs then run the iteration and the
    plan places its temporaries like any other value.
  }];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DsFuseLmHead : Pass<"ds-fuse-lm-head", "::mlir::ModuleOp"> {
  let summary = "an LM head's logits, loss and gradients as one chunked op";
  let description = [{
    Phase `fused`, before ds-fuse: in each training program, the head
    autodiff writes (`matmul(h, W) {transpose_rhs}` read only by
    `cross_entropy` and `cross_entropy_grad`, whose gradient is read only by
    `matmul(g, W)` and, as [N, V], by `matmul(g, h) {transpose_lhs}`)
    becomes `ds.linear_cross_entropy` at the loss's place, so the logits
    exist only as a chunk of rows (docs/performance.md). f32 heads, and
    f16/bf16 heads where the fused op holds less memory than the five
    (its f32 weight gradient is cast once after it); the loss's cotangent
    must be defined before the loss (the seed is).
  }];
  let options = [
    Option<"enabled", "enabled", "bool", "true",
           "false: leave the head unfused (dsc --fuse-lm-head=false)">,
    Option<"chunkRows", "chunk-rows", "int64_t", "0",
           "rows of h a chunk takes (a divisor of the rows; 0: the largest "
           "divisor not above max(256, rows / 16); dsc "
           "--lm-head-chunk-rows)">,
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DsFuse : Pass<"ds-fuse", "::mlir::ModuleOp"> {
  let summary = "groups known elementwise patterns into fused kernels";
  let description = [{
    Phase `fused`: `add` + `gelu` with a bias along the last dimension
    becomes `ds.bias_gelu`; a same-shaped residual `add` feeding a
    `layer_norm` becomes `ds.add_layer_norm`. A `matmul` whose only reader
    adds a bias becomes `ds.matmul_bias`, and one feeding `ds.bias_gelu`
    becomes `ds.matmul_bias_gelu`; in the backward a `matmul` read only by
    `gelu_grad`, whose result is summed over every dim but the last,
    becomes `ds.matmul_gelu_grad` (cuBLASLt's BIAS, GELU_AUX_BIAS and
    DGELU_BGRAD epilogues), each at the matmul's place. Each fused op
    returns the intermediate the backward pass reads (the pre-activation,
    the residual sum). (Softmax and
    cross-entropy are one op from the start; the AdamW update runs over flat
    buffers after placement.)
  }];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DsFoldAttentionLayout
    : Pass<"ds-fold-attention-layout", "::mlir::ModuleOp"> {
  let summary = "attention reads and writes [B, T, H, D]: its transposes go";
  let description = [{
    Phase `fused`: in each program but @forward, an attention or
    attention_grad whose operands are all transposes [0, 2, 1, 3] and whose
    results are read only by such transposes takes the untransposed values
    (`seq_major`) and the transposes are erased
    (passes/FoldAttentionLayout.cpp). The same arithmetic: the kernels read
    a (batch, head) pair's rows H * D apart. A transpose moves past a
    rotary embedding first (Llama's q and k), which then rotates the
    [B, T, H, D] rows (its own `seq_major`).
  }];
  let options = [
    Option<"enabled", "enabled", "bool", "true",
           "false: keep the transposes (dsc --fold-attention-layout=false)">,
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DsFuseElementwise : Pass<"ds-fuse-elementwise", "::mlir::ModuleOp"> {
  let summary = "groups elementwise chains into ds.fused_elementwise by bytes";
  let description = [{
    Phase `fused`, after ds-fuse: in each program but @forward, chains of
    elementwise ops (same shape; outside operands the group's shape or its
    trailing dims) become one ds.fused_elementwise at the chain's last op,
    grown greedily in program order by the bytes each join saves
    (passes/FuseElementwise.cpp). A recomputation groups only with
    recomputations; a group holds at most 32 inputs and results.
  }];
  let options = [
    Option<"enabled", "enabled", "bool", "true",
           "false: leave elementwise chains unfused (dsc "
           "--fuse-elementwise=false)">,
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DsOffload : Pass<"ds-offload", "::mlir::ModuleOp"> {
  let summary = "phase `offload`: state in host memory, copies to and from it";
  let description = [{
    With `offload-optimizer` (DeepSpeed's offload_optimizer.device "cpu")
    the master weights and Adam moments are host variables (`dist.host` on
    the ds.variable) and @apply's AdamW updates run on the host (`dist.host`
    on the op), with the rounding of new master weights to 16 bits. With
    `offload-param` (stage 3's offload_param) the parameter shards are host
    variables. Every operand that lies in the other memory space than where
    its user runs is copied: `dist.copy_to_host` (d2h stream) starts as
    early as its operand allows, `dist.copy_to_device` (h2d stream) where
    its operand is defined, and the user waits at a `dist.wait` just before
    it. With `offload-optimizer` the gradient accumulators are host
    variables too: each reduced shard is copied to the host once waited for
    and accumulated there. With `cpu-checkpointing` each forward value of
    @micro_step that the backward reads goes to the host right after it is
    computed and comes back one op ahead of its first backward use.
  }];
  let options = [
    Option<"offloadOptimizer", "offload-optimizer", "bool", "false",
           "master weights and moments in host memory, AdamW on the host">,
    Option<"offloadParam", "offload-param", "bool", "false",
           "stage 3: parameter shards in host memory">,
    Option<"persistenceThreshold", "persistence-threshold", "int64_t",
           "::mlir::ds::zero::kDefaultPersistenceThreshold",
           "with one rank (no shards): parameters with fewer elements stay "
           "on the device, as stage 3 keeps them whole">,
    Option<"cpuCheckpointing", "cpu-checkpointing", "bool", "false",
           "the forward values the backward reads wait in host memory "
           "(activation_checkpointing.cpu_checkpointing)">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect", "::mlir::dist::DistDialect"];
}

def DsSchedule : Pass<"ds-schedule", "::mlir::ModuleOp"> {
  let summary = "orders each program to shorten buffer lifetimes";
  let description = [{
    Phase `scheduled`: the block order of each function is the program's
    total order on the compute stream. This pass moves each gradient
    accumulation (`load @g`, `add`, `store @g`) to right after the op that
    completes the gradient, so a parameter's gradient buffer dies as soon as
    it is accumulated instead of living to the end of the backward pass.
    An accumulation on the host (ds-offload) reads the gradient's host copy
    and moves to right after that copy, with the copy's `dist.wait`.
  }];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DsStoreGradients : Pass<"ds-store-gradients", "::mlir::ModuleOp"> {
  let summary = "one micro-step a step: gradients stored, not accumulated";
  let description = [{
    Phase `scheduled`, after ds-schedule, only when a step is one
    micro-step: each accumulator's first gradient accumulation in
    @micro_step (`store(add(load @g, %d))`, ds.grad_accumulation) becomes
    `store %d, @g`, and @apply no longer stores zeros into those
    accumulators (passes/StoreGradients.cpp). The step's results are the
    same: the sum was 0 + %d.
  }];
  let options = [
    Option<"accumulationSteps", "accumulation-steps", "int64_t", "1",
           "micro-steps per optimizer step; the pass changes nothing unless "
           "it is 1">,
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DsShard : Pass<"ds-shard", "::mlir::ModuleOp"> {
  let summary = "phase `shard`: Megatron-style tensor parallelism";
  let description = [{
    Lays the training step out over a tensor-parallel group of
    `tensor-parallel` ranks (passes/shard/ShardRules.h): the linear layers
    Megatron-LM cuts are found by their module names (column-parallel:
    q_proj, k_proj, v_proj, gate_proj, up_proj, c_fc, GPT-2's fused c_attn
    as 3 blocks, ...; row-parallel: o_proj, c_proj, down_proj, ...) and
    their weights (and a column-parallel layer's bias) cut along their
    output or input features, with their gradients and optimizer state;
    every other variable stays whole. The layouts then follow from each
    op's rule through the forward, the backward and the optimizer, every
    value's type becomes one rank's part, and a partial sum that must be
    whole is all-reduced (dist.all_reduce; ds-overlap-collectives then
    starts it early and waits late): once after
    each row-parallel layer's forward and once after each
    column-parallel layer's input gradient. An op that cannot run on the
    layouts it is given is an error naming it. With sequence-parallel, the
    activations [B, S, ...] between the cut layers (norms, dropout,
    residuals) are cut along their tokens instead of whole: each
    all-reduce becomes a reduce-scatter, and the input of each
    column-parallel layer is all-gathered. Cut variables carry
    dist.tensor_split, the module dist.tensor_parallel.
  }];
  let options = [
    Option<"tensorParallel", "tensor-parallel", "int64_t", "1",
           "ranks in the tensor-parallel group (1: the pass changes nothing)">,
    Option<"sequenceParallel", "sequence-parallel", "bool", "false",
           "Megatron-LM's sequence parallelism: activations outside the cut "
           "layers cut along their tokens (reduce-scatter + all-gather in "
           "place of each all-reduce)">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect", "::mlir::dist::DistDialect"];
}

def DsUlysses : Pass<"ds-ulysses", "::mlir::ModuleOp"> {
  let summary = "phase `train`: Ulysses sequence parallelism on @forward";
  let description = [{
    Runs before ds-autodiff. Each rank of a sequence-parallel group of
    `sequence-parallel` ranks takes its contiguous part of every sequence:
    @forward's (and @forward_eval's) token and target arguments become
    [B, L/S], and the cut is carried op by op through the forward
    (passes/shard/ShardRules.h's split layouts, plus lookups, norms,
    dropout and the loss on cut rows). Attention and rotary embeddings need
    whole sequences: their operands are exchanged from the token cut to a
    cut of the heads by one dist.all_to_all over the group (DeepSpeed-
    Ulysses), and attention's result goes back the same way. Positions are
    the rank's part of the whole ds.iota (dist.shard). The loss is the
    mean over the rank's tokens; autodiff differentiates the rewritten
    forward (an all-to-all's gradient is the same all-to-all), and every
    weight stays whole, so gradients average over all ranks as in data
    parallelism. An op that would need a whole sequence it does not have
    is an error naming it. The module gets dist.sequence_parallel.
  }];
  let options = [
    Option<"sequenceParallel", "sequence-parallel", "int64_t", "1",
           "ranks in a sequence-parallel group (1: the pass changes nothing)">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect", "::mlir::dist::DistDialect"];
}

def DsOverlapCollectives : Pass<"ds-overlap-collectives", "::mlir::ModuleOp"> {
  let summary = "phase `shard`: tensor- and sequence-group collectives under compute";
  let description = [{
    Runs after ds-shard (and, with Ulysses, on ds-ulysses' all-to-alls once
    autodiff has made their gradients). Each collective marked
    dist.tensor_group starts right after its operand is made: the adds of a
    partial sum and the reshapes and transposes that prepare a flat operand
    move up to just after what they read (autodiff sums a layer's
    input-gradient parts after the weight gradients, which then run under
    the all-reduce). Its dist.wait, with the reshapes and transposes that
    only it feeds, moves down to just before the first op that reads them,
    so the compute in between (the next projection's GEMM, the next
    exchange's preparation) runs while the collective is on the wire.
  }];
  let dependentDialects = ["::mlir::ds::DSDialect", "::mlir::dist::DistDialect"];
}

def DsChunkMicroBatch : Pass<"ds-chunk-micro-batch", "::mlir::ModuleOp"> {
  let summary = "phase `train`: @forward on chunks of the micro-batch, interleaved";
  let description = [{
    Runs before ds-autodiff, with tensor parallelism. @forward's token and
    target arguments are split along their samples into `chunks` equal
    chunks, and every op computed from them is cloned once per chunk, the
    clones side by side where the op stood (weights and positions are
    computed once and shared); the loss is the mean of the chunks'. After
    ds-shard, ds-overlap-collectives then starts one chunk's all-reduce
    before the other chunk's GEMM and waits for it after: the forward's
    collectives, which otherwise feed the very next op, run under compute,
    and the backward (autodiff's reverse of the interleaved forward) is
    interleaved too. Each batched op is checked to work sample by sample
    (ShardRules' split layouts along dimension 0, lookups, norms, the
    loss); one that does not is an error naming it. A chunk's dropout
    draws its rows of the micro-batch's mask (ds.dropout's sample_offset).
  }];
  let options = [
    Option<"chunks", "chunks", "int64_t", "1",
           "chunks of the micro-batch (1: the pass changes nothing)">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect"];
}

def DsPipelineCut : Pass<"ds-pipeline-cut", "::mlir::ModuleOp"> {
  let summary = "phase `train`: @forward cut into pipeline stages";
  let description = [{
    Runs before ds-autodiff. The transformer blocks (parameters named
    PREFIX.N.*, in the order the forward reads them) are split into
    `stages` contiguous runs (`partition`: of equal size, of equal
    parameters, or of equal predicted time within a memory budget;
    passes/pipeline/PipelinePartition.h); each op of @forward (and
    @forward_eval) gets dist.stage, the stage that runs it: the ops before
    the first block on stage 0, those after the last on the last stage.
    A value one stage makes and a later stage reads goes through one
    dist.transfer per reading stage, whose gradient (autodiff) is the
    transfer of the cotangent back. The arguments, the parameters' loads
    and what is computed from constants alone stay unstaged: every stage
    may have them. A forward that reads a later stage's value, or has
    fewer blocks than stages, is an error. The module gets
    dist.pipeline_stages.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", "1",
           "pipeline stages (1: the pass changes nothing)">,
    Option<"partition", "partition", "std::string", "\"uniform\"",
           "uniform | parameters | balanced (PipelinePartition.h)">,
    Option<"flopsPerByte", "flops-per-byte", "double", "119.4",
           "balanced: the machine's FLOP/s over its memory bandwidth "
           "(default the h100 model's)">,
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "balanced: micro-batches a step (the in-flight activations)">,
    Option<"schedule", "schedule", "std::string", "\"1f1b\"",
           "balanced: gpipe | 1f1b (the in-flight activations)">,
    Option<"stageMemory", "stage-memory", "int64_t", "0",
           "balanced: bytes a stage's predicted memory may take (0: any)">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect", "::mlir::dist::DistDialect"];
}

def DsPipeline : Pass<"ds-pipeline", "::mlir::ModuleOp"> {
  let summary = "phase `pipeline`: each stage's step, unrolled in schedule order";
  let description = [{
    After autodiff, on a module cut by ds-pipeline-cut: @micro_step's ops
    are placed on their stages (the forward's as marked, every other op
    where its operands are; ops with no staged operand are copied into
    each stage that reads them), and for each stage s a function
    @pipeline_step_s(tokens, targets) takes the step's `micro-batches`
    micro-batches (the arguments `micro-batches` times as many rows) and
    runs the stage's forward and backward of each in the order of
    `schedule`: gpipe (every forward, then every backward), 1f1b
    (stages - s - 1 forwards, then one forward and one backward in turn,
    then the remaining backwards) or interleaved (Megatron's: the forward
    was cut into stages x virtual-stages chunks, chunk c on stage
    c % stages, and each stage runs its chunks' forwards and backwards in
    groups of `stages` micro-batches, one forward and one backward in turn
    after a longer warm-up). Each dist.transfer becomes a dist.send
    on its source stage and a dist.recv on its destination, numbered by
    the transfer and the micro-batch. The last stage returns the mean of
    the micro-batches' losses, the others 0. @micro_step is removed.
    @apply becomes @apply_s per stage (passes/pipeline/PipelineApply.cpp):
    a tied parameter's gradient summed over the stages holding it, the
    global norm's parts summed over all stages (dist.all_reduce marked
    dist.pipeline_group), the stage's own updates. (docs/pipeline.md:
    @eval and the plans per stage come next.)
  }];
  let options = [
    Option<"stages", "stages", "int64_t", "1",
           "pipeline stages (1: the pass changes nothing)">,
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "micro-batches per step: autodiff's accumulation steps">,
    Option<"schedule", "schedule", "std::string", "\"1f1b\"",
           "gpipe, 1f1b, interleaved or zbh1">,
    Option<"virtualStages", "virtual-stages", "int64_t", "1",
           "interleaved: the model chunks each stage runs (the forward was "
           "cut into stages x virtual-stages chunks, chunk c on stage c % "
           "stages)">,
    Option<"replicas", "replicas", "int64_t", "1",
           "data-parallel replicas of the pipeline (dropout: micro-batch m "
           "of replica r draws samples (m x replicas + r) x B on)">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect", "::mlir::dist::DistDialect"];
}

def DsPipelineSplit : Pass<"ds-pipeline-split", "::mlir::ModuleOp"> {
  let summary = "phase `pipeline`: each stage as a module of its own";
  let description = [{
    After ds-pipeline: for each stage s, a nested module @stage_s holding
    @pipeline_step_s as @micro_step, @apply_s as @apply and @eval_s as
    @eval, the variables they read or write (and those their `of` names),
    and the outer module's attributes, marked dist.pipeline_stages and
    dist.stage. The stage functions leave the outer module. The phases
    after `pipeline` run on each stage's module as on any training module
    (compiler/Pipelines.cpp nests them), and ds-emit-plan writes the
    stages' plans into one file (docs/pipeline.md).
  }];
  let dependentDialects = ["::mlir::ds::DSDialect", "::mlir::dist::DistDialect"];
}

def DsZero : Pass<"ds-zero", "::mlir::ModuleOp"> {
  let summary = "phase `dist`: data parallelism with ZeRO sharding";
  let description = [{
    Stage 0 (data parallelism): each micro-step's parameter gradients are
    grouped, in the order the backward pass completes them, into buckets of
    at most `bucket-size` elements; each bucket is all-reduced (averaged) as
    soon as its last gradient exists, and the accumulation into the
    gradient variables waits for it once the next bucket's all-reduce has
    started (the last one's at the end of the micro-step). With gradient
    accumulation (`accumulation-steps` > 1) @micro_step only accumulates
    locally, and a copy of it, @micro_step_sync, which dsrun runs for the
    last micro-batch of each step, all-reduces the accumulated sums bucket by
    bucket instead (DeepSpeed's accumulation boundary). Stage 1
    also shards the optimizer: parameter groups (dist.group, padded to a
    multiple of the world size) keep Adam's moments per rank for the rank's
    slice only; @apply updates that slice and all-gathers the group. Stage 2
    makes the buckets the groups: each is reduce-scattered right after its
    last gradient into shard-sized accumulators, and the global norm is an
    all-reduce of the shards' sums of squares. With one rank the pass
    changes nothing. Stage 3 also shards the parameters: the groups of
    parameters with at least `persistence-threshold` elements are stored
    as one shard per rank; in @micro_step each stretch of uses of a group
    (a window: its uses until another group's are reached) reads views of an
    all-gather issued one window ahead when the group fits in
    `prefetch-bucket-size` and the gathered groups live at that point stay
    within `max-live-parameters` elements (otherwise just before its first
    use); the gathered copy dies after the window's last use. @apply
    updates the shard in place and gathers nothing.
  }];
  let options = [
    Option<"worldSize", "world-size", "int64_t", "1", "ranks">,
    Option<"stage", "stage", "int64_t", "0", "ZeRO stage (0-3)">,
    Option<"bucketSize", "bucket-size", "int64_t",
           "::mlir::ds::zero::kDefaultBucketSize",
           "elements per gradient bucket (reduce_bucket_size)">,
    Option<"accumulationSteps", "accumulation-steps", "int64_t", "1",
           "micro-steps per step; at stages 0-1 with more than one, only "
           "@micro_step_sync (the last) reduces, the accumulated sums">,
    Option<"prefetchBucketSize", "prefetch-bucket-size", "int64_t",
           "::mlir::ds::zero::kDefaultPrefetchBucketSize",
           "stage 3: largest group gathered ahead of its use "
           "(stage3_prefetch_bucket_size)">,
    Option<"maxLiveParameters", "max-live-parameters", "int64_t",
           "::mlir::ds::zero::kDefaultMaxLiveParameters",
           "stage 3: gathered elements live at once when prefetching "
           "(stage3_max_live_parameters)">,
    Option<"persistenceThreshold", "persistence-threshold", "int64_t",
           "::mlir::ds::zero::kDefaultPersistenceThreshold",
           "stage 3: parameters with fewer elements stay whole "
           "(stage3_param_persistence_threshold)">,
    Option<"wideCollectives", "wide-collectives", "bool", "false",
           "16-bit gradients and parameters travel in fp32 "
           "(communication_data_type fp32): cast before each "
           "collective and back after its wait">
  ];
  let dependentDialects = ["::mlir::ds::DSDialect", "::mlir::dist::DistDialect"];
}

#endif // DSC_PASSES_TD
