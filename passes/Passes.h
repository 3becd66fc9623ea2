//===- Passes.h - dsc passes ------------------------------------*- C++ -*-===//
#ifndef DSC_PASSES_PASSES_H
#define DSC_PASSES_PASSES_H

#include "dialects/dist/DistOps.h"
#include "dialects/ds/DsOps.h"
// The option defaults of Passes.td.
#include "passes/remat/RematPolicyOption.h"
#include "passes/zero/ZeroDefaults.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/Pass.h"

namespace mlir::ds {

/// ds-precision's 16-bit type.
enum class LowPrecision { bf16, f16 };

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// ds-precision's options for training in `dtype`: whether the loss is
/// scaled follows from the dtype, decided here only.
DsPrecisionOptions precisionOptionsFor(LowPrecision dtype);

/// The reverse-mode rules (VJPOpInterface) of the collectives ds-ulysses
/// puts into @forward: dist.all_to_all and dist.wait.
void registerDistGradients(DialectRegistry &registry);

} // namespace mlir::ds

#endif // DSC_PASSES_PASSES_H
