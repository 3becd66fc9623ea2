//===- RematPass.h - ds-remat with the pipeline's cost model ----*- C++ -*-===//
//
// Policy `auto` chooses by what the rest of the pipeline will make of each
// candidate: the activation peak the planner places and the FLOPs the
// backward recomputes. The pass cannot build that pipeline itself (it lives
// above the passes, in compiler/), so the pipeline hands it an evaluator.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PASSES_REMAT_REMATPASS_H
#define DSC_PASSES_REMAT_REMATPASS_H

#include "passes/Passes.h"

#include <cstdint>
#include <functional>
#include <memory>

namespace mlir::ds {

/// What a remat candidate costs once lowered.
struct RematCost {
  uint64_t activationPeak = 0; ///< bytes of the activations arena
  double recomputedFlops = 0;  ///< per micro-step
};

/// Runs the phases after `remat` on a module (a throwaway clone) and
/// measures it; failure when they fail.
using RematEvaluator = std::function<FailureOr<RematCost>(ModuleOp)>;

/// ds-remat; `auto` needs `evaluate` (without one it is an error).
std::unique_ptr<Pass> createDsRemat(const DsRematOptions &options,
                                    RematEvaluator evaluate);

} // namespace mlir::ds

#endif // DSC_PASSES_REMAT_REMATPASS_H
