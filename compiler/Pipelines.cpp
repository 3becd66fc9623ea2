//===- Pipelines.cpp - dsc's compile phases -------------------------------===//
#include "compiler/Pipelines.h"

#include "dialects/ds/DsOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace dsc {

namespace {

// What each phase adds to the one before it.
void addInput(OpPassManager &pm, const TrainOptions &) {
  pm.addPass(ds::createDsVerifyInput());
}
void addTrain(OpPassManager &pm, const TrainOptions &o) {
  pm.addPass(ds::createDsAutodiff({o.accumulationSteps, o.worldSize}));
  pm.addPass(
      ds::createDsAdamW({o.beta1, o.beta2, o.eps, o.weightDecay, o.gradClip}));
  pm.addPass(createCSEPass());
}
void addDist(OpPassManager &pm, const TrainOptions &o) {
  pm.addPass(ds::createDsZero({o.worldSize, o.zeroStage, o.reduceBucketSize,
                               o.accumulationSteps, o.prefetchBucketSize,
                               o.maxLiveParameters, o.persistenceThreshold}));
}
void addFused(OpPassManager &pm, const TrainOptions &) {
  pm.addPass(ds::createDsFuse());
}
void addScheduled(OpPassManager &pm, const TrainOptions &) {
  pm.addPass(ds::createDsSchedule());
}

// The one list of phases: dsc --compile-to, its help and ds-opt's
// ds-compile-to-PHASE pipelines all come from it. `plan` and `emit` add no
// passes: the plan lowering (compiler/plan) runs after the pass manager.
constexpr PhaseInfo kPhases[] = {
    {Phase::Input, "input",
     "the imported forward graph, verified against the input contract",
     addInput},
    {Phase::Train, "train",
     "autodiff and AdamW: one training step (@micro_step, @apply)", addTrain},
    {Phase::Dist, "dist",
     "ZeRO stages 0-3: parameter groups, collectives, shard ownership",
     addDist},
    {Phase::Fused, "fused", "elementwise chains and known patterns fused",
     addFused},
    {Phase::Scheduled, "scheduled",
     "a total order: accumulations right after their gradients", addScheduled},
    {Phase::Plan, "plan",
     "every value placed at an arena offset (the IR annotated with it)",
     nullptr},
    {Phase::Emit, "emit", "the FlatBuffers plan file", nullptr},
};

} // namespace

llvm::ArrayRef<PhaseInfo> phases() { return kPhases; }

std::optional<Phase> parsePhase(llvm::StringRef name) {
  for (const PhaseInfo &p : kPhases)
    if (name == p.name)
      return p.phase;
  return std::nullopt;
}

llvm::StringRef phaseName(Phase phase) {
  for (const PhaseInfo &p : kPhases)
    if (p.phase == phase)
      return p.name;
  return "?";
}

llvm::StringRef phaseList() {
  static const std::string list = [] {
    std::string s;
    for (const PhaseInfo &p : kPhases)
      s += (s.empty() ? "" : "|") + p.name.str();
    return s;
  }();
  return list;
}

void buildPipeline(OpPassManager &pm, Phase phase,
                   const TrainOptions &options) {
  for (const PhaseInfo &p : kPhases) {
    if (p.addPasses)
      p.addPasses(pm, options);
    if (p.phase == phase)
      return;
  }
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
    // One pipeline per phase that runs passes, under the phase's name.
    for (const PhaseInfo &p : kPhases) {
      if (!p.addPasses)
        continue;
      Phase phase = p.phase;
      PassPipelineRegistration<TrainPipelineOptions>(
          ("ds-compile-to-" + p.name).str(),
          ("dsc phases up to `" + p.name + "`: " + p.summary).str(),
          [phase](OpPassManager &pm, const TrainPipelineOptions &o) {
            buildPipeline(pm, phase, o.get());
          });
    }
    return true;
  }();
  (void)pipelinesRegistered;
}

} // namespace dsc
