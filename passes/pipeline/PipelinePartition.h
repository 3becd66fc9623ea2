//===- PipelinePartition.h - which blocks each stage runs -------*- C++ -*-===//
//
// ds-pipeline-cut's choice of contiguous runs of transformer blocks, one
// run a stage, from a cost per block. The ops before the first block (the
// embeddings) always run on stage 0 and those after the last (the head
// and the loss) on the last stage, so they weigh on those stages' runs.
//   uniform     equal numbers of blocks, the first stages one more when
//               they do not divide (the cost is not read)
//   parameters  DeepSpeed's partition_method: equal parameter elements
//   balanced    dsc's: equal predicted time (each forward op at
//               max(FLOPs, bytes moved x the machine's FLOPs per byte),
//               which the backward's cost follows), no stage's predicted
//               memory above a budget
// Both weighted methods minimise the largest stage's weight exactly (a
// dynamic program over the blocks), the uniform split among equals.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PASSES_PIPELINE_PIPELINEPARTITION_H
#define DSC_PASSES_PIPELINE_PIPELINEPARTITION_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace mlir::ds::pipeline {

/// A piece of the forward: the ops before the first block, one block, or
/// the ops after the last.
struct PartitionUnit {
  double time = 0;         ///< sum over its ops of max(FLOPs, bytes x ratio)
  int64_t params = 0;      ///< elements of the parameters its ops read
  int64_t activations = 0; ///< bytes its ops produce for one micro-batch
};

struct PartitionLimits {
  /// Micro-batches a stage holds in flight: stage s of P keeps
  /// min(M, P - s) under 1F1B and all M under GPipe.
  int64_t microBatches = 1;
  bool gpipe = false;
  /// The largest a stage's predicted memory may be (0: no limit): 16 bytes
  /// a parameter (the value, its gradient, Adam's two moments in fp32, or
  /// a 16-bit copy, its gradient and fp32 master and moments) plus its
  /// in-flight micro-batches' activations.
  uint64_t stageMemory = 0;
};

/// The stage of each block, for `units` = [before the blocks, block 0,
/// ..., block n - 1, after the blocks] cut into `stages` runs by
/// `method`. Empty, and one line in `error`, when no cut fits the limits.
llvm::SmallVector<int64_t> partitionBlocks(llvm::ArrayRef<PartitionUnit> units,
                                           int64_t stages,
                                           llvm::StringRef method,
                                           const PartitionLimits &limits,
                                           std::string &error);

} // namespace mlir::ds::pipeline

#endif // DSC_PASSES_PIPELINE_PIPELINEPARTITION_H
