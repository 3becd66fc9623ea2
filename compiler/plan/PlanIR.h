//===- PlanIR.h - what the plan passes ask of the plan dialect --*- C++ -*-===//
//
// Small queries over the module @plan that several plan passes share.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_COMPILER_PLAN_PLANIR_H
#define DSC_COMPILER_PLAN_PLANIR_H

#include "dialects/plan/PlanOps.h"

#include "mlir/IR/SymbolTable.h"

namespace dsc {

/// The plan.storage the buffer `v` views (plan.buffer, plan.constant), or
/// null.
inline mlir::plan::StorageOp storageOf(mlir::Value v,
                                       mlir::SymbolTable &symbols) {
  mlir::FlatSymbolRefAttr ref;
  if (auto b = v.getDefiningOp<mlir::plan::BufferOp>())
    ref = b.getStorageAttr();
  else if (auto c = v.getDefiningOp<mlir::plan::ConstantOp>())
    ref = c.getStorageAttr();
  return ref ? symbols.lookup<mlir::plan::StorageOp>(ref.getValue())
             : mlir::plan::StorageOp();
}

} // namespace dsc

#endif // DSC_COMPILER_PLAN_PLANIR_H
