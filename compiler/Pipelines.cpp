//===- Pipelines.cpp - dsc's compile phases -------------------------------===//
#include "compiler/Pipelines.h"

#include "dialects/ds/DsOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace dsc {

static constexpr std::pair<Phase, llvm::StringLiteral> kPhases[] = {
    {Phase::Input, "input"},         {Phase::Train, "train"},
    {Phase::Dist, "dist"},           {Phase::Fused, "fused"},
    {Phase::Scheduled, "scheduled"}, {Phase::Plan, "plan"},
    {Phase::Emit, "emit"},
};

std::optional<Phase> parsePhase(llvm::StringRef name) {
  for (auto [phase, text] : kPhases)
    if (name == text)
      return phase;
  return std::nullopt;
}

llvm::StringRef phaseName(Phase phase) {
  for (auto [p, text] : kPhases)
    if (p == phase)
      return text;
  return "?";
}

llvm::StringRef phaseList() {
  return "input|train|dist|fused|scheduled|plan|emit";
}

void buildPipeline(OpPassManager &pm, Phase phase,
                   const TrainOptions &options) {
  pm.addPass(ds::createDsVerifyInput());
  if (phase == Phase::Input)
    return;
  pm.addPass(
      ds::createDsAutodiff({options.accumulationSteps, options.worldSize}));
  pm.addPass(ds::createDsAdamW({options.beta1, options.beta2, options.eps,
                                options.weightDecay, options.gradClip}));
  pm.addPass(createCSEPass());
  if (phase == Phase::Train)
    return;
  pm.addPass(ds::createDsZero(
      {options.worldSize, options.zeroStage, options.reduceBucketSize,
       options.accumulationSteps, options.prefetchBucketSize,
       options.maxLiveParameters, options.persistenceThreshold}));
  if (phase == Phase::Dist)
    return;
  pm.addPass(ds::createDsFuse());
  if (phase == Phase::Fused)
    return;
  pm.addPass(ds::createDsSchedule());
}

namespace {
struct TrainPipelineOptions : public PassPipelineOptions<TrainPipelineOptions> {
  Option<int64_t> accumulationSteps{*this, "accumulation-steps",
                                    llvm::cl::init(1)};
  Option<double> beta1{*this, "beta1", llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::init(1e-8)};
  Option<double> weightDecay{*this, "weight-decay", llvm::cl::init(0.01)};
  Option<double> gradClip{*this, "grad-clip", llvm::cl::init(0.0)};
  Option<int64_t> worldSize{*this, "world-size", llvm::cl::init(1)};
  Option<int64_t> zeroStage{*this, "zero-stage", llvm::cl::init(0)};
  Option<int64_t> bucketSize{*this, "bucket-size", llvm::cl::init(500000000)};
  Option<int64_t> prefetchBucketSize{*this, "prefetch-bucket-size",
                                     llvm::cl::init(50000000)};
  Option<int64_t> maxLiveParameters{*this, "max-live-parameters",
                                    llvm::cl::init(1000000000)};
  Option<int64_t> persistenceThreshold{*this, "persistence-threshold",
                                       llvm::cl::init(100000)};

  TrainOptions get() const {
    return {accumulationSteps,
            beta1,
            beta2,
            eps,
            weightDecay,
            gradClip,
            worldSize,
            zeroStage,
            bucketSize,
            prefetchBucketSize,
            maxLiveParameters,
            persistenceThreshold};
  }
};
} // namespace

void registerAll(DialectRegistry &registry) {
  registry.insert<ds::DSDialect, dist::DistDialect, func::FuncDialect>();
  ds::registerDsPasses();
  registerCSEPass();
  registerCanonicalizerPass();
  static bool pipelinesRegistered = [] {
    PassPipelineRegistration<>(
        "ds-compile-to-input", "dsc phase `input`",
        [](OpPassManager &pm) { buildPipeline(pm, Phase::Input, {}); });
    PassPipelineRegistration<TrainPipelineOptions>(
        "ds-compile-to-train", "dsc phase `train`",
        [](OpPassManager &pm, const TrainPipelineOptions &o) {
          buildPipeline(pm, Phase::Train, o.get());
        });
    PassPipelineRegistration<TrainPipelineOptions>(
        "ds-compile-to-scheduled", "dsc phases up to `scheduled`",
        [](OpPassManager &pm, const TrainPipelineOptions &o) {
          buildPipeline(pm, Phase::Scheduled, o.get());
        });
    return true;
  }();
  (void)pipelinesRegistered;
}

} // namespace dsc
