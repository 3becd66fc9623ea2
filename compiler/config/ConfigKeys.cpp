//===- ConfigKeys.cpp - every ds_config.json key dsc knows, and its state -===//
//
// The keys follow DeepSpeed 0.19's "DeepSpeed Configuration JSON" and the
// constructors it forwards params to; Config.cpp says where dsc's reading
// of a value departs from DeepSpeed's docs and why. Keys of one section are
// listed in the order the documentation table should show them.
//
//===----------------------------------------------------------------------===//
#include "compiler/config/ConfigKeys.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

namespace dsc::config {
namespace {

constexpr KeyState Works = KeyState::Works, NoEffect = KeyState::NoEffect,
                   Refused = KeyState::Refused,
                   NotSupported = KeyState::NotSupported;

constexpr const char *kMonitor =
    "dsc writes tensorboard, csv_monitor and wandb (through dsc-train and "
    "dsc.train), and dsrun --metrics every step's loss, lr, grad norm, loss "
    "scale, tokens/s and memory as JSON lines";
constexpr const char *kMonitorWritten =
    "written by dsc-train and dsc.train (Python); dsrun alone writes "
    "--metrics JSON lines";
constexpr const char *kNvme = "it tunes NVMe offload, which dsc does not have";
constexpr const char *kPlacedAtCompileTime =
    "activations are placed at compile time (--report shows them); the "
    "policy is activation_checkpointing.remat";
constexpr const char *kCommTuning =
    "it tunes how DeepSpeed groups its collectives; dsc's plan fixes every "
    "collective and its buffer at compile time";
constexpr const char *kAllRanks = "dsc shards over all ranks";
constexpr const char *kModelDtype = "dsc's collectives carry the model's dtype";
constexpr const char *kWarmupLrs = "WarmupLR WarmupDecayLR";
constexpr const char *kWarmups = "WarmupLR WarmupDecayLR WarmupCosineLR";
constexpr const char *kNoParallelism =
    "dsc parallelizes over data (ZeRO) only, so far";
constexpr const char *kTorchPath =
    "it configures torch.optim's kernel (torch_adam); dsc's AdamW is its own";

constexpr ConfigKey kKeys[] = {
    // The top level.
    {"$", "train_batch_size", Works,
     "micro batch x gradient_accumulation_steps x ranks; any two of the "
     "three give the third"},
    {"$", "train_micro_batch_size_per_gpu", Works,
     "alone: gradient_accumulation_steps 1"},
    {"$", "gradient_accumulation_steps", Works,
     "micro-steps summed into one optimizer step"},
    {"$", "gradient_clipping", Works,
     "global norm over every rank's shards; 0 (the default, as DeepSpeed "
     "0.19.0's runtime; later versions default to 1.0) is off"},
    {"$", "optimizer", Works, "Adam or AdamW (below)"},
    {"$", "scheduler", Works,
     "WarmupLR, WarmupDecayLR, WarmupCosineLR, LRRangeTest, OneCycle; "
     "absent: a constant lr"},
    {"$", "fp16", Works, "loss-scaled fp16 with fp32 master weights"},
    {"$", "bf16", Works, "bf16 with fp32 master weights"},
    {"$", "bfloat16", Works, "bf16's older name; not with bf16"},
    {"$", "zero_optimization", Works, "ZeRO stages 0-3 and offload (below)"},
    {"$", "activation_checkpointing", Works,
     "dsc's rematerialization policy (below)"},
    {"$", "communication_data_type", Works,
     "null (the model's dtype), \"fp32\", or the enabled 16-bit type"},
    {"$", "tensorboard", Works, kMonitorWritten},
    {"$", "csv_monitor", Works, kMonitorWritten},
    {"$", "wandb", Works, kMonitorWritten},
    {"$", "steps_per_print", Works,
     "dsc-train and dsc.train print a line every steps_per_print steps; "
     "dsrun alone takes --print-every"},
    {"$", "wall_clock_breakdown", Works,
     "dsrun prints the forward, backward, update and collective times of "
     "every --print-every-th step (timed that step only: on CUDA it runs "
     "kernel by kernel, without its graphs) and records them in --metrics"},
    {"$", "dump_state", NoEffect,
     "it prints DeepSpeed's engine state; dsc --report prints the plan's"},
    {"$", "prescale_gradients", NoEffect, kCommTuning},
    {"$", "gradient_predivide_factor", NoEffect, kCommTuning},
    {"$", "zero_allow_untested_optimizer", NoEffect,
     "dsc's optimizers are its own, each tested under every ZeRO stage"},
    {"$", "zero_force_ds_cpu_optimizer", NoEffect,
     "with offload the host optimizer is always dsc's own CPU kernel"},
    {"$", "compile", NoEffect,
     "dsc compiles the whole training step ahead of time, not through "
     "torch.compile"},
    {"$", "managed_gradient_accumulation", Works,
     "true only: the plan runs gradient_accumulation_steps micro-steps per "
     "optimizer step"},
    {"$", "gradient_allreduce_op", Works,
     "\"mean\" only: gradients are averaged over the ranks"},
    {"$", "sequence_parallel_size", Works,
     "Ulysses sequence parallelism: groups of this many consecutive ranks "
     "share a batch, each rank a contiguous part of its sequences, with "
     "all-to-alls around attention (docs/tensor-parallel.md); dividing the "
     "world size, not with tensor_parallel"},
    {"$", "seq_parallel_communication_data_type", NoEffect,
     "the all-to-alls carry the activations in the model's dtype"},
    {"$", "disable_allgather", NoEffect,
     "DeepSpeed reads it and uses it nowhere"},
    {"$", "graph_harvesting", NoEffect,
     "dsc's CUDA backend captures every program as one CUDA graph"},
    {"$", "vocabulary_size", NoEffect,
     "DeepSpeed only warns when it is not a multiple of 8; dsc takes the "
     "vocabulary from the model"},
    {"$", "dataloader_drop_last", NoEffect,
     "dsrun draws whole micro-batches; there is no last partial batch"},
    {"$", "log_level", NoEffect,
     "it sets DeepSpeed's logger; dsc's lines "
     "are its own"},
    {"$", "timers", NoEffect,
     "dsrun measures tokens/s every step (--metrics, the progress line)"},
    {"$", "comet", NotSupported, kMonitor},
    {"$", "flops_profiler", Works,
     "dsrun prints the plan's FLOPs and parameters per module after "
     "profile_step (counted by dsc, no profiling run)"},
    {"$", "comms_logger", Works,
     "dsrun times every collective and prints per operation and size the "
     "count, latency and bandwidths after the run (every step is timed: "
     "on CUDA the programs run kernel by kernel, without their graphs)"},
    {"$", "memory_breakdown", Works,
     "dsrun prints each progress line's bytes per arena category (what "
     "the plan wrote), the process's peak resident set and the device's "
     "use; dsc --report predicts them before launch"},
    {"$", "autotuning", NotSupported,
     "dsc --report predicts the memory of a configuration without running "
     "it"},
    {"$", "elasticity", NotSupported, "a plan is compiled for one world size"},
    {"$", "pipeline", Works,
     "pipeline parallelism with the schedule compiled into each stage's "
     "plan (phase pipeline, docs/pipeline.md): fp32, bf16 or fp16, ZeRO "
     "stages 0 to 3 (with the optimizer's and parameters' offload), "
     "tensor parallelism within each stage, so far"},
    {"$", "sparse_attention", NotSupported,
     "dsc's attention is dense and causal"},
    {"$", "amp", NotSupported, "use bf16 or fp16 (docs/precision.md)"},
    {"$", "data_efficiency", NotSupported, "dsrun draws batches uniformly"},
    {"$", "curriculum_learning", NotSupported, "dsrun draws batches uniformly"},
    {"$", "compression_training", NotSupported,
     "dsc trains in fp32, bf16 or fp16"},
    {"$", "aio", NotSupported, "dsc has no NVMe offload"},
    {"$", "checkpoint", NotSupported,
     "dsrun --save-dir checkpoints, in dsc's layout (docs/checkpoints.md)"},
    {"$", "data_types", NotSupported, "use communication_data_type"},
    {"$", "sparse_gradients", NotSupported,
     "dsc's embedding gradients are dense"},
    {"$", "torch_autocast", NotSupported,
     "use bf16 or fp16 (docs/precision.md)"},
    {"$", "tensor_parallel", Works,
     "Megatron-style tensor parallelism decided at compile time (phase "
     "shard, docs/tensor-parallel.md)"},
    {"$", "expert_parallel", NotSupported,
     "dsc has no mixture-of-experts layers"},
    {"$", "use_data_before_expert_parallelism", NotSupported,
     "dsc has no mixture-of-experts layers"},
    {"$", "progressive_layer_drop", NotSupported,
     "dsc's step runs every layer"},
    {"$", "quantize_training", NotSupported,
     "dsc trains in fp32, bf16 or fp16"},
    {"$", "weight_quantization", NotSupported, kModelDtype},
    {"$", "hybrid_engine", NotSupported,
     "dsc trains; dsrun --sample generates"},
    {"$", "nebula", NotSupported,
     "dsrun --save-dir checkpoints, in dsc's layout (docs/checkpoints.md)"},
    {"$", "datastates_ckpt", NotSupported,
     "dsrun --save-dir checkpoints, in dsc's layout (docs/checkpoints.md)"},

    {"$.optimizer", "type", Works,
     "Adam (decoupled decay unless adam_w_mode is false), AdamW, SGD "
     "(torch.optim.SGD), Lion (DeepSpeed's FusedLion), Adagrad "
     "(torch.optim.Adagrad), Lamb (DeepSpeed's FusedLamb) or Muon "
     "(DeepSpeed's MuonWithAuxAdam), any case; "
     "OneBitAdam, ZeroOneAdam and OneBitLamb refused (1-bit compressed "
     "communication)"},
    {"$.optimizer", "params", Works, "the optimizer's arguments (below)"},
    {"$.optimizer", "legacy_fusion", NoEffect,
     "it chooses DeepSpeed's fp16 optimizer wrapper; dsc's is compiled"},
    {"$.optimizer.params", "lr", Works,
     ">= 0 [1e-3; Adagrad 1e-2; Muon: 0.02 for its matrices, 3e-4 for the "
     "AdamW half]"},
    {"$.optimizer.params", "muon_lr", Works,
     "Muon: its matrices' lr, over lr; with a scheduler other than "
     "WarmupCosineLR the scheduler's lr (DeepSpeed's schedulers set every "
     "group's)"},
    {"$.optimizer.params", "adam_lr", Works,
     "Muon: the AdamW half's lr, over lr (the scheduler's lr under a "
     "scheduler)"},
    {"$.optimizer.params", "per_head_muon", Works,
     "Muon: each attention head's block of a query, key or value "
     "projection orthogonalized on its own [false]; the heads come from the "
     "exported model's config (ds.attention_heads), and a model without "
     "such projections is refused"},
    {"$.optimizer.params", "ns_method", Works,
     "Muon: \"gram\" or \"standard\" [gram]; dsc runs the standard "
     "Newton-Schulz iteration in fp32 for both (gram is the same iteration "
     "reordered)"},
    {"$.optimizer.params", "betas", Works,
     "Adam, AdamW, Lion, Lamb: [b1, b2] in [0, 1) [0.9, 0.999]; Muon's "
     "AdamW half [0.9, 0.95]"},
    {"$.optimizer.params", "eps", Works,
     "Adam, AdamW, Lamb: > 0 [1e-8]; Adagrad, Muon's AdamW half: > 0 "
     "[1e-10]"},
    {"$.optimizer.params", "eps_inside_sqrt", Works,
     "Lamb: sqrt(v + eps) instead of sqrt(v) + eps [false]"},
    {"$.optimizer.params", "min_coeff", Works,
     "Lamb: the trust ratio's lower clamp, > 0 [0.01]"},
    {"$.optimizer.params", "max_coeff", Works,
     "Lamb: the trust ratio's upper clamp, >= min_coeff [10]"},
    {"$.optimizer.params", "lr_decay", Works, "Adagrad: >= 0 [0]"},
    {"$.optimizer.params", "initial_accumulator_value", Works,
     "Adagrad: 0 only [0]"},
    {"$.optimizer.params", "weight_decay", Works,
     ">= 0 [AdamW 0.01, the others 0, as torch.optim]; not on biases and "
     "norms; SGD's and Adagrad's is added to the gradient (L2), the "
     "others' decoupled"},
    {"$.optimizer.params", "momentum", Works,
     "SGD: >= 0 [0]; Muon: in [0, 1) [0.95]"},
    {"$.optimizer.params", "dampening", Works, "SGD: [0]"},
    {"$.optimizer.params", "nesterov", Works,
     "SGD: needs momentum > 0 and dampening 0 [false]"},
    {"$.optimizer.params", "adam_w_mode", Works,
     "true only for Adam and Muon (false is Adam with L2, not supported); "
     "AdamW ignores it, as DeepSpeed does"},
    {"$.optimizer.params", "bias_correction", Works,
     "Adam, AdamW: true only (dsc's Adam always corrects bias); Lamb: "
     "[true]"},
    {"$.optimizer.params", "torch_adam", NoEffect,
     "it chooses DeepSpeed's kernel; dsc's AdamW is its own"},
    {"$.optimizer.params", "fused", NoEffect,
     "dsc's AdamW is always one fused kernel over flat buffers"},
    {"$.optimizer.params", "fp32_optimizer_states", Works,
     "true only: dsc keeps the optimizer's state in fp32"},
    {"$.optimizer.params", "set_grad_none", NoEffect,
     "the plan writes every gradient buffer each step"},
    {"$.optimizer.params", "foreach", NoEffect, kTorchPath},
    {"$.optimizer.params", "capturable", NoEffect, kTorchPath},
    {"$.optimizer.params", "maximize", NotSupported, "dsc minimizes the loss"},
    {"$.optimizer.params", "differentiable", NotSupported,
     "dsc does not differentiate through the optimizer step"},
    {"$.optimizer.params", "max_grad_norm", Refused,
     "not an optimizer parameter (in DeepSpeed either): use "
     "gradient_clipping"},
    {"$.optimizer.params", "amsgrad", NotSupported,
     "dsc's AdamW and Lamb keep no maximum of the second moments"},

    {"$.scheduler", "type", Works,
     "WarmupLR, WarmupDecayLR, WarmupCosineLR, LRRangeTest or OneCycle "
     "(case as DeepSpeed's class names)"},
    {"$.scheduler", "params", Works, "the schedule's arguments (below)"},
    {"$.scheduler.params", "warmup_num_steps", Works, ">= 0 [1000]", kWarmups},
    {"$.scheduler.params", "warmup_type", Works,
     "\"log\" or \"linear\" [\"log\"]", kWarmups},
    {"$.scheduler.params", "warmup_min_lr", Works, ">= 0 [0]", kWarmupLrs},
    {"$.scheduler.params", "warmup_max_lr", Works,
     ">= 0 [1e-3]; \"auto\" is optimizer.params.lr", kWarmupLrs},
    {"$.scheduler.params", "total_num_steps", Works, "required, >= 1",
     "WarmupDecayLR WarmupCosineLR"},
    {"$.scheduler.params", "warmup_min_ratio", Works, ">= 0 [0]",
     "WarmupCosineLR"},
    {"$.scheduler.params", "cos_min_ratio", Works, ">= 0 [1e-4]",
     "WarmupCosineLR"},
    {"$.scheduler.params", "lr_range_test_min_lr", Works, ">= 0 [1e-3]",
     "LRRangeTest"},
    {"$.scheduler.params", "lr_range_test_step_size", Works, ">= 1 [2000]",
     "LRRangeTest"},
    {"$.scheduler.params", "lr_range_test_step_rate", Works, ">= 0 [1.0]",
     "LRRangeTest"},
    {"$.scheduler.params", "lr_range_test_staircase", Works, "[false]",
     "LRRangeTest"},
    {"$.scheduler.params", "cycle_min_lr", Works, "required, >= 0", "OneCycle"},
    {"$.scheduler.params", "cycle_max_lr", Works, "required, >= 0", "OneCycle"},
    {"$.scheduler.params", "decay_lr_rate", Works, ">= 0 [0]", "OneCycle"},
    {"$.scheduler.params", "cycle_first_step_size", Works, "> 0 [2000]",
     "OneCycle"},
    {"$.scheduler.params", "cycle_second_step_size", Works,
     ">= 0 [cycle_first_step_size]", "OneCycle"},
    {"$.scheduler.params", "cycle_first_stair_count", Works, ">= 0 [0]",
     "OneCycle"},
    {"$.scheduler.params", "cycle_second_stair_count", Works,
     ">= 0 [cycle_first_stair_count]", "OneCycle"},
    {"$.scheduler.params", "decay_step_size", Works, ">= 0 [0]", "OneCycle"},
    {"$.scheduler.params", "cycle_momentum", Works,
     "[true]: AdamW's and Lion's beta1 cycles inversely to the lr and "
     "beta2 becomes 0.99, as DeepSpeed's; no effect on SGD and Adagrad",
     "OneCycle"},
    {"$.scheduler.params", "cycle_min_mom", Works, "in [0, 1) [0.8]",
     "OneCycle"},
    {"$.scheduler.params", "cycle_max_mom", Works, "in [0, 1) [0.9]",
     "OneCycle"},
    {"$.scheduler.params", "decay_mom_rate", Works,
     "[0]: after the cycle beta1 = cycle_max_mom x (1 + rate x interval); "
     "dsrun refuses a run whose beta1 would leave [0, 1)",
     "OneCycle"},
    {"$.scheduler.params", "last_batch_iteration", Works,
     "-1 only (start at step 0); dsrun --resume continues a schedule"},

    {"$.fp16", "enabled", Works, "[false]; not with bf16"},
    {"$.fp16", "loss_scale", Works, "0 = dynamic [0], else a fixed scale"},
    {"$.fp16", "initial_scale_power", Works,
     "0..127 [16, DeepSpeed's runtime default]"},
    {"$.fp16", "loss_scale_window", Works, ">= 1 [1000]"},
    {"$.fp16", "hysteresis", Works, ">= 1 [2]"},
    {"$.fp16", "consecutive_hysteresis", Works, "[false]"},
    {"$.fp16", "min_loss_scale", Works, "> 0 [1]"},
    {"$.fp16", "auto_cast", Works,
     "false only: dsc does not cast the model's inputs"},
    {"$.fp16", "fp16_master_weights_and_grads", NotSupported,
     "dsc keeps fp32 master weights and 16-bit gradients"},

    {"$.bf16", "enabled", Works, "[false]; not with fp16"},
    {"$.bf16", "check_grad_overflow", Works,
     "[true]: a non-finite gradient skips the step"},
    {"$.bf16", "immediate_grad_update", NoEffect,
     "the plan places every gradient accumulation at compile time"},
    {"$.bf16", "bf16_master_weights_and_grads", NotSupported,
     "dsc keeps fp32 master weights"},
    {"$.bf16", "bf16_optimizer_states", NotSupported,
     "dsc keeps the optimizer's moments in fp32"},

    {"$.zero_optimization", "stage", Works, "0, 1, 2 or 3 [0] (docs/zero.md)"},
    {"$.zero_optimization", "offload_optimizer", Works,
     "stages 1-3 (docs/offload.md)"},
    {"$.zero_optimization", "offload_param", Works,
     "stage 3 (docs/offload.md)"},
    {"$.zero_optimization", "reduce_bucket_size", Works,
     ">= 1 [5e8]: elements per gradient bucket"},
    {"$.zero_optimization", "stage3_prefetch_bucket_size", Works,
     ">= 0 [5e7]: elements gathered ahead of their layer"},
    {"$.zero_optimization", "stage3_param_persistence_threshold", Works,
     ">= 0 [1e5]: smaller parameters stay whole on every rank"},
    {"$.zero_optimization", "stage3_max_live_parameters", Works,
     ">= 0 [1e9]: gathered elements held at once"},
    {"$.zero_optimization", "prefetch_bucket_size", Works,
     "stage3_prefetch_bucket_size's other name (not with it)"},
    {"$.zero_optimization", "param_persistence_threshold", Works,
     "stage3_param_persistence_threshold's other name (not with it)"},
    {"$.zero_optimization", "max_live_parameters", Works,
     "stage3_max_live_parameters's other name (not with it)"},
    {"$.zero_optimization", "contiguous_gradients", NoEffect,
     "dsc's gradients always live in flat buffers placed at compile time"},
    {"$.zero_optimization", "overlap_comm", NoEffect,
     "dsc's plan always runs collectives on their own stream, overlapped "
     "with compute"},
    {"$.zero_optimization", "allgather_partitions", NoEffect, kCommTuning},
    {"$.zero_optimization", "allgather_bucket_size", NoEffect, kCommTuning},
    {"$.zero_optimization", "reduce_scatter", NoEffect, kCommTuning},
    {"$.zero_optimization", "round_robin_gradients", NoEffect, kCommTuning},
    {"$.zero_optimization", "sub_group_size", NoEffect,
     "dsc's optimizer runs over flat buffers in one pass"},
    {"$.zero_optimization", "stage3_max_reuse_distance", NoEffect,
     "dsc's plan frees each gathered parameter after its last use"},
    {"$.zero_optimization", "stage3_gather_16bit_weights_on_model_save",
     NoEffect, "dsc's checkpoints always hold whole fp32 weights"},
    {"$.zero_optimization", "ignore_unused_parameters", NoEffect,
     "dsc's autodiff gives unused parameters zero gradients"},
    {"$.zero_optimization", "max_reuse_distance", NoEffect,
     "dsc's plan frees each gathered parameter after its last use"},
    {"$.zero_optimization", "gather_16bit_weights_on_model_save", NoEffect,
     "dsc's checkpoints always hold whole fp32 weights"},
    {"$.zero_optimization", "stage3_gather_fp16_weights_on_model_save",
     NoEffect, "dsc's checkpoints always hold whole fp32 weights"},
    {"$.zero_optimization", "use_multi_rank_bucket_allreduce", NoEffect,
     kCommTuning},
    {"$.zero_optimization", "stage3_use_all_reduce_for_fetch_params", NoEffect,
     kCommTuning},
    {"$.zero_optimization", "stage3_allgather_sequential", NoEffect,
     kCommTuning},
    {"$.zero_optimization", "stage3_model_persistence_threshold", NoEffect,
     "dsc keeps every parameter under stage3_param_persistence_threshold "
     "whole, with no cap on their total"},
    {"$.zero_optimization", "stage3_module_granularity_threshold", NoEffect,
     "dsc gathers parameters by the prefetch buckets its plan fixes"},
    {"$.zero_optimization", "leaf_module", NoEffect,
     "dsc gathers parameters by the prefetch buckets its plan fixes"},
    {"$.zero_optimization", "load_from_fp32_weights", NoEffect,
     "dsc's checkpoints hold fp32 weights, which a resume loads"},
    {"$.zero_optimization", "elastic_checkpoint", NoEffect,
     "dsc's checkpoints resume at any world size and ZeRO stage "
     "(docs/checkpoints.md)"},
    {"$.zero_optimization", "legacy_stage1", NoEffect, "dsc has one stage 1"},
    {"$.zero_optimization", "memory_efficient_linear", NoEffect,
     "the plan keeps what its remat policy says"},
    {"$.zero_optimization", "override_module_apply", NoEffect,
     "dsc does not patch torch modules"},
    {"$.zero_optimization", "pipeline_loading_checkpoint", NoEffect,
     "dsrun loads a checkpoint's shards on their ranks"},
    {"$.zero_optimization", "log_trace_cache_warnings", NoEffect,
     "dsc's schedule is compiled; there is no trace cache"},
    {"$.zero_optimization", "enable_sanity_checks", NoEffect,
     "the plan is verified when it is compiled and loaded"},
    {"$.zero_optimization", "save_muon_momentum_buffer_in_memory", NoEffect,
     "it concerns Muon with NVMe offload, which dsc does not have"},
    {"$.zero_optimization", "cpu_offload_use_pin_memory", NoEffect,
     "deprecated in DeepSpeed, which only warns"},
    {"$.zero_optimization", "cpu_offload", NotSupported,
     "DeepSpeed's old name; write offload_optimizer {\"device\": \"cpu\"} "
     "(docs/offload.md)"},
    {"$.zero_optimization", "zero_hpz_partition_size", NotSupported, kAllRanks},
    {"$.zero_optimization", "zero_quantized_weights", NotSupported,
     kModelDtype},
    {"$.zero_optimization", "zero_quantized_gradients", NotSupported,
     kModelDtype},
    {"$.zero_optimization", "mics_shard_size", NotSupported, kAllRanks},
    {"$.zero_optimization", "mics_hierarchical_params_gather", NotSupported,
     kAllRanks},
    {"$.zero_optimization", "zero_quantized_nontrainable_weights", NotSupported,
     kModelDtype},
    {"$.zero_optimization", "zeropp_loco_param", NotSupported, kModelDtype},
    {"$.zero_optimization", "cpu_offload_param", NotSupported,
     "DeepSpeed's old name; write offload_param {\"device\": \"cpu\"} "
     "(docs/offload.md)"},
    {"$.zero_optimization", "zenflow", NotSupported,
     "dsc offloads the whole optimizer (docs/offload.md)"},

    {"$.zero_optimization.offload_optimizer", "device", Works,
     "\"none\" or \"cpu\" (host memory); \"nvme\" is not supported yet"},
    {"$.zero_optimization.offload_optimizer", "pin_memory", Works,
     "true: host arenas are page-locked on GPU backends; false gets a note"},
    {"$.zero_optimization.offload_optimizer", "ratio", Works,
     "1 only: the whole optimizer runs on the host"},
    {"$.zero_optimization.offload_optimizer", "nvme_path", NoEffect, kNvme},
    {"$.zero_optimization.offload_optimizer", "buffer_count", NoEffect, kNvme},
    {"$.zero_optimization.offload_optimizer", "pipeline_read", NoEffect, kNvme},
    {"$.zero_optimization.offload_optimizer", "pipeline_write", NoEffect,
     kNvme},
    {"$.zero_optimization.offload_optimizer", "fast_init", NoEffect, kNvme},
    {"$.zero_optimization.offload_optimizer", "super_offload", NotSupported,
     "dsc offloads the whole optimizer to host memory (docs/offload.md)"},
    {"$.zero_optimization.offload_optimizer", "cpuadam_cores_perc", NoEffect,
     "it tunes super_offload, which dsc does not have"},
    {"$.zero_optimization.offload_param", "device", Works,
     "\"none\" or \"cpu\" (host memory); \"nvme\" is not supported yet"},
    {"$.zero_optimization.offload_param", "pin_memory", Works,
     "true: host arenas are page-locked on GPU backends; false gets a note"},
    {"$.zero_optimization.offload_param", "nvme_path", NoEffect, kNvme},
    {"$.zero_optimization.offload_param", "buffer_count", NoEffect, kNvme},
    {"$.zero_optimization.offload_param", "buffer_size", NoEffect, kNvme},
    {"$.zero_optimization.offload_param", "max_in_cpu", NoEffect, kNvme},

    {"$.activation_checkpointing", "remat", Works,
     "dsc's: \"none\", \"layers\", \"selective\" or \"auto\" [\"none\"] "
     "(docs/remat.md)"},
    {"$.activation_checkpointing", "remat_every", Works,
     "dsc's: >= 1 [1], keep every k-th layer's input"},
    {"$.activation_checkpointing", "activation_memory", Works,
     "dsc's: >= 0 [0], the \"auto\" policy's byte budget"},
    {"$.activation_checkpointing", "cpu_checkpointing", Works,
     "saved activations go to host memory (phase offload)"},
    {"$.activation_checkpointing", "partition_activations", Refused,
     "false only: it splits activations over tensor-parallel ranks, which "
     "dsc does not have yet"},
    {"$.activation_checkpointing", "contiguous_memory_optimization", NoEffect,
     kPlacedAtCompileTime},
    {"$.activation_checkpointing", "synchronize_checkpoint_boundary", NoEffect,
     kPlacedAtCompileTime},
    {"$.activation_checkpointing", "profile", NoEffect, kPlacedAtCompileTime},
    {"$.activation_checkpointing", "number_checkpoints", NoEffect,
     "the policy (activation_checkpointing.remat) decides what is kept"},

    {"$.pipeline", "stages", Works,
     ">= 1 [1: off] pipeline stages, each one rank or one tensor-parallel "
     "group, stages x autotp_size dividing the world size: the mesh is "
     "data x pipeline x tensor (tensor innermost), its data-parallel "
     "replicas of the pipeline take ZeRO stages 0 to 3 (2 and 3 reduce-"
     "scatter each micro-batch's gradients, 3 gathers the parameters per "
     "micro-batch); the micro-batches of a step are "
     "gradient_accumulation_steps"},
    {"$.pipeline", "partition", Works,
     "\"uniform\" (dsc's default): the transformer blocks in equal runs, "
     "the first stages taking one more when they do not divide; "
     "\"parameters\": equal parameter elements (DeepSpeed's "
     "partition_method); \"balanced\": equal predicted time on dsc's "
     "--machine, each stage's predicted memory within --device-memory"},
    {"$.pipeline", "schedule", Works,
     "dsc's key (\"1f1b\"): \"1f1b\", \"gpipe\", \"interleaved\" "
     "(Megatron's, virtual_stages model chunks a stage, "
     "gradient_accumulation_steps a multiple of the stages) or \"zbh1\" "
     "(zero bubble H1: each backward split into its input- and weight-"
     "gradient halves, some weight halves deferred into the drain), "
     "unrolled into each stage's micro_step at compile time"},
    {"$.pipeline", "virtual_stages", Works,
     "dsc's key: >= 2 [2] model chunks each stage runs under the "
     "\"interleaved\" schedule (the blocks are cut into stages x "
     "virtual_stages chunks, chunk c on stage c % stages); 1 otherwise"},
    {"$.pipeline", "seed_layers", NoEffect,
     "every stage initializes its parameters from the run's seed and the "
     "parameter's name, as one rank does"},
    {"$.pipeline", "activation_checkpoint_interval", NoEffect,
     "use activation_checkpointing.remat (per stage)"},
    {"$.pipeline", "pipe_partitioned", NoEffect,
     "activations cross stages whole"},
    {"$.pipeline", "grad_partitioned", NoEffect,
     "activation gradients cross stages whole"},
    {"$.tensor_parallel", "autotp_size", Works,
     ">= 0 [0: off] ranks of a tensor-parallel group (consecutive ranks), "
     "dividing the world size; the data-parallel replicas (world / size) "
     "take ZeRO stages 0-3"},
    {"$.tensor_parallel", "sequence_parallel", Works,
     "dsc's key (false): Megatron-LM's sequence parallelism, the "
     "activations between the cut layers cut along their tokens "
     "(reduce-scatter + all-gather in place of each all-reduce)"},
    {"$.tensor_parallel", "micro_batch_chunks", Works,
     "dsc's key (1): the micro-batch cut into this many chunks of samples "
     "whose forwards interleave op by op, so that one chunk's "
     "tensor-parallel collectives run under another chunk's compute "
     "(DeepSpeed-Domino's idea); it must divide the micro-batch"},
    {"$.tensor_parallel", "tp_overlap_comm", NoEffect,
     "dsc always starts each tensor-parallel collective where its operand "
     "is made and waits for it at its first use"},
    {"$.tensor_parallel", "vocab_parallel_lm_head", NotSupported,
     "the embedding and the LM head stay whole on every rank, so far"},
    {"$.tensor_parallel", "vocab_parallel_ce_backend", NoEffect,
     "dsc's cross-entropy is its own kernel"},
    {"$.tensor_parallel", "tp", NotSupported,
     "set the group's size with autotp_size"},
    {"$.tensor_parallel", "tensor_parallel", NotSupported,
     "set the group's size with autotp_size"},
    {"$.tensor_parallel", "partition_config", NotSupported,
     "dsc cuts the layers Megatron-LM cuts, by module name"},
    {"$.tensor_parallel", "preset_model", NotSupported,
     "dsc cuts the layers Megatron-LM cuts, by module name"},
    {"$.tensor_parallel", "injection_policy_tuple", NotSupported,
     "dsc cuts the layers Megatron-LM cuts, by module name"},
    {"$.tensor_parallel", "keep_module_on_host", NoEffect,
     "dsc places every buffer at compile time"},
    {"$.tensor_parallel", "dtype", NoEffect,
     "the model's dtype comes from fp16 / bf16"},
    {"$.tensor_parallel", "replace_with_kernel_inject", NotSupported,
     "an inference option"},
    {"$.tensor_parallel", "kernel_inject", NotSupported, "an inference option"},

    {"$.tensorboard", "enabled", Works, "[false]"},
    {"$.tensorboard", "output_path", Works, "the event files' folder"},
    {"$.tensorboard", "job_name", Works, "a subfolder per job"},
    {"$.flops_profiler", "enabled", Works, "[false]"},
    {"$.flops_profiler", "profile_step", Works, ">= 1 [1]"},
    {"$.flops_profiler", "module_depth", Works,
     ">= -1 [-1: every depth]; 1 is the model's children"},
    {"$.flops_profiler", "top_modules", Works,
     ">= 1 [1] modules per depth, by FLOPs"},
    {"$.flops_profiler", "detailed", NoEffect,
     "the profile is per module; dsrun --trace times each kernel"},
    {"$.flops_profiler", "recompute_fwd_factor", NoEffect,
     "dsc counts remat's recomputed FLOPs exactly"},
    {"$.flops_profiler", "output_file", NotSupported,
     "the profile goes to standard output"},
    {"$.comms_logger", "enabled", Works, "[false]"},
    {"$.comms_logger", "verbose", Works,
     "[false] also a line per collective as it completes"},
    {"$.comms_logger", "prof_all", Works, "[true] every operation"},
    {"$.comms_logger", "prof_ops", Works,
     "the operations logged when prof_all is false (all_reduce, "
     "all_gather[_into_tensor], reduce_scatter[_tensor], broadcast; "
     "DeepSpeed's others are never in a plan)"},
    {"$.comms_logger", "debug", NoEffect,
     "DeepSpeed adds the calling function's name; dsc's collectives are "
     "the plan's instructions, named by module in dsrun --trace"},
    {"$.csv_monitor", "enabled", Works, "[false]"},
    {"$.csv_monitor", "output_path", Works, "the CSV files' folder"},
    {"$.csv_monitor", "job_name", Works, "a subfolder per job"},
    {"$.wandb", "enabled", Works, "[false]; needs the wandb package"},
    {"$.wandb", "group", Works, "the run's group"},
    {"$.wandb", "team", Works, "the run's entity"},
    {"$.wandb", "project", Works, "the run's project"},
};

// transformers' TrainingArguments defaults, for the keys its DeepSpeed
// integration fills from them (HfTrainerDeepSpeedConfig).
constexpr HuggingFaceAuto kHuggingFaceAuto[] = {
    {"$.gradient_clipping", 1.0, "max_grad_norm"},
    {"$.optimizer.params.lr", 5e-5, "learning_rate"},
    {"$.optimizer.params.weight_decay", 0.0, "weight_decay"},
    {"$.optimizer.params.eps", 1e-8, "adam_epsilon"},
    {"$.scheduler.params.warmup_num_steps", 0, "warmup_steps"},
};

llvm::StringRef canonicalSection(llvm::StringRef section) {
  return section == "$.bfloat16" ? llvm::StringRef("$.bf16") : section;
}

bool takes(const ConfigKey &k, llvm::StringRef schedulerType) {
  if (!k.only || schedulerType.empty())
    return true;
  llvm::SmallVector<llvm::StringRef, 4> types;
  llvm::StringRef(k.only).split(types, ' ');
  return llvm::is_contained(types, schedulerType);
}

const char *stateName(KeyState s) {
  switch (s) {
  case KeyState::Works:
    return "works";
  case KeyState::NoEffect:
    return "accepted, no effect (a note says why)";
  case KeyState::Refused:
    return "refused with its own message";
  case KeyState::NotSupported:
    return "not supported yet (accepted when switched off)";
  }
  return "?";
}

} // namespace

llvm::ArrayRef<ConfigKey> configKeys() { return kKeys; }

std::vector<llvm::StringRef> knownConfigKeys(llvm::StringRef section,
                                             llvm::StringRef schedulerType) {
  section = canonicalSection(section);
  std::vector<llvm::StringRef> keys;
  for (const ConfigKey &k : kKeys)
    if (section == k.section && k.state != NotSupported &&
        takes(k, schedulerType))
      keys.push_back(k.key);
  return keys;
}

namespace {
const char *noteOf(llvm::StringRef section, llvm::StringRef key,
                   KeyState state) {
  section = canonicalSection(section);
  for (const ConfigKey &k : kKeys)
    if (section == k.section && key == k.key && k.state == state)
      return k.note;
  return nullptr;
}
} // namespace

const char *unsupportedDeepSpeedKey(llvm::StringRef section,
                                    llvm::StringRef key) {
  return noteOf(section, key, NotSupported);
}

const char *noEffectConfigKey(llvm::StringRef section, llvm::StringRef key) {
  return noteOf(section, key, NoEffect);
}

const HuggingFaceAuto *huggingFaceAuto(llvm::StringRef path) {
  for (const HuggingFaceAuto &h : kHuggingFaceAuto)
    if (path == h.path)
      return &h;
  return nullptr;
}

std::string configKeysMarkdown() {
  std::string out;
  llvm::StringRef section;
  for (const ConfigKey &k : kKeys) {
    if (section != k.section) {
      section = k.section;
      out += (out.empty() ? "" : "\n") + ("### `" + section.str() + "`\n\n");
      out += "| key | state | what dsc does |\n|---|---|---|\n";
    }
    std::string note = k.note;
    if (k.only)
      note += " (" + llvm::join(llvm::split(k.only, ' '), ", ") + ")";
    out += "| `" + std::string(k.key) + "` | " + stateName(k.state) + " | " +
           note + " |\n";
  }
  return out;
}

} // namespace dsc::config
