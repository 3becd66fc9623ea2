//===- Pipeline.h - phase pipeline's pieces -------------------*- C++ -*-===//
//
// ds-pipeline (PipelineSchedule.cpp) writes each stage's step; the
// optimizer step of each stage (PipelineApply.cpp) follows from which
// stages hold which variables.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PASSES_PIPELINE_PIPELINE_H
#define DSC_PASSES_PIPELINE_PIPELINE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"

#include <cstdint>

namespace mlir::ds::pipeline {

/// A set of pipeline stages, a bit each.
using StageSet = uint64_t;

/// The stages that read or write each variable in their step.
using Holders = llvm::StringMap<StageSet>;

/// Writes @apply_s after `apply` for each of `stages` stages and erases
/// `apply`: stage s updates the parameters it holds; a parameter held by
/// several stages (a tied one) first has its gradient summed over them;
/// the global gradient norm sums each stage's part over all stages, each
/// tied parameter's counted once. Failure after an error at the op that
/// mixes stages some other way.
LogicalResult splitApply(func::FuncOp apply, int64_t stages, Holders holders);

} // namespace mlir::ds::pipeline

#endif // DSC_PASSES_PIPELINE_PIPELINE_H
