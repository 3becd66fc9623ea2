//===- DsOps.h - ds dialect -------------------------------------*- C++ -*-===//
#ifndef DSC_DIALECTS_DS_DSOPS_H
#define DSC_DIALECTS_DS_DSOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/ds/DsDialect.h.inc"
#include "dialects/ds/DsEnums.h.inc"

namespace mlir::ds {
/// The trait behind KernelOpInterface::isInPlaceSafe (DS_InPlaceSafe).
template <typename ConcreteType>
class InPlaceSafe : public OpTrait::TraitBase<ConcreteType, InPlaceSafe> {};
/// One FLOP per element of the op's first result (0 without results).
double elementwiseFlops(Operation *op);
/// OptimizerUpdateOpInterface's operand layout (param, grad, states...,
/// lr, step, scale; results param', states'), checked on each update.
LogicalResult verifyOptimizerUpdate(Operation *op);
/// `op` over other tensors with the same scalars and attributes.
Operation *cloneUpdateOver(Operation *op, OpBuilder &b, Location loc,
                           Value param, Value grad, ValueRange states);
} // namespace mlir::ds

#include "dialects/ds/DsInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/ds/DsOps.h.inc"

#endif // DSC_DIALECTS_DS_DSOPS_H
