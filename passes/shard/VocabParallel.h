//===- VocabParallel.h - cross-entropy on logits cut along the vocabulary -===//
//
// Megatron-LM's vocabulary-parallel cross-entropy, written by phase shard
// where the LM head's logits are cut along the vocabulary: each rank holds
// [..., V / T] of [..., V] and the loss never gathers them. The rows' maxima
// over the whole vocabulary (each rank's row maxima all-gathered, then their
// maximum), one rank's statistics per row (ds.cross_entropy_part: the sum
// of e^(x - max) over its columns, the target's logit where it holds the
// target) summed by one all-reduce of 2 x rows floats, and from those the
// loss (ds.cross_entropy_part_loss) and the gradient of the rank's logits
// (ds.cross_entropy_part_grad). The statistics of a forward loss are reused
// by the gradient of the same logits.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PASSES_SHARD_VOCABPARALLEL_H
#define DSC_PASSES_SHARD_VOCABPARALLEL_H

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir::ds::shard {

/// Rewrites the cross-entropy losses and gradients of one function whose
/// logits (already one rank's types) are cut along the vocabulary over
/// `parts` ranks.
class VocabParallelLoss {
public:
  explicit VocabParallelLoss(int64_t parts) : parts(parts) {}

  /// Replaces the uses of `op` (a ds.cross_entropy or ds.cross_entropy_grad
  /// on cut logits) by the vocabulary-parallel ops, built right before it,
  /// and returns their result. `op` is left for the caller to erase (the
  /// statistics are keyed by values its erasure could free).
  Value rewrite(Operation *op);

private:
  struct RowStats {
    Value rowMax, stats; ///< whole rows' maxima; stats summed over the group
    int64_t ignoreIndex;
  };
  /// The statistics of `logits` against `targets`: the forward loss's, or
  /// new ones built at `b`'s point.
  RowStats statsOf(OpBuilder &b, Location loc, Value logits, Value targets,
                   int64_t ignoreIndex);

  int64_t parts;
  DenseMap<std::pair<Value, Value>, RowStats> made;
};

} // namespace mlir::ds::shard

#endif // DSC_PASSES_SHARD_VOCABPARALLEL_H
