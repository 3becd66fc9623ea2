//===- Pipelines.h - dsc's compile phases -----------------------*- C++ -*-===//
//
// The phases of DESIGN.md as named pass pipelines. dsc and ds-opt build them
// through the same function, so `ds-opt --ds-compile-to-train` replays what
// `dsc --compile-to=train` ran.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_COMPILER_PIPELINES_H
#define DSC_COMPILER_PIPELINES_H

#include "compiler/plan/PlanPasses.h"
#include "passes/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <memory>
#include <optional>

namespace dsc {

/// In pipeline order; each phase includes the ones before it.
enum class Phase {
  Input,
  Train,
  Shard,
  Pipeline,
  Precision,
  Remat,
  Dist,
  Offload,
  Fused,
  Scheduled,
  Plan,
  Emit
};

struct TrainOptions;

/// A phase of the table in Pipelines.cpp: its name (dsc --compile-to and
/// ds-opt's ds-compile-to-NAME), what holds after it, and the passes it adds
/// to the previous phase's pipeline.
struct PhaseInfo {
  Phase phase;
  llvm::StringLiteral name;
  llvm::StringLiteral summary;
  void (*addPasses)(mlir::OpPassManager &pm, const TrainOptions &options,
                    const std::shared_ptr<PlanResult> &result);
};

/// Every phase, in pipeline order.
llvm::ArrayRef<PhaseInfo> phases();

std::optional<Phase> parsePhase(llvm::StringRef name);
llvm::StringRef phaseName(Phase phase);
/// "input|train|...": the phases this build implements, for messages.
llvm::StringRef phaseList();

/// The options of every pass the phases run, as the generated option
/// structs of passes/Passes.td and compiler/plan/PlanPasses.td: each option
/// and its default are declared once, there. passOptionsFromConfig
/// (compiler/config/PassOptions.h) fills them from a ds_config.json.
struct TrainOptions {
  mlir::ds::DsVerifyInputOptions input;
  mlir::ds::DsAutodiffOptions autodiff;
  mlir::ds::DsAdamWOptions adamw;
  mlir::ds::DsShardOptions shard;
  mlir::ds::DsUlyssesOptions ulysses;
  mlir::ds::DsChunkMicroBatchOptions chunk;
  /// Pipeline parallelism (phase `pipeline`); its `stages` also cut the
  /// forward (ds-pipeline-cut, phase train).
  mlir::ds::DsPipelineOptions pipeline;
  /// How ds-pipeline-cut chooses each stage's blocks (its stages,
  /// micro-batches and schedule come from `pipeline`).
  mlir::ds::DsPipelineCutOptions pipelineCut;
  /// fp16/bf16 training; fp32 when unset (phase `precision` adds nothing).
  std::optional<mlir::ds::DsPrecisionOptions> precision;
  mlir::ds::DsRematOptions remat;
  mlir::ds::DsZeroOptions zero;
  mlir::ds::DsFuseLmHeadOptions fuseLmHead;
  mlir::ds::DsFuseElementwiseOptions fuseElementwise;
  mlir::ds::DsStoreGradientsOptions storeGradients;
  mlir::ds::DsFoldAttentionLayoutOptions foldAttentionLayout;
  mlir::ds::DsOffloadOptions offload;
  DsLowerToPlanOptions plan;
  DsEmitPlanOptions emit;

  /// Options that several passes take: `n` ranks, in tensor-parallel
  /// groups of `tensorParallel` and pipelines of `stages` (the passes
  /// before the plan see the data-parallel degree, n / (tensorParallel x
  /// stages)).
  void setWorldSize(int64_t n, int64_t tensorParallel = 1, int64_t stages = 1) {
    shard.tensorParallel = tensorParallel;
    pipeline.stages = stages;
    autodiff.worldSize = zero.worldSize = pipeline.replicas =
        n / tensorParallel / stages;
    plan.worldSize = n;
  }
  /// ds-pipeline-cut's: the partition's and the machine's (pipelineCut)
  /// with the pipeline's stages, micro-batches and schedule.
  mlir::ds::DsPipelineCutOptions pipelineCutOptions() const {
    mlir::ds::DsPipelineCutOptions cut = pipelineCut;
    // The interleaved schedule's chunks: virtual stages of each stage.
    cut.stages = pipeline.stages * pipeline.virtualStages;
    cut.microBatches = pipeline.microBatches;
    cut.schedule = pipeline.schedule;
    return cut;
  }
  /// A pipeline's micro-batches per step are the accumulation steps.
  void setAccumulationSteps(int64_t n) {
    autodiff.accumulationSteps = zero.accumulationSteps =
        storeGradients.accumulationSteps = plan.accumulationSteps =
            pipeline.microBatches = n;
  }
};

/// Adds the passes of every phase up to `phase`. The plan passes share
/// `result`, where the caller finds the lowered plan and its bytes (null:
/// a PlanResult of their own).
void buildPipeline(mlir::OpPassManager &pm, Phase phase,
                   const TrainOptions &options,
                   std::shared_ptr<PlanResult> result = nullptr);

/// Registers dsc's dialects (and the ones its IR uses) into `registry`, and
/// its passes and pipelines into the global pass registry.
void registerAll(mlir::DialectRegistry &registry);

} // namespace dsc

#endif // DSC_COMPILER_PIPELINES_H
