//===- Passes.h - dsc passes ------------------------------------*- C++ -*-===//
#ifndef DSC_PASSES_PASSES_H
#define DSC_PASSES_PASSES_H

#include "dialects/dist/DistOps.h"
#include "dialects/ds/DsOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::ds {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

} // namespace mlir::ds

#endif // DSC_PASSES_PASSES_H
