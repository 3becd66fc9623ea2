//===- VocabParallel.cpp - cross-entropy on vocabulary-cut logits ---------===//

#include "passes/shard/VocabParallel.h"

#include "dialects/dist/DistOps.h"
#include "dialects/ds/DsOps.h"

namespace mlir::ds::shard {

namespace {

/// `c` as a collective of the tensor-parallel group, waited for at once.
Value inTensorGroup(OpBuilder &b, Location loc, Operation *c) {
  c->setAttr(dist::kTensorGroupAttr, b.getUnitAttr());
  return b.create<dist::WaitOp>(loc, c->getResult(0)).getResult();
}

} // namespace

VocabParallelLoss::RowStats
VocabParallelLoss::statsOf(OpBuilder &b, Location loc, Value logits,
                           Value targets, int64_t ignoreIndex) {
  auto found = made.find({logits, targets});
  if (found != made.end() && found->second.ignoreIndex == ignoreIndex)
    return found->second;
  auto type = cast<RankedTensorType>(logits.getType());
  const int64_t classes = type.getRank() - 1;
  auto rowsType =
      RankedTensorType::get(type.getShape().drop_back(), type.getElementType());
  const int64_t rows = rowsType.getNumElements();
  auto flat = [&](ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, type.getElementType());
  };
  // Each rank's row maxima, all-gathered: [parts, rows], then their max.
  Value local = b.create<ReduceMaxOp>(
      loc, logits, b.getDenseI64ArrayAttr({classes}), UnitAttr());
  local = b.create<ReshapeOp>(loc, flat({rows}), local);
  Value all = inTensorGroup(
      b, loc,
      b.create<dist::AllGatherOp>(loc, flat({parts * rows}), local,
                                  b.getI64IntegerAttr(parts)));
  all = b.create<ReshapeOp>(loc, flat({parts, rows}), all);
  Value rowMax =
      b.create<ReduceMaxOp>(loc, all, b.getDenseI64ArrayAttr({0}), UnitAttr());
  rowMax = b.create<ReshapeOp>(loc, rowsType, rowMax);
  Value stats = b.create<CrossEntropyPartOp>(loc, logits, targets, rowMax,
                                             b.getI64IntegerAttr(ignoreIndex),
                                             b.getI64IntegerAttr(parts));
  stats = inTensorGroup(
      b, loc, b.create<dist::AllReduceOp>(loc, stats, b.getF64FloatAttr(1.0)));
  RowStats s{rowMax, stats, ignoreIndex};
  made[{logits, targets}] = s;
  return s;
}

Value VocabParallelLoss::rewrite(Operation *op) {
  OpBuilder b(op);
  Location loc = op->getLoc();
  Value result;
  if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
    RowStats s =
        statsOf(b, loc, ce.getLogits(), ce.getTargets(), ce.getIgnoreIndex());
    result = b.create<CrossEntropyPartLossOp>(loc, s.stats, ce.getTargets(),
                                              ce.getIgnoreIndexAttr());
  } else {
    auto grad = cast<CrossEntropyGradOp>(op);
    RowStats s = statsOf(b, loc, grad.getLogits(), grad.getTargets(),
                         grad.getIgnoreIndex());
    result = b.create<CrossEntropyPartGradOp>(
        loc, grad.getLogits().getType(), grad.getLogits(), grad.getTargets(),
        s.rowMax, s.stats, grad.getGrad(), grad.getIgnoreIndexAttr(),
        b.getI64IntegerAttr(parts));
  }
  // Attributes the loss carries for later phases stay with it.
  result.getDefiningOp()->setDiscardableAttrs(
      op->getDiscardableAttrDictionary());
  op->getResult(0).replaceAllUsesWith(result);
  return result;
}

} // namespace mlir::ds::shard
