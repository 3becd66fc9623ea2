//===- MuonIteration.h - Muon's Newton-Schulz iteration -------*- C++ -*-===//
//
// Built by ds-expand-updates for each ds.muon and by ds-zero for a sharded
// group of Muon matrices (ZeroUtils.cpp), so both write the same ops.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PASSES_MUONITERATION_H
#define DSC_PASSES_MUONITERATION_H

#include "mlir/IR/Builders.h"

namespace mlir::ds {

/// The standard Newton-Schulz iteration (DeepSpeed's
/// zeropower_via_newtonschulz5) on `u`, an f32 rows x cols matrix or a
/// batch of them ([..., rows, cols], each iterated apart from the others):
/// u / (|u|_F + 1e-7), then `steps` times A = X X^T, X = a X + (b A + c A
/// A) X; a tall matrix iterates on X^T X and multiplies on the right (B is
/// symmetric). Every op built is marked dist.host when `host`.
Value buildNewtonSchulz(OpBuilder &b, Location loc, Value u, int64_t steps,
                        bool host);

/// DeepSpeed's _aspect_ratio_scale, sqrt(max(1, rows / cols)).
double muonAspectFactor(int64_t rows, int64_t cols);

} // namespace mlir::ds

#endif // DSC_PASSES_MUONITERATION_H
