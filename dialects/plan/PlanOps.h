//===- PlanOps.h - the plan dialect -----------------------------*- C++ -*-===//
//
// Kernel calls over views of storage placed in arenas (PlanOps.td): what
// ds-lower-to-plan writes, plan-place places and ds-emit-plan serializes
// (docs/phases.md).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_DIALECTS_PLAN_PLANOPS_H
#define DSC_DIALECTS_PLAN_PLANOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/plan/PlanDialect.h.inc"
#include "dialects/plan/PlanEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/plan/PlanAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/plan/PlanTypes.h.inc"

#define GET_OP_CLASSES
#include "dialects/plan/PlanOps.h.inc"

#endif // DSC_DIALECTS_PLAN_PLANOPS_H
