//===- PlanPasses.cpp - ds-lower-to-plan and ds-emit-plan -----------------===//

#include "compiler/plan/PlanPasses.h"

#include "mlir/IR/BuiltinOps.h"
#include "runtime/core/OutputPath.h"

namespace dsc {

#define GEN_PASS_DEF_DSLOWERTOPLAN
#define GEN_PASS_DEF_DSEMITPLAN
#include "compiler/plan/PlanPasses.h.inc"

namespace {

struct LowerToPlanPass : impl::DsLowerToPlanBase<LowerToPlanPass> {
  using Base::Base;
  LowerToPlanPass(const DsLowerToPlanOptions &options,
                  std::shared_ptr<PlanResult> result)
      : Base(options), result(std::move(result)) {}

  void runOnOperation() override {
    if (!result)
      result = std::make_shared<PlanResult>();
    PlanOptions options;
    options.worldSize = worldSize;
    options.accumulationSteps = accumulationSteps;
    options.model = model;
    if (failed(lowerToPlan(getOperation(), options, result->plan)))
      return signalPassFailure();
    annotatePlan(getOperation(), result->plan);
    result->lowered = true;
    // The IR is annotated, nothing else changed.
    markAllAnalysesPreserved();
  }

  std::shared_ptr<PlanResult> result;
};

struct EmitPlanPass : impl::DsEmitPlanBase<EmitPlanPass> {
  using Base::Base;
  EmitPlanPass(const DsEmitPlanOptions &options,
               std::shared_ptr<PlanResult> result)
      : Base(options), result(std::move(result)) {}

  void runOnOperation() override {
    if (!result || !result->lowered) {
      getOperation().emitError(
          "ds-emit-plan: no lowered plan; run it after ds-lower-to-plan in "
          "one pipeline (ds-compile-to-emit)");
      return signalPassFailure();
    }
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
createLowerToPlanPass(const DsLowerToPlanOptions &options,
                      std::shared_ptr<PlanResult> result) {
  return std::make_unique<LowerToPlanPass>(options, std::move(result));
}

std::unique_ptr<mlir::Pass>
createEmitPlanPass(const DsEmitPlanOptions &options,
                   std::shared_ptr<PlanResult> result) {
  return std::make_unique<EmitPlanPass>(options, std::move(result));
}

void registerPlanPasses() {
  mlir::registerPass(
      [] { return createLowerToPlanPass(DsLowerToPlanOptions(), nullptr); });
  mlir::registerPass(
      [] { return createEmitPlanPass(DsEmitPlanOptions(), nullptr); });
}

} // namespace dsc
