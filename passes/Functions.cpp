//===- Functions.cpp - the module's functions by their plan names ---------===//
#include "passes/Functions.h"

#include "runtime/plan/ProgramNames.h"

using namespace mlir;

SmallVector<func::FuncOp, 2> mlir::ds::forwardFunctions(ModuleOp module) {
  SmallVector<func::FuncOp, 2> out;
  for (std::string_view name :
       {dsc::plan::kForwardFunction, dsc::plan::kForwardEvalFunction})
    if (func::FuncOp f = lookupFunction(module, name))
      out.push_back(f);
  return out;
}

SmallVector<func::FuncOp> mlir::ds::fusedFunctions(ModuleOp module) {
  SmallVector<func::FuncOp> out;
  for (auto f : module.getOps<func::FuncOp>())
    if (!f.isExternal() &&
        f.getSymName() != StringRef(dsc::plan::kForwardFunction))
      out.push_back(f);
  return out;
}
