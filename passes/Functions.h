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

/// @forward and @forward_eval, those the module has: the graphs the
/// passes before autodiff rewrite.
SmallVector<func::FuncOp, 2> forwardFunctions(ModuleOp module);

/// Every function with a body but @forward: the programs phase `fused`
/// rewrites (@forward is the model as it came, kept for reference).
SmallVector<func::FuncOp> fusedFunctions(ModuleOp module);

} // namespace mlir::ds

#endif // DSC_PASSES_FUNCTIONS_H
