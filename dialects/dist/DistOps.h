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

#include <optional>

#include "dialects/dist/DistDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/dist/DistOps.h.inc"

namespace mlir::dist {

/// The dialect's discardable attributes (DistOps.td says who sets and who
/// reads each), by name.
constexpr llvm::StringLiteral kHostAttr =
    DistDialect::HostAttrHelper::getNameStr();
constexpr llvm::StringLiteral kActivationAttr =
    DistDialect::ActivationAttrHelper::getNameStr();
constexpr llvm::StringLiteral kWorldSizeAttr =
    DistDialect::WorldSizeAttrHelper::getNameStr();
constexpr llvm::StringLiteral kTensorParallelAttr =
    DistDialect::TensorParallelAttrHelper::getNameStr();
constexpr llvm::StringLiteral kTensorSplitAttr =
    DistDialect::TensorSplitAttrHelper::getNameStr();
constexpr llvm::StringLiteral kTensorGroupAttr =
    DistDialect::TensorGroupAttrHelper::getNameStr();
constexpr llvm::StringLiteral kSequenceParallelAttr =
    DistDialect::SequenceParallelAttrHelper::getNameStr();
constexpr llvm::StringLiteral kPipelineStagesAttr =
    DistDialect::PipelineStagesAttrHelper::getNameStr();
constexpr llvm::StringLiteral kVirtualStagesAttr =
    DistDialect::VirtualStagesAttrHelper::getNameStr();
constexpr llvm::StringLiteral kStageAttr =
    DistDialect::StageAttrHelper::getNameStr();
constexpr llvm::StringLiteral kPipelineGroupAttr =
    DistDialect::PipelineGroupAttrHelper::getNameStr();

/// Where an op of a pipeline stage's program sits in its schedule: the
/// micro-batch and the part of it ('F' forward, 'B' backward or its input
/// gradients, 'W' ZB-H1's weight gradients). ds-pipeline tags every op it
/// emits by its location (a FusedLoc's metadata, so the name the plan and
/// the FLOPs profile read stays the op's own and rewrites that keep an op's
/// location keep the tag); the plan carries it per instruction and
/// dsrun --trace per event, from which the schedule's timeline is drawn.
struct ScheduleTag {
  int64_t microBatch = -1;
  char part = 0;
};
Location withScheduleTag(Location loc, ScheduleTag tag);
/// The tag `loc` carries (searched through nested FusedLocs); none for an
/// op no schedule placed.
std::optional<ScheduleTag> scheduleTagOf(Location loc);

/// Whether ds-offload placed `op` (a ds.variable, or an op that runs) in
/// host memory.
inline bool isOnHost(Operation *op) { return op->hasAttr(kHostAttr); }

} // namespace mlir::dist

#endif // DSC_DIALECTS_DIST_DISTOPS_H
