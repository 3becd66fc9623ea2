//===- ShardRules.h - how each ds op runs on tensor-parallel shards -*- C++
//-*-===//
//
// Phase `shard` (ShardPass.cpp) lays each value of the training step out
// over the tensor-parallel group: whole on every rank (replicated), cut
// along one dimension (split), a partial sum whose sum over the group is
// the value (partial), or, with sequence parallelism, cut along its tokens
// (tokens: an activation [B, S, ...] cut into contiguous parts). These
// rules say, for one op and the layouts of its operands, the layouts it
// needs them in and the layouts of its results. The pass makes each
// operand what its op needs: a partial one whole by an all-reduce or cut
// along its tokens by a reduce-scatter, a token-cut one whole by an
// all-gather, a whole one token-cut by taking the rank's part. An op
// without a rule of its own computes replicated results from replicated
// operands, and refuses anything else.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PASSES_SHARD_SHARDRULES_H
#define DSC_PASSES_SHARD_SHARDRULES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace mlir::ds::shard {

/// A value's layout over the tensor-parallel group.
struct Sharding {
  enum Kind { Replicated, Split, Partial, Tokens };
  Kind kind = Replicated;
  /// Split: the dimension cut into the group's parts. With `blocks` > 1 the
  /// dimension is that many equal blocks and each is cut (GPT-2's fused
  /// query, key and value projection), so a rank holds its part of each.
  int64_t dim = -1;
  int64_t blocks = 1;

  static Sharding replicated() { return {}; }
  static Sharding split(int64_t dim, int64_t blocks = 1) {
    return {Split, dim, blocks};
  }
  static Sharding partial() { return {Partial, -1, 1}; }
  /// Sequence parallelism: cut along dimension `dim` of an activation
  /// [B, S, ...] (B, or S when B is 1), every dimension before it of size
  /// 1 or cut whole, so that a rank's part is one contiguous run of
  /// elements: what a flat reduce-scatter leaves and an all-gather joins.
  static Sharding tokens(int64_t dim) { return {Tokens, dim, 1}; }
  bool isReplicated() const { return kind == Replicated; }
  bool isSplit() const { return kind == Split; }
  bool isPartial() const { return kind == Partial; }
  bool isTokens() const { return kind == Tokens; }
  bool operator==(const Sharding &o) const {
    return kind == o.kind && dim == o.dim && blocks == o.blocks;
  }
  bool operator!=(const Sharding &o) const { return !(*this == o); }
  /// "replicated", "split(2)", "split(0, 3 blocks)", "partial", "tokens(0)".
  std::string str() const;
};

/// What an op does on shards: the layout each operand must have and the
/// layout of each result.
struct OpLayout {
  SmallVector<Sharding> operands;
  SmallVector<Sharding> results;
};

/// What the rules know besides the operands' layouts.
struct RuleContext {
  int64_t parts = 1; ///< ranks in the tensor-parallel group
  /// Sequence parallelism: activations [batch, seq, ...] outside the cut
  /// layers are cut along their tokens (0 x 0: none in this function).
  bool sequenceParallel = false;
  int64_t batch = 0, seq = 0;
  /// Vocabulary parallelism: the indices of lookups in a table cut along
  /// its rows, so that their ds.embedding_grad makes the table's part.
  llvm::DenseSet<Value> vocabularyLookups;
};

/// The elementwise ops (numpy broadcasting, one result).
bool isElementwise(Operation *op);

/// The dimension along which sequence parallelism cuts a value of type
/// `t`: 0 for an activation [B, S, ...] whose B the group divides, 1 when
/// B is 1 and the group divides S, -1 for anything else.
int64_t tokenDim(RankedTensorType t, const RuleContext &ctx);

/// The rule for `op` given its operands' layouts (`in`, one per operand);
/// failure with `why` (one phrase) when the op cannot run on them.
FailureOr<OpLayout> layoutOf(Operation *op, ArrayRef<Sharding> in,
                             const RuleContext &ctx, std::string &why);

/// The type one rank holds of a value of type `t` laid out as `s`.
RankedTensorType localType(RankedTensorType t, const Sharding &s,
                           int64_t parts);

} // namespace mlir::ds::shard

#endif // DSC_PASSES_SHARD_SHARDRULES_H
