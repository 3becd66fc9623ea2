//===- ShardRules.h - how each ds op runs on tensor-parallel shards -*- C++
//-*-===//
//
// Phase `shard` (ShardPass.cpp) lays each value of the training step out
// over the tensor-parallel group: whole on every rank (replicated), cut
// along one dimension (split), or a partial sum whose sum over the group is
// the value (partial). These rules say, for one op and the layouts of its
// operands, the layouts it needs them in and the layouts of its results;
// a partial operand that must be whole gets an all-reduce (the only
// collective the rules ask for). An op without a rule of its own computes
// replicated results from replicated operands, and refuses anything else.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PASSES_SHARD_SHARDRULES_H
#define DSC_PASSES_SHARD_SHARDRULES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace mlir::ds::shard {

/// A value's layout over the tensor-parallel group.
struct Sharding {
  enum Kind { Replicated, Split, Partial };
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
  bool isReplicated() const { return kind == Replicated; }
  bool isSplit() const { return kind == Split; }
  bool isPartial() const { return kind == Partial; }
  bool operator==(const Sharding &o) const {
    return kind == o.kind && dim == o.dim && blocks == o.blocks;
  }
  bool operator!=(const Sharding &o) const { return !(*this == o); }
  /// "replicated", "split(2)", "split(0, 3 blocks)", "partial".
  std::string str() const;
};

/// What an op does on shards: the layout each operand must have and the
/// layout of each result.
struct OpLayout {
  SmallVector<Sharding> operands;
  SmallVector<Sharding> results;
};

/// The rule for `op` given its operands' layouts (`in`, one per operand)
/// over a group of `parts` ranks; failure with `why` (one phrase) when the
/// op cannot run on them.
FailureOr<OpLayout> layoutOf(Operation *op, ArrayRef<Sharding> in,
                             int64_t parts, std::string &why);

/// The type one rank holds of a value of type `t` laid out as `s`.
RankedTensorType localType(RankedTensorType t, const Sharding &s,
                           int64_t parts);

} // namespace mlir::ds::shard

#endif // DSC_PASSES_SHARD_SHARDRULES_H
