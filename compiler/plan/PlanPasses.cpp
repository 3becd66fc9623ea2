//===- PlanPasses.cpp - ds-lower-to-plan and ds-emit-plan -----------------===//
//
// The other passes of phase `plan` have a file each: StreamAssignment.cpp,
// EventInsertion.cpp, OptimizerFusion.cpp, Liveness.cpp, ArenaAllocation.cpp.
//
//===----------------------------------------------------------------------===//

#include "compiler/plan/PlanPasses.h"

#include "dialects/dist/DistOps.h"
#include "dialects/plan/PlanOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"

#include "mlir/IR/BuiltinOps.h"

#include "runtime/core/OutputPath.h"
#include <functional>
#include <map>
#include <numeric>

namespace dsc {

#define GEN_PASS_DEF_DSLOWERTOPLAN
#define GEN_PASS_DEF_DSEMITPLAN
#include "compiler/plan/PlanPasses.h.inc"

namespace {

struct LowerToPlanPass : impl::DsLowerToPlanBase<LowerToPlanPass> {
  using Base::Base;
  void runOnOperation() override {
    PlanOptions options;
    options.worldSize = worldSize;
    if (auto tp = getOperation()->getAttrOfType<mlir::IntegerAttr>(
            mlir::dist::kTensorParallelAttr))
      options.tensorParallel = tp.getInt();
    if (auto sp = getOperation()->getAttrOfType<mlir::IntegerAttr>(
            mlir::dist::kSequenceParallelAttr))
      options.sequenceParallel = sp.getInt();
    options.accumulationSteps = accumulationSteps;
    options.model = model;
    // A pipeline stage's module (ds-pipeline-split).
    if (auto stages = getOperation()->getAttrOfType<mlir::IntegerAttr>(
            mlir::dist::kPipelineStagesAttr);
        stages && stages.getInt() > 1) {
      options.pipelineStages = stages.getInt();
      if (auto stage = getOperation()->getAttrOfType<mlir::IntegerAttr>(
              mlir::dist::kStageAttr))
        options.pipelineStage = stage.getInt();
      if (auto chunks = getOperation()->getAttrOfType<mlir::IntegerAttr>(
              mlir::dist::kVirtualStagesAttr))
        options.virtualStages = chunks.getInt();
    }
    PlanModel lowered;
    if (failed(lowerToPlan(getOperation(), options, lowered)))
      return signalPassFailure();
    writePlanModule(getOperation(), lowered);
  }
};

struct EmitPlanPass : impl::DsEmitPlanBase<EmitPlanPass> {
  using Base::Base;

  /// One plan, or a pipeline's: each stage module's plan (ds-pipeline-split)
  /// in one file.
  mlir::LogicalResult emit() {
    const DsConfig *config = result->config ? &*result->config : nullptr;
    std::vector<mlir::ModuleOp> stages;
    for (auto nested : getOperation().getBody()->getOps<mlir::ModuleOp>())
      if (nested->hasAttr(mlir::dist::kStageAttr))
        stages.push_back(nested);
    if (stages.empty()) {
      if (failed(readPlanModule(getOperation(), result->plan)))
        return mlir::failure();
      result->bytes = serializePlan(result->plan, config);
      return mlir::success();
    }
    result->stages.assign(stages.size(), PlanModel());
    std::vector<uint64_t> groups;
    int64_t seqLen = 0, vocabSize = 0;
    std::map<std::string, uint64_t> params; // a tied one on several stages
    for (auto [s, stage] : llvm::enumerate(stages)) {
      PlanModel &plan = result->stages[s];
      if (failed(readPlanModule(stage, plan)))
        return mlir::failure();
      for (uint64_t g : plan.pipelineGroups)
        if (!llvm::is_contained(groups, g))
          groups.push_back(g);
      for (const PlanVariable &v : plan.variables)
        if (v.kind == 0) // param
          params[v.name] = std::accumulate(v.shape.begin(), v.shape.end(),
                                           uint64_t(1), std::multiplies<>());
      seqLen = std::max(seqLen, plan.seqLen);
      vocabSize = std::max(vocabSize, plan.vocabSize);
    }
    // What dsrun reads of any stage's plan is the pipeline's: the batch's
    // shape, the vocabulary (the last stage's logits), every group.
    std::vector<std::vector<uint8_t>> bytes;
    for (PlanModel &plan : result->stages) {
      plan.pipelineGroups = groups;
      plan.seqLen = seqLen;
      plan.vocabSize = vocabSize;
      plan.modelParameters = 0;
      for (const auto &[name, n] : params)
        plan.modelParameters += n;
      bytes.push_back(serializePlan(plan, config));
    }
    result->plan = result->stages.front();
    result->bytes = serializePipeline(bytes, result->plan.options.worldSize,
                                      result->plan.options.tensorParallel,
                                      result->plan.options.model);
    return mlir::success();
  }

  EmitPlanPass(const DsEmitPlanOptions &options,
               std::shared_ptr<PlanResult> result)
      : Base(options), result(std::move(result)) {}

  void runOnOperation() override {
    if (!result)
      result = std::make_shared<PlanResult>();
    if (failed(emit()))
      return signalPassFailure();
    markAllAnalysesPreserved();
    if (planFile.empty())
      return;
    std::string error;
    // Written once the whole plan exists, all or nothing, and only over a
    // regular file (runtime/core/OutputPath.h).
    if (!dsc::writeOutput(planFile, result->bytes.data(), result->bytes.size(),
                          error)) {
      getOperation().emitError("ds-emit-plan: cannot write '")
          << planFile << "': " << error;
      return signalPassFailure();
    }
  }

  std::shared_ptr<PlanResult> result;
};

} // namespace

std::unique_ptr<mlir::Pass>
createLowerToPlanPass(const DsLowerToPlanOptions &options) {
  return std::make_unique<LowerToPlanPass>(options);
}

std::unique_ptr<mlir::Pass>
createEmitPlanPass(const DsEmitPlanOptions &options,
                   std::shared_ptr<PlanResult> result) {
  return std::make_unique<EmitPlanPass>(options, std::move(result));
}

void addPlanPasses(mlir::OpPassManager &pm,
                   const DsLowerToPlanOptions &options) {
  pm.addPass(createLowerToPlanPass(options));
  pm.addPass(createPlanAssignStreamsPass());
  pm.addPass(createPlanInsertEventsPass());
  pm.addPass(createPlanFuseOptimizerPass());
  pm.addPass(createPlanLivenessPass());
  pm.addPass(createPlanPlacePass());
}

void registerPlanPasses() {
  mlir::registerPass(
      [] { return createLowerToPlanPass(DsLowerToPlanOptions()); });
  mlir::registerPass([] { return createPlanAssignStreamsPass(); });
  mlir::registerPass([] { return createPlanInsertEventsPass(); });
  mlir::registerPass([] { return createPlanFuseOptimizerPass(); });
  mlir::registerPass([] { return createPlanLivenessPass(); });
  mlir::registerPass([] { return createPlanPlacePass(); });
  mlir::registerPass(
      [] { return createEmitPlanPass(DsEmitPlanOptions(), nullptr); });
}

} // namespace dsc
