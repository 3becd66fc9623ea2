//===- Functions.h - the module's functions by their plan names -*- C++ -*-===//
//
// The passes find the training step's functions by the names the plan
// gives them (runtime/plan/ProgramNames.h): @forward, @forward_eval,
// @micro_step, @apply.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PASSES_FUNCTIONS_H
#define DSC_PASSES_FUNCTIONS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"

#include <string_view>

namespace mlir::ds {

/// `func.func @name` in `module`, or null.
inline func::FuncOp lookupFunction(ModuleOp module, std::string_view name) {
  return module.lookupSymbol<func::FuncOp>(StringRef(name.data(), name.size()));
}

/// @forward, @forward_eval and @forward_sample_<T>, those the module has:
/// the graphs the passes before autodiff rewrite.
SmallVector<func::FuncOp, 2> forwardFunctions(ModuleOp module);

/// @eval and @sample_<T>, those the module has: the programs that run the
/// forward alone (ds-eval builds them), which read the parameters as
/// @micro_step's forward does.
SmallVector<func::FuncOp, 2> forwardOnlyPrograms(ModuleOp module);

/// Erases @forward_sample_<T> and @sample_<T>. The passes that cut the
/// layers (pipeline), the sequence (Ulysses) or the vocabulary (tensor
/// parallelism) over ranks call it: such plans sample with @eval, whose
/// logits the sampler knows how to gather.
void eraseSamplingFunctions(ModuleOp module);

/// Every function with a body but @forward: the programs phase `fused`
/// rewrites (@forward is the model as it came, kept for reference).
SmallVector<func::FuncOp> fusedFunctions(ModuleOp module);

} // namespace mlir::ds

#endif // DSC_PASSES_FUNCTIONS_H
