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
  for (auto f : module.getOps<func::FuncOp>())
    if (dsc::plan::isSampleForward(f.getSymName()))
      out.push_back(f);
  return out;
}

SmallVector<func::FuncOp, 2> mlir::ds::forwardOnlyPrograms(ModuleOp module) {
  SmallVector<func::FuncOp, 2> out;
  for (auto f : module.getOps<func::FuncOp>())
    if (f.getSymName() == StringRef(dsc::plan::kEvalProgram) ||
        dsc::plan::isSampleProgram(f.getSymName()))
      out.push_back(f);
  return out;
}

void mlir::ds::eraseSamplingFunctions(ModuleOp module) {
  SmallVector<func::FuncOp> sampling;
  for (auto f : module.getOps<func::FuncOp>())
    if (dsc::plan::isSampleProgram(f.getSymName()) ||
        dsc::plan::isSampleForward(f.getSymName()))
      sampling.push_back(f);
  for (func::FuncOp f : sampling)
    f.erase();
}

SmallVector<func::FuncOp> mlir::ds::fusedFunctions(ModuleOp module) {
  SmallVector<func::FuncOp> out;
  for (auto f : module.getOps<func::FuncOp>())
    if (!f.isExternal() &&
        f.getSymName() != StringRef(dsc::plan::kForwardFunction))
      out.push_back(f);
  return out;
}
