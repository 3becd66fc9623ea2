//===- PlanPasses.h - phases `plan` and `emit` as passes --------*- C++ -*-===//
//
// Phase `plan` (ds-lower-to-plan, then plan-place) and phase `emit`
// (ds-emit-plan) as passes (PlanPasses.td): lowering writes the plan
// dialect as a module @plan nested in the compiled module, plan-place packs
// its transient storage, and emission reads only that module, so
// --mlir-print-ir-after-all shows each step. What emission hands back (the
// bytes, the plan as read for dsc's --report) goes through a PlanResult the
// tool that built the pipeline reads afterwards.
//===----------------------------------------------------------------------===//
#ifndef DSC_COMPILER_PLAN_PLANPASSES_H
#define DSC_COMPILER_PLAN_PLANPASSES_H

#include "compiler/config/Config.h"
#include "compiler/plan/PlanModel.h"

#include "mlir/Pass/Pass.h"

#include <memory>
#include <optional>
#include <vector>

namespace dsc {

#define GEN_PASS_DECL
#include "compiler/plan/PlanPasses.h.inc"

/// What the plan passes of one pipeline share with the tool that built it.
struct PlanResult {
  /// The ds_config.json whose run-time settings ds-emit-plan writes (set by
  /// the tool before the pipeline runs; none under ds-opt).
  std::optional<DsConfig> config;
  PlanModel plan;             ///< set by ds-emit-plan, as it read the IR
  std::vector<uint8_t> bytes; ///< set by ds-emit-plan
  /// A pipeline's: each stage's plan (`plan` is the first's).
  std::vector<PlanModel> stages;
};

std::unique_ptr<mlir::Pass>
createLowerToPlanPass(const DsLowerToPlanOptions &options);
std::unique_ptr<mlir::Pass> createPlanAssignStreamsPass();
std::unique_ptr<mlir::Pass> createPlanInsertEventsPass();
std::unique_ptr<mlir::Pass> createPlanFuseOptimizerPass();
std::unique_ptr<mlir::Pass> createPlanLivenessPass();
std::unique_ptr<mlir::Pass> createPlanPlacePass();
/// Phase `plan`'s passes, in order: lowering, streams, events, the
/// optimizer's fusion, liveness, placement.
void addPlanPasses(mlir::OpPassManager &pm,
                   const DsLowerToPlanOptions &options);
/// Emission hands its result to `result` (it makes its own when it is
/// null, as when the registry creates it).
std::unique_ptr<mlir::Pass>
createEmitPlanPass(const DsEmitPlanOptions &options,
                   std::shared_ptr<PlanResult> result);

/// Registers them with the pass registry (ds-opt).
void registerPlanPasses();

} // namespace dsc

#endif // DSC_COMPILER_PLAN_PLANPASSES_H
