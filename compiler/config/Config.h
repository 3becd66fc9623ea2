//===- Config.h - DeepSpeed's ds_config.json for dsc --config ---*- C++ -*-===//
//
// Users bring DeepSpeed's own config file. parseDsConfig reads it with
// llvm::json, checks every key, type and range, resolves the batch-size
// triple and every "auto", and returns the resolved DsConfig; toJson writes
// the canonical form stored in the plan.
//
// Keys and defaults follow DeepSpeed's "DeepSpeed Configuration JSON"
// (deepspeed.ai/docs/config-json) and the constructors it forwards params
// to (deepspeed.readthedocs.io: schedulers, optimizers); where the docs table
// and DeepSpeed's runtime disagree (fp16.initial_scale_power 32 vs 16,
// fp16.min_loss_scale 1000 vs 1, gradient_clipping 1.0 vs 0) the runtime's
// value is the one used here. Config.cpp lists what it relies on.
//
// Every key dsc knows, with its state (works; accepted with a note that it
// has no effect and why; refused; or DeepSpeed's and "not supported yet",
// accepted when switched off) and its default, is in one table,
// ConfigKeys.cpp, from which the reader takes its known keys and
// docs/config.md its key table. "auto" is accepted wherever a default
// exists and is resolved to it, with a note: Hugging Face TrainingArguments'
// default where its Trainer would fill the key (ConfigKeys.h), else
// DeepSpeed's.
// Duplicate keys and nesting beyond 64 levels are refused (ConfigSyntax.h).
//
// Integers may be written as integral floats (5e8), as DeepSpeed allows.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_COMPILER_CONFIG_CONFIG_H
#define DSC_COMPILER_CONFIG_CONFIG_H

#include "passes/remat/RematPolicy.h"
#include "passes/zero/ZeroDefaults.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dsc {

/// A resolved ds_config.json. Field names mirror DeepSpeed's keys.
struct DsConfig {
  /// The batch triple, resolved: trainBatchSize == microBatchSize *
  /// gradientAccumulationSteps * world size.
  int64_t trainBatchSize = 0;
  int64_t microBatchSize = 0;
  int64_t gradientAccumulationSteps = 0;
  /// Clip the global gradient norm to this value; 0 disables clipping.
  double gradientClipping = 0;

  /// Adam and AdamW both use decoupled weight decay (torch.optim.AdamW
  /// semantics), as DeepSpeed's Adam does with its default adam_w_mode.
  /// SGD's and Adagrad's weight decay is coupled (added to the gradient,
  /// as torch.optim does); Lion's decoupled.
  struct Optimizer {
    // "Adam", "AdamW", "SGD", "Lion", "Adagrad", "Lamb", "Muon"
    std::string type = "AdamW";
    double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
    double weightDecay = 0.01;             // the others' default is 0
    double momentum = 0, dampening = 0;    // SGD
    bool nesterov = false;                 // SGD
    double lrDecay = 0;                    // Adagrad
    double minCoeff = 0.01, maxCoeff = 10; // Lamb's trust-ratio clamp
    bool biasCorrection = true, epsInsideSqrt = false; // Lamb
    /// Muon: `lr` (and the betas and eps) are its AdamW half's; its
    /// matrices step at muonLr (momentum, nesterov as SGD's fields).
    double muonLr = 0.02;
    std::string nsMethod = "gram";
    /// Muon: attention projections iterate head by head (per_head_muon).
    bool perHeadMuon = false;
  } optimizer;

  /// tensor_parallel.autotp_size: ranks of a tensor-parallel group (1: no
  /// tensor parallelism).
  int64_t tensorParallel = 1;
  /// tensor_parallel.sequence_parallel (dsc's key): Megatron-LM's sequence
  /// parallelism over the tensor-parallel group.
  bool sequenceParallel = false;
  /// tensor_parallel.micro_batch_chunks (dsc's key): the micro-batch cut
  /// into this many chunks whose forwards interleave, so that one chunk's
  /// tensor-parallel collectives run under another's compute
  /// (ds-chunk-micro-batch).
  int64_t microBatchChunks = 1;
  /// sequence_parallel_size (DeepSpeed's key): ranks of a Ulysses
  /// sequence-parallel group, consecutive ranks that share one batch and
  /// each take a contiguous part of its sequences (phase train, ds-ulysses).
  int64_t sequenceParallelSize = 1;
  /// pipeline.stages: a pipeline's stages, one per rank (1: none), and
  /// pipeline.schedule (dsc's key): "1f1b" or "gpipe" (docs/pipeline.md).
  int64_t pipelineStages = 1;
  std::string pipelineSchedule = "1f1b";
  std::string pipelinePartition = "uniform";
  int64_t pipelineVirtualStages = 1; ///< "interleaved": chunks per stage

  struct Scheduler {
    /// "constant" (no scheduler key), "WarmupLR", "WarmupDecayLR" or
    /// "WarmupCosineLR". WarmupLR and WarmupDecayLR use warmupMinLr and
    /// warmupMaxLr (absolute); WarmupCosineLR uses warmupMinRatio and
    /// cosMinRatio (relative to optimizer.lr).
    std::string type = "constant";
    double warmupMinLr = 0, warmupMaxLr = 1e-3;
    int64_t warmupNumSteps = 1000;
    std::string warmupType = "log"; // "log" or "linear"
    int64_t totalNumSteps = 0;      // WarmupDecayLR and WarmupCosineLR
    double cosMinRatio = 1e-4, warmupMinRatio = 0;
    /// LRRangeTest: lr = rangeMinLr * (1 + rangeStepRate * interval), the
    /// interval (iteration + 1) / rangeStepSize, floored with staircase.
    double rangeMinLr = 1e-3, rangeStepRate = 1.0;
    int64_t rangeStepSize = 2000;
    bool rangeStaircase = false;
    /// OneCycle: up from cycleMinLr to cycleMaxLr over cycleFirstStepSize
    /// steps, down over cycleSecondStepSize (DeepSpeed: the first's when
    /// not given), in stairs when a stair count is > 0, then decaying by
    /// decayLrRate every decayStepSize steps.
    double cycleMinLr = 0, cycleMaxLr = 0, decayLrRate = 0;
    double cycleFirstStepSize = 2000, cycleSecondStepSize = 2000;
    int64_t cycleFirstStairCount = 0, cycleSecondStairCount = 0;
    double decayStepSize = 0;
    /// OneCycle's cycle_momentum, where the optimizer has betas (AdamW,
    /// Lion; DeepSpeed turns it off for the others): beta1 runs from
    /// cycleMaxMom down to cycleMinMom as the lr rises and back, then
    /// grows by decayMomRate every decayStepSize steps; the first step
    /// takes cycleMinMom and beta2 is 0.99 (DeepSpeed's OneCycle).
    bool cycleMomentum = false;
    double cycleMinMom = 0.8, cycleMaxMom = 0.9, decayMomRate = 0;
  } scheduler;

  struct Fp16 {
    bool enabled = false;
    double lossScale = 0; // 0: dynamic loss scaling
    int64_t initialScalePower = 16, lossScaleWindow = 1000, hysteresis = 2;
    bool consecutiveHysteresis = false;
    double minLossScale = 1;
  } fp16;

  /// flops_profiler: the plan's FLOPs per module printed by dsrun after
  /// step profileStep (moduleDepth -1: every depth).
  struct FlopsProfiler {
    bool enabled = false;
    int64_t profileStep = 1, moduleDepth = -1, topModules = 1;
  } flopsProfiler;

  /// wall_clock_breakdown: dsrun times the forward, the backward, the
  /// update and the collectives of every steps_per_print-th step.
  bool wallClockBreakdown = false;
  /// memory_breakdown: dsrun prints the bytes of each arena category, the
  /// process's peak and the device's use with each progress line.
  bool memoryBreakdown = false;

  /// comms_logger: dsrun times every collective and prints, per operation
  /// and message size, the count, latency and bandwidths after the run
  /// (each one as it runs when verbose): every operation (allOps, DeepSpeed's
  /// prof_all) or those named in ops (dsc's comm.<name> names).
  struct CommsLogger {
    bool enabled = false, verbose = false, allOps = true;
    std::vector<std::string> ops;
  } commsLogger;

  struct Bf16 {
    bool enabled = false;
    /// A non-finite gradient skips the step (DeepSpeed's ZeRO default).
    bool checkGradOverflow = true;
  } bf16;

  /// communication_data_type: the dtype gradients and parameters travel
  /// in; "" (DeepSpeed's null) is the model's, "fp32" widens 16-bit data.
  std::string communicationDataType;

  struct Zero {
    int64_t stage = 0;
    std::string offloadOptimizer = "none", offloadParam = "none"; // or "cpu"
    // The passes' defaults (passes/zero/ZeroDefaults.h).
    int64_t reduceBucketSize = mlir::ds::zero::kDefaultBucketSize;
    bool contiguousGradients = true, overlapComm = false;
    int64_t stage3PrefetchBucketSize =
        mlir::ds::zero::kDefaultPrefetchBucketSize;
    int64_t stage3ParamPersistenceThreshold =
        mlir::ds::zero::kDefaultPersistenceThreshold;
    int64_t stage3MaxLiveParameters = mlir::ds::zero::kDefaultMaxLiveParameters;
  } zero;

  struct ActivationCheckpointing {
    bool partitionActivations = false, cpuCheckpointing = false;
    bool contiguousMemoryOptimization = false;
    int64_t numberCheckpoints = -1; // -1: null, not given
    bool synchronizeCheckpointBoundary = false, profile = false;
    // dsc's own (docs/remat.md): the policy, blocks per checkpoint, and
    // auto's activation budget in bytes (0: as small as possible).
    std::string remat = mlir::ds::remat::kNone.str();
    int64_t rematEvery = mlir::ds::remat::kDefaultEvery,
            activationMemory = mlir::ds::remat::kDefaultActivationMemory;
  } activationCheckpointing;

  /// One line each, to print: how each "auto" (and each value dsc chose
  /// where DeepSpeed would need one) was resolved, and DeepSpeed's warnings.
  std::vector<std::string> notes;
};

/// Compares every resolved value; `notes` are not compared.
bool operator==(const DsConfig &a, const DsConfig &b);
inline bool operator!=(const DsConfig &a, const DsConfig &b) {
  return !(a == b);
}

/// Parses `text` (read from `fileName`) for a run of `worldSize` ranks;
/// `defaultMicroBatch` is the micro batch used when neither
/// train_batch_size nor train_micro_batch_size_per_gpu is given. On failure
/// returns false, leaves `out` alone and sets `error` to one line per
/// problem (every problem of the file, up to 20, lines joined by '\n'):
/// "<fileName>: <JSON path>: <what is wrong>", e.g.
///   ds_config.json: $.optimizer.params.lr: expected a number, got a string
bool parseDsConfig(llvm::StringRef text, llvm::StringRef fileName,
                   int64_t worldSize, int64_t defaultMicroBatch, DsConfig &out,
                   std::string &error);

/// The canonical JSON of a resolved config (stored in the plan): DeepSpeed's
/// keys, every value explicit, keys sorted, no "scheduler" when the lr is
/// constant. parseDsConfig of it, with the same world size, gives back a
/// config equal to `config`.
std::string toJson(const DsConfig &config);

} // namespace dsc

#endif // DSC_COMPILER_CONFIG_CONFIG_H
