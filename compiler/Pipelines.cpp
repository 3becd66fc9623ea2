//===- Pipelines.cpp - dsc's compile phases -------------------------------===//
#include "compiler/Pipelines.h"

#include "dialects/ds/DsOps.h"
#include "dialects/plan/PlanOps.h"
#include "passes/Functions.h"
#include "passes/Passes.h"
#include "passes/remat/RematPass.h"
#include "runtime/plan/ProgramNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace dsc {

namespace {

using Result = std::shared_ptr<PlanResult>;

// What each phase adds to the one before it.
void addInput(OpPassManager &pm, const TrainOptions &o, const Result &) {
  pm.addPass(ds::createDsVerifyInput(o.input));
}
void addTrain(OpPassManager &pm, const TrainOptions &o, const Result &) {
  if (o.ulysses.sequenceParallel > 1)
    pm.addPass(ds::createDsUlysses(o.ulysses));
  if (o.chunk.chunks > 1)
    pm.addPass(ds::createDsChunkMicroBatch(o.chunk));
  if (o.pipeline.stages > 1)
    pm.addPass(ds::createDsPipelineCut(o.pipelineCutOptions()));
  pm.addPass(ds::createDsAutodiff(o.autodiff));
  pm.addPass(ds::createDsAdamW(o.adamw));
  pm.addPass(ds::createDsEval());
  pm.addPass(createCSEPass());
}
void addShard(OpPassManager &pm, const TrainOptions &o, const Result &) {
  if (o.shard.tensorParallel > 1)
    pm.addPass(ds::createDsShard(o.shard));
  if (o.shard.tensorParallel > 1 || o.ulysses.sequenceParallel > 1)
    pm.addPass(ds::createDsOverlapCollectives());
}
ds::RematEvaluator rematEvaluator(const TrainOptions &o);
void addPipeline(OpPassManager &pm, const TrainOptions &o, const Result &) {
  if (o.pipeline.stages <= 1)
    return;
  // A pipeline rematerializes per micro-batch: ds-remat rewrites the one
  // micro-batch's step, which ds-pipeline then unrolls, each recomputation
  // in its micro-batch's backward (docs/pipeline.md).
  if (o.remat.policy != ds::remat::Policy::none)
    pm.addPass(ds::createDsRemat(o.remat, rematEvaluator(o)));
  pm.addPass(ds::createDsPipeline(o.pipeline));
  pm.addPass(ds::createDsPipelineSplit());
}
void addPrecision(OpPassManager &pm, const TrainOptions &o, const Result &) {
  if (o.precision)
    pm.addPass(ds::createDsPrecision(*o.precision));
}
void addDist(OpPassManager &pm, const TrainOptions &o, const Result &);
void addOffload(OpPassManager &pm, const TrainOptions &o, const Result &);
void addFused(OpPassManager &pm, const TrainOptions &, const Result &);
void addScheduled(OpPassManager &pm, const TrainOptions &, const Result &);
void addPlan(OpPassManager &pm, const TrainOptions &o, const Result &r);

/// A rewritten module's cost for remat auto: the activation peak (a
/// pipeline's largest stage's: the budget is each stage's) and the FLOPs
/// recomputed (over the stages).
FailureOr<ds::RematCost> rematCostOf(ModuleOp planned) {
  SmallVector<ModuleOp> plans;
  for (auto nested : planned.getBody()->getOps<ModuleOp>())
    if (nested->hasAttr(dist::kStageAttr))
      plans.push_back(nested);
  if (plans.empty())
    plans.push_back(planned);
  ds::RematCost cost;
  for (ModuleOp m : plans) {
    PlanModel plan;
    if (failed(readPlanModule(m, plan)))
      return failure();
    cost.activationPeak =
        std::max(cost.activationPeak,
                 plan.arenaBytes[static_cast<int>(Category::Activations)]);
    for (const PlanProgram &p : plan.programs)
      if (p.name == plan::kMicroStepProgram)
        cost.recomputedFlops += p.recomputedFlops;
  }
  return cost;
}

/// auto's cost model: the phases after remat, run on a candidate. A
/// pipeline's remat runs before phase pipeline, so its candidates go
/// through the stages' split and each stage's precision too.
ds::RematEvaluator rematEvaluator(const TrainOptions &o) {
  return [o](ModuleOp candidate) -> FailureOr<ds::RematCost> {
    // A candidate's cost is the step's: the one-row sampling programs
    // change neither its recomputation nor its peak (eval's batch holds at
    // least as much), and lowering them made remat auto 1.4x slower.
    ds::eraseSamplingFunctions(candidate);
    PassManager pm(candidate->getContext());
    auto result = std::make_shared<PlanResult>();
    OpPassManager *target = &pm;
    if (o.pipeline.stages > 1) {
      pm.addPass(ds::createDsPipeline(o.pipeline));
      pm.addPass(ds::createDsPipelineSplit());
      target = &pm.nest<ModuleOp>();
      addPrecision(*target, o, result);
    }
    addDist(*target, o, result);
    addOffload(*target, o, result);
    addFused(*target, o, result);
    addScheduled(*target, o, result);
    addPlan(*target, o, result);
    if (failed(pm.run(candidate)))
      return failure();
    return rematCostOf(candidate);
  };
}

void addRemat(OpPassManager &pm, const TrainOptions &o, const Result &) {
  if (o.pipeline.stages > 1)
    return; // ran before the stages were split (addPipeline)
  pm.addPass(ds::createDsRemat(o.remat, rematEvaluator(o)));
}
void addDist(OpPassManager &pm, const TrainOptions &o, const Result &) {
  pm.addPass(ds::createDsZero(o.zero));
}
void addOffload(OpPassManager &pm, const TrainOptions &o, const Result &) {
  pm.addPass(ds::createDsOffload(o.offload));
}
void addFused(OpPassManager &pm, const TrainOptions &o, const Result &) {
  pm.addPass(ds::createDsExpandUpdates());
  pm.addPass(ds::createDsFuseLmHead(o.fuseLmHead));
  pm.addPass(ds::createDsFuse());
  pm.addPass(ds::createDsFuseElementwise(o.fuseElementwise));
  pm.addPass(ds::createDsFoldAttentionLayout(o.foldAttentionLayout));
}
void addScheduled(OpPassManager &pm, const TrainOptions &o, const Result &) {
  pm.addPass(ds::createDsSchedule());
  pm.addPass(ds::createDsStoreGradients(o.storeGradients));
}
void addPlan(OpPassManager &pm, const TrainOptions &o, const Result &) {
  addPlanPasses(pm, o.plan);
}
void addEmit(OpPassManager &pm, const TrainOptions &o, const Result &r) {
  pm.addPass(createEmitPlanPass(o.emit, r));
}

// The one list of phases: dsc --compile-to, its help and ds-opt's
// ds-compile-to-PHASE pipelines all come from it.
constexpr PhaseInfo kPhases[] = {
    {Phase::Input, "input",
     "the imported forward graph, verified against the input contract",
     addInput},
    {Phase::Train, "train",
     "autodiff and AdamW: one training step (@micro_step, @apply) and "
     "@eval (forward only)",
     addTrain},
    {Phase::Shard, "shard",
     "tensor parallelism: Megatron's layout over the tensor-parallel group, "
     "its all-reduces (nothing without it)",
     addShard},
    {Phase::Pipeline, "pipeline",
     "pipeline parallelism: each stage's step in schedule order, its sends "
     "and receives, each stage a module of its own (nothing without it)",
     addPipeline},
    {Phase::Precision, "precision",
     "fp16/bf16: 16-bit model, fp32 master weights, loss scale, overflow "
     "check (nothing for fp32)",
     addPrecision},
    {Phase::Remat, "remat",
     "rematerialization: the forward values the backward recomputes "
     "instead of keeping",
     addRemat},
    {Phase::Dist, "dist",
     "ZeRO stages 0-3: parameter groups, collectives, shard ownership",
     addDist},
    {Phase::Offload, "offload",
     "offload: what lives in host memory, the CPU optimizer, the copies "
     "between the spaces (nothing without offload)",
     addOffload},
    {Phase::Fused, "fused",
     "composite updates (Muon) written as kernels; elementwise chains and "
     "known patterns fused",
     addFused},
    {Phase::Scheduled, "scheduled",
     "a total order: accumulations right after their gradients (stored, "
     "not added, with one micro-step a step)",
     addScheduled},
    {Phase::Plan, "plan",
     "every value placed at an arena offset (the IR annotated with it)",
     addPlan},
    {Phase::Emit, "emit", "the FlatBuffers plan file", addEmit},
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

void buildPipeline(OpPassManager &pm, Phase phase, const TrainOptions &options,
                   std::shared_ptr<PlanResult> result) {
  if (!result)
    result = std::make_shared<PlanResult>();
  // After phase `pipeline` each stage is a module of its own, and the
  // phases up to the plan run on each; emission writes them into one file.
  OpPassManager *target = &pm;
  for (const PhaseInfo &p : kPhases) {
    if (p.phase == Phase::Emit)
      target = &pm;
    p.addPasses(*target, options, result);
    if (p.phase == phase)
      return;
    if (p.phase == Phase::Pipeline && options.pipeline.stages > 1)
      target = &pm.nest<ModuleOp>();
  }
}

namespace {
/// ds-opt's ds-compile-to-PHASE options: the dsc flags and config keys that
/// reach the passes, under dsc's names; defaults are the passes' own.
struct TrainPipelineOptions : public PassPipelineOptions<TrainPipelineOptions> {
  const TrainOptions defaults;
  Option<int64_t> accumulationSteps{
      *this, "accumulation-steps",
      llvm::cl::init(defaults.autodiff.accumulationSteps)};
  Option<double> beta1{*this, "beta1", llvm::cl::init(defaults.adamw.beta1)};
  Option<double> beta2{*this, "beta2", llvm::cl::init(defaults.adamw.beta2)};
  Option<double> eps{*this, "eps", llvm::cl::init(defaults.adamw.eps)};
  Option<double> weightDecay{*this, "weight-decay",
                             llvm::cl::init(defaults.adamw.weightDecay)};
  Option<double> gradClip{*this, "grad-clip",
                          llvm::cl::init(defaults.adamw.gradClip)};
  Option<std::string> optimizer{
      *this, "optimizer", llvm::cl::desc("adamw, sgd, lion, adagrad or lamb"),
      llvm::cl::init(defaults.adamw.optimizer)};
  Option<double> lrDecay{*this, "lr-decay",
                         llvm::cl::init(defaults.adamw.lrDecay)};
  Option<double> momentum{*this, "momentum",
                          llvm::cl::init(defaults.adamw.momentum)};
  Option<double> dampening{*this, "dampening",
                           llvm::cl::init(defaults.adamw.dampening)};
  Option<bool> nesterov{*this, "nesterov",
                        llvm::cl::init(defaults.adamw.nesterov)};
  Option<bool> cycleMomentum{*this, "cycle-momentum",
                             llvm::cl::init(defaults.adamw.cycleMomentum)};
  Option<bool> decayAll{*this, "decay-all",
                        llvm::cl::init(defaults.adamw.decayAll)};
  Option<std::string> noDecay{*this, "no-decay",
                              llvm::cl::init(defaults.adamw.noDecay)};
  Option<double> minCoeff{*this, "min-coeff",
                          llvm::cl::init(defaults.adamw.minCoeff)};
  Option<double> maxCoeff{*this, "max-coeff",
                          llvm::cl::init(defaults.adamw.maxCoeff)};
  Option<bool> biasCorrection{*this, "bias-correction",
                              llvm::cl::init(defaults.adamw.biasCorrection)};
  Option<bool> epsInsideSqrt{*this, "eps-inside-sqrt",
                             llvm::cl::init(defaults.adamw.epsInsideSqrt)};
  Option<int64_t> worldSize{*this, "world-size",
                            llvm::cl::init(defaults.zero.worldSize)};
  Option<int64_t> tensorParallel{
      *this, "tensor-parallel",
      llvm::cl::desc("ranks of a tensor-parallel group (phase shard), "
                     "dividing world-size"),
      llvm::cl::init(defaults.shard.tensorParallel)};
  Option<bool> sequenceParallel{
      *this, "sequence-parallel",
      llvm::cl::desc("Megatron-LM's sequence parallelism (phase shard)"),
      llvm::cl::init(defaults.shard.sequenceParallel)};
  Option<int64_t> sequenceParallelSize{
      *this, "sequence-parallel-size",
      llvm::cl::desc("ranks of a Ulysses sequence-parallel group (phase "
                     "train), dividing world-size"),
      llvm::cl::init(defaults.ulysses.sequenceParallel)};
  Option<int64_t> microBatchChunks{
      *this, "micro-batch-chunks",
      llvm::cl::desc("chunks of the micro-batch whose forwards interleave "
                     "(phase train, with tensor-parallel)"),
      llvm::cl::init(defaults.chunk.chunks)};
  Option<int64_t> pipelineStages{
      *this, "pipeline-stages",
      llvm::cl::desc("stages of a pipeline (phases train and pipeline), "
                     "dividing world-size"),
      llvm::cl::init(defaults.pipeline.stages)};
  Option<std::string> pipelineSchedule{
      *this, "pipeline-schedule", llvm::cl::desc("gpipe, 1f1b or interleaved"),
      llvm::cl::init(defaults.pipeline.schedule)};
  Option<int64_t> pipelineVirtualStages{
      *this, "pipeline-virtual-stages",
      llvm::cl::desc("model chunks a stage runs (schedule interleaved)"),
      llvm::cl::init(defaults.pipeline.virtualStages)};
  Option<std::string> pipelinePartition{
      *this, "pipeline-partition",
      llvm::cl::desc("uniform, parameters or balanced"),
      llvm::cl::init(defaults.pipelineCut.partition)};
  Option<int64_t> zeroStage{*this, "zero-stage",
                            llvm::cl::init(defaults.zero.stage)};
  Option<int64_t> bucketSize{*this, "bucket-size",
                             llvm::cl::init(defaults.zero.bucketSize)};
  Option<int64_t> prefetchBucketSize{
      *this, "prefetch-bucket-size",
      llvm::cl::init(defaults.zero.prefetchBucketSize)};
  Option<int64_t> maxLiveParameters{
      *this, "max-live-parameters",
      llvm::cl::init(defaults.zero.maxLiveParameters)};
  Option<int64_t> persistenceThreshold{
      *this, "persistence-threshold",
      llvm::cl::init(defaults.zero.persistenceThreshold)};
  Option<bool> offloadOptimizer{
      *this, "offload-optimizer",
      llvm::cl::init(defaults.offload.offloadOptimizer)};
  Option<bool> offloadParam{*this, "offload-param",
                            llvm::cl::init(defaults.offload.offloadParam)};
  /// fp16/bf16.enabled: fp32 runs no ds-precision.
  enum class Precision { fp32, bf16, f16 };
  Option<Precision> precision{
      *this, "precision", llvm::cl::desc("the model's dtype"),
      llvm::cl::values(
          clEnumValN(Precision::fp32, "fp32", "no 16-bit model"),
          clEnumValN(Precision::bf16, "bf16", "bf16.enabled"),
          clEnumValN(Precision::f16, "f16", "fp16.enabled: scales the loss")),
      llvm::cl::init(Precision::fp32)};
  Option<ds::remat::Policy> remat{
      *this, "remat", llvm::cl::desc("what the backward recomputes"),
      ds::remat::policyValues(), llvm::cl::init(defaults.remat.policy)};
  Option<int64_t> rematEvery{*this, "remat-every",
                             llvm::cl::init(defaults.remat.every)};
  Option<int64_t> activationMemory{
      *this, "activation-memory",
      llvm::cl::init(defaults.remat.activationMemory)};
  Option<std::string> model{*this, "model",
                            llvm::cl::desc("the model's name in the plan"),
                            llvm::cl::init(defaults.plan.model)};
  Option<std::string> planFile{*this, "plan-file",
                               llvm::cl::desc("ds-compile-to-emit: the plan "
                                              "file to write"),
                               llvm::cl::init("")};

  TrainOptions get() const {
    TrainOptions o;
    o.setAccumulationSteps(accumulationSteps);
    o.setWorldSize(worldSize, tensorParallel, pipelineStages);
    o.pipeline.schedule = pipelineSchedule;
    o.pipelineCut.partition = pipelinePartition;
    o.pipeline.virtualStages = pipelineVirtualStages;
    o.shard.sequenceParallel = sequenceParallel;
    o.ulysses.sequenceParallel = sequenceParallelSize;
    o.chunk.chunks = microBatchChunks;
    o.adamw = {beta1,          beta2,        eps,      weightDecay, gradClip,
               optimizer,      lrDecay,      momentum, dampening,   nesterov,
               cycleMomentum,  decayAll,     noDecay,  minCoeff,    maxCoeff,
               biasCorrection, epsInsideSqrt};
    o.zero.stage = zeroStage;
    o.zero.bucketSize = bucketSize;
    o.zero.prefetchBucketSize = prefetchBucketSize;
    o.zero.maxLiveParameters = maxLiveParameters;
    o.zero.persistenceThreshold = persistenceThreshold;
    o.offload.offloadOptimizer = offloadOptimizer;
    o.offload.offloadParam = offloadParam;
    o.offload.persistenceThreshold = persistenceThreshold;
    if (precision != Precision::fp32)
      o.precision = ds::precisionOptionsFor(precision == Precision::f16
                                                ? ds::LowPrecision::f16
                                                : ds::LowPrecision::bf16);
    o.remat.policy = remat;
    o.remat.every = rematEvery;
    o.remat.activationMemory = activationMemory;
    o.plan.model = model;
    o.emit.planFile = planFile;
    return o;
  }
};
} // namespace

void registerAll(DialectRegistry &registry) {
  registry.insert<ds::DSDialect, dist::DistDialect, mlir::plan::PlanDialect,
                  func::FuncDialect>();
  ds::registerDistGradients(registry);
  ds::registerDsPasses();
  registerPlanPasses();
  registerCSEPass();
  registerCanonicalizerPass();
  static bool pipelinesRegistered = [] {
    // One pipeline per phase that runs passes, under the phase's name.
    for (const PhaseInfo &p : kPhases) {
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
