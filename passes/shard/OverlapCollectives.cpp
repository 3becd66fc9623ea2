//===- OverlapCollectives.cpp - group collectives under compute ----------===//
//
// Phase `shard`, after ds-shard and ds-ulysses have placed their
// collectives (each started where it is needed and waited for at once):
// every tensor- or sequence-group collective is started as soon as its
// operand exists and waited for only when its result is needed, so the
// compute between the two runs under it (the comm stream and the compute
// stream meet at the wait). The data group's collectives are ds-zero's,
// which schedules its own.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/dist/DistOps.h"
#include "dialects/ds/DsOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSOVERLAPCOLLECTIVES
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

bool isGroupCollective(Operation *op) {
  return op->hasAttr(dist::kTensorGroupAttr) &&
         isa<dist::AllReduceOp, dist::ReduceScatterOp, dist::AllGatherOp,
             dist::AllToAllOp>(op);
}

/// Ops that only lay a value out (no effects, cheap beside a GEMM): the
/// reshapes and transposes that prepare an operand for a flat collective
/// or put its result back, and the adds of a partial sum.
bool isLayoutOp(Operation *op) { return isa<ReshapeOp, TransposeOp>(op); }

void moveAfterOperands(Operation *op) {
  Operation *last = nullptr;
  for (Value v : op->getOperands())
    if (Operation *def = v.getDefiningOp();
        def && def->getBlock() == op->getBlock() &&
        (!last || last->isBeforeInBlock(def)))
      last = def;
  if (last && last->isBeforeInBlock(op))
    op->moveAfter(last);
}

/// Moves a partial sum's add, or a layout op, and those it reads, up to
/// just after their operands. Autodiff sums a layer's input-gradient parts
/// (q, k, v; gate, up) after it has made the weight gradients, so without
/// this the sum, and the collective that reads it, came after work that
/// does not need it.
void hoist(Operation *op) {
  if (!isa<AddOp>(op) && !isLayoutOp(op))
    return;
  for (Value v : op->getOperands())
    if (Operation *def = v.getDefiningOp();
        def && def->getBlock() == op->getBlock())
      hoist(def);
  moveAfterOperands(op);
}

/// The wait, and the chain of layout ops that only it feeds, moved down to
/// just before the first op that reads the chain's end.
void sinkWait(dist::WaitOp wait) {
  SmallVector<Operation *> chain{wait};
  while (chain.back()->getNumResults() == 1 &&
         chain.back()->getResult(0).hasOneUse()) {
    Operation *next = *chain.back()->getResult(0).getUsers().begin();
    if (!isLayoutOp(next) || next->getBlock() != wait->getBlock())
      break;
    chain.push_back(next);
  }
  Operation *first = nullptr;
  for (Operation *user : chain.back()->getResult(0).getUsers()) {
    Operation *inBlock = wait->getBlock()->findAncestorOpInBlock(*user);
    if (inBlock && (!first || inBlock->isBeforeInBlock(first)))
      first = inBlock;
  }
  if (!first)
    return;
  for (Operation *op : chain)
    op->moveBefore(first);
}

struct OverlapCollectivesPass
    : ds::impl::DsOverlapCollectivesBase<OverlapCollectivesPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      SmallVector<Operation *> collectives;
      func.walk([&](Operation *op) {
        if (isGroupCollective(op))
          collectives.push_back(op);
      });
      for (Operation *c : collectives) {
        if (Operation *def = c->getOperand(0).getDefiningOp())
          hoist(def);
        moveAfterOperands(c);
      }
      for (Operation *c : collectives)
        for (Operation *user : c->getResult(0).getUsers())
          if (auto wait = dyn_cast<dist::WaitOp>(user))
            sinkWait(wait);
    }
  }
};

} // namespace
