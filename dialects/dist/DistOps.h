//===- DistOps.h - the dist dialect -----------------------------*- C++ -*-===//
#ifndef DSC_DIALECTS_DIST_DISTOPS_H
#define DSC_DIALECTS_DIST_DISTOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/dist/DistDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/dist/DistOps.h.inc"

#endif // DSC_DIALECTS_DIST_DISTOPS_H
