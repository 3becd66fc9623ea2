//===- Widen.h - a ds module in float64, for exact gradient checks -*- C++
//-*-===//
#ifndef DSC_COMPILER_INTERPRETER_WIDEN_H
#define DSC_COMPILER_INTERPRETER_WIDEN_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

namespace dsc {

/// Rewrites every f32 tensor of `module` to f64: variables, function
/// signatures and block arguments, op results and constant values. @forward
/// then casts its loss back to f32, as the input contract requires. Fails
/// when the module has no @forward or no longer verifies.
mlir::LogicalResult widenToF64(mlir::ModuleOp module);

} // namespace dsc

#endif // DSC_COMPILER_INTERPRETER_WIDEN_H
