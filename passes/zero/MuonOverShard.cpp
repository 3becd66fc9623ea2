//===- MuonOverShard.cpp - Muon's update of a ZeRO group ------------------===//
//
// Muon needs each matrix whole, while ZeRO gives a rank a slice of a flat
// group of matrices. Each rank moves the momentum on its slice and the
// directions are all-gathered. The Newton-Schulz iterations are then
// divided among the ranks in one instruction stream: the group's matrices
// (per_head_muon: each head's block of rows) are stacked by shape, each
// stack padded with zero matrices to a multiple of the world size and cut
// along its batch dimension by dist.shard, so a rank iterates its part
// with batched GEMMs; the results are all-gathered and every rank applies
// its slice. A zero matrix iterates to zero, so the padding is harmless. A
// shape with one matrix is iterated by every rank: dividing it would add a
// collective and save nothing.
//
//===----------------------------------------------------------------------===//
#include "passes/zero/ZeroUtils.h"

#include "dialects/ds/DsUtils.h"
#include "passes/MuonIteration.h"

#include "llvm/ADT/MapVector.h"

#include <map>

namespace mlir::ds::zero {
namespace {

/// The matrices of one shape in a group: its members' ranges of the flat
/// direction (adjacent ones merged), each member `heads` matrices.
struct Stack {
  int64_t rows, cols;
  SmallVector<std::pair<int64_t, int64_t>> ranges; ///< offset, elements
  int64_t count = 0; ///< matrices, summed over the members' heads
};

RankedTensorType f32Type(OpBuilder &b, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, b.getF32Type());
}

/// `count` rows x cols matrices iterated and scaled by their aspect
/// factor; `x` is [count, rows, cols] (or rows x cols when count is 1).
Value orthogonalize(OpBuilder &b, Location loc, Value x, int64_t rows,
                    int64_t cols, int64_t steps) {
  Value out = buildNewtonSchulz(b, loc, x, steps, /*host=*/false);
  double factor = muonAspectFactor(rows, cols);
  if (factor == 1.0)
    return out;
  return b.create<MulOp>(loc, out, splat(b, loc, f32Type(b, {}), factor));
}

/// The stack's matrices cut from the flat `direction`, orthogonalized and
/// returned flat in member order: divided among the ranks when there are
/// several.
Value orthogonalizeStack(OpBuilder &b, Location loc, Value direction,
                         const Stack &s, int64_t steps, IntegerAttr ranks) {
  const int64_t matrix = s.rows * s.cols, world = ranks.getInt();
  const int64_t size =
      cast<RankedTensorType>(direction.getType()).getDimSize(0);
  SmallVector<Value> parts;
  for (auto [at, n] : s.ranges)
    parts.push_back(n == size ? direction
                              : b.create<SliceOp>(loc, direction,
                                                  ArrayRef<int64_t>{at},
                                                  ArrayRef<int64_t>{n})
                                    .getResult());
  Value all = parts.size() == 1 ? parts[0]
                                : b.create<ConcatOp>(loc, parts, 0).getResult();
  auto flat = [&](int64_t n) { return f32Type(b, {n * matrix}); };
  auto batch = [&](int64_t n) {
    return n == 1 ? f32Type(b, {s.rows, s.cols})
                  : f32Type(b, {n, s.rows, s.cols});
  };
  if (s.count == 1 || world == 1) {
    Value x = b.create<ReshapeOp>(loc, batch(s.count), all);
    x = orthogonalize(b, loc, x, s.rows, s.cols, steps);
    return b.create<ReshapeOp>(loc, flat(s.count), x);
  }
  const int64_t each = (s.count + world - 1) / world, padded = each * world;
  if (padded > s.count)
    all = b.create<PadOp>(loc, all, ArrayRef<int64_t>{0},
                          ArrayRef<int64_t>{(padded - s.count) * matrix});
  Value mine = b.create<dist::ShardOp>(loc, flat(each), all, ranks);
  Value x = orthogonalize(b, loc, b.create<ReshapeOp>(loc, batch(each), mine),
                          s.rows, s.cols, steps);
  Value gathered = b.create<dist::AllGatherOp>(
      loc, flat(padded), b.create<ReshapeOp>(loc, flat(each), x), ranks);
  Value done = b.create<dist::WaitOp>(loc, gathered);
  if (padded == s.count)
    return done;
  return b.create<SliceOp>(loc, done, ArrayRef<int64_t>{0},
                           ArrayRef<int64_t>{s.count * matrix});
}

/// The group's members stacked by the shape of their matrices, in order
/// of first appearance.
SmallVector<Stack> stacksOf(ArrayRef<Update> updates,
                            ArrayRef<RankedTensorType> types) {
  llvm::MapVector<std::pair<int64_t, int64_t>, Stack> byShape;
  int64_t at = 0;
  for (auto [i, t] : llvm::enumerate(types)) {
    const int64_t heads =
        cast<MuonOp>(Update(updates[i]).getOperation()).getHeads();
    const int64_t n = t.getNumElements(), rows = t.getDimSize(0) / heads;
    Stack &s = byShape[{rows, n / t.getDimSize(0)}];
    s.rows = rows;
    s.cols = n / t.getDimSize(0);
    if (!s.ranges.empty() &&
        s.ranges.back().first + s.ranges.back().second == at)
      s.ranges.back().second += n;
    else
      s.ranges.push_back({at, n});
    s.count += heads;
    at += n;
  }
  SmallVector<Stack> stacks;
  for (auto &entry : byShape)
    stacks.push_back(std::move(entry.second));
  return stacks;
}

} // namespace

ShardUpdate muonOverShard(OpBuilder &b, Location loc, ArrayRef<Update> updates,
                          ArrayRef<RankedTensorType> types, IntegerAttr ranks,
                          Value ps, Value gs, ValueRange states) {
  auto like = cast<MuonOp>(Update(updates.front()).getOperation());
  auto shard = cast<RankedTensorType>(states[0].getType());
  auto moved = b.create<MuonMomentumOp>(
      loc, TypeRange{shard, shard}, gs, states[0], like.getScale(),
      like.getMomentumAttr(), like.getNesterovAttr());
  const int64_t size = shard.getNumElements() * ranks.getInt();
  Value gathered = b.create<dist::AllGatherOp>(loc, f32Type(b, {size}),
                                               moved.getDirection(), ranks);
  Value direction = b.create<dist::WaitOp>(loc, gathered);
  // The orthogonalized direction of each range of members, by offset.
  std::map<int64_t, Value> ranges;
  for (const Stack &s : stacksOf(updates, types)) {
    Value x =
        orthogonalizeStack(b, loc, direction, s, like.getNsSteps(), ranks);
    int64_t in = 0;
    for (auto [at, n] : s.ranges) {
      ranges[at] = s.ranges.size() == 1
                       ? x
                       : b.create<SliceOp>(loc, x, ArrayRef<int64_t>{in},
                                           ArrayRef<int64_t>{n})
                             .getResult();
      in += n;
    }
  }
  SmallVector<Value> pieces;
  for (auto &entry : ranges)
    pieces.push_back(entry.second);
  Value ortho = pieces.size() == 1
                    ? pieces[0]
                    : b.create<ConcatOp>(loc, pieces, 0).getResult();
  const int64_t used = cast<RankedTensorType>(ortho.getType()).getDimSize(0);
  if (used < size)
    ortho = b.create<PadOp>(loc, ortho, ArrayRef<int64_t>{0},
                            ArrayRef<int64_t>{size - used});
  Value mine = b.create<dist::ShardOp>(loc, shard, ortho, ranks);
  Value newParam =
      b.create<MuonApplyOp>(loc, shard, ps, mine, like.getLr(), like.getScale(),
                            like.getWeightDecayAttr(), b.getF64FloatAttr(1.0));
  return {newParam, {moved.getNewBuf()}};
}

} // namespace mlir::ds::zero
