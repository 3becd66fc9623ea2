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
    PlanModel lowered;
    if (failed(lowerToPlan(getOperation(), options, lowered)))
      return signalPassFailure();
    writePlanModule(getOperation(), lowered);
  }
};

struct EmitPlanPass : impl::DsEmitPlanBase<EmitPlanPass> {
  using Base::Base;
  EmitPlanPass(const DsEmitPlanOptions &options,
               std::shared_ptr<PlanResult> result)
      : Base(options), result(std::move(result)) {}

  void runOnOperation() override {
    if (!result)
      result = std::make_shared<PlanResult>();
    if (failed(readPlanModule(getOperation(), result->plan)))
      return signalPassFailure();
    result->bytes = serializePlan(result->plan,
                                  result->config ? &*result->config : nullptr);
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
