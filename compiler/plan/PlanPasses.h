//===- PlanPasses.h - phases `plan` and `emit` as passes --------*- C++ -*-===//
//
// ds-lower-to-plan and ds-emit-plan (PlanPasses.td) run plan lowering and
// emission inside the pass manager, after the IR phases, so the phase
// table builds every phase as passes and --mlir-print-ir-after-all shows
// them. The lowered plan is not IR: the two passes of one pipeline share it
// through a PlanResult, which the tool that built the pipeline reads
// afterwards (dsc's --report and -o).
//
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
  bool lowered = false;
  PlanModel plan;             ///< set by ds-lower-to-plan
  std::vector<uint8_t> bytes; ///< set by ds-emit-plan
};

/// The passes, sharing `result` (each makes its own when it is null, as
/// when the registry creates them one by one).
std::unique_ptr<mlir::Pass>
createLowerToPlanPass(const DsLowerToPlanOptions &options,
                      std::shared_ptr<PlanResult> result);
std::unique_ptr<mlir::Pass>
createEmitPlanPass(const DsEmitPlanOptions &options,
                   std::shared_ptr<PlanResult> result);

/// Registers both with the pass registry (ds-opt).
void registerPlanPasses();

} // namespace dsc

#endif // DSC_COMPILER_PLAN_PLANPASSES_H
