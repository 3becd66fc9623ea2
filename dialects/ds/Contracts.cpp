//===- Contracts.cpp - finding and checking the passes' marks -------------===//

#include "dialects/ds/Contracts.h"

namespace mlir::ds {

FailureOr<SmallVector<GradAccumulation>>
findGradAccumulations(func::FuncOp func, StringRef pass) {
  SmallVector<GradAccumulation> out;
  for (Operation &op : func.front()) {
    auto store = dyn_cast<StoreOp>(op);
    if (!store || !store->hasAttr(kGradAccumulationAttr))
      continue;
    auto add = store.getValue().getDefiningOp<AddOp>();
    auto load = add ? add.getLhs().getDefiningOp<LoadOp>() : LoadOp();
    if (!load || load.getName() != store.getName() || !add->hasOneUse())
      return store.emitError(pass)
             << ": the gradient accumulation into @" << store.getName()
             << " is not ds.store(ds.add(ds.load @" << store.getName()
             << ", %d)) with the sum used once (the " << kGradAccumulationAttr
             << " contract)";
    out.push_back({load, add, store, add.getRhs()});
  }
  return out;
}

FailureOr<SqrtOp> findGlobalGradNorm(func::FuncOp apply, StringRef pass) {
  SqrtOp found;
  WalkResult r = apply.walk([&](SqrtOp op) {
    if (!op->hasAttr(kGlobalGradNormAttr))
      return WalkResult::advance();
    if (found) {
      op.emitError(pass) << ": two ops are marked " << kGlobalGradNormAttr;
      return WalkResult::interrupt();
    }
    found = op;
    return WalkResult::advance();
  });
  if (r.wasInterrupted())
    return failure();
  if (!found)
    return apply.emitError(pass)
           << ": @apply has no global gradient norm (a ds.sqrt marked "
           << kGlobalGradNormAttr << "); run ds-adamw first";
  return found;
}

FailureOr<ConstantOp> findLossSeed(func::FuncOp func, StringRef pass) {
  ConstantOp found;
  for (Operation &op : func.front()) {
    auto c = dyn_cast<ConstantOp>(op);
    if (!c || !c->hasAttr(kLossSeedAttr))
      continue;
    if (found)
      return c.emitError(pass)
             << ": two constants are marked " << kLossSeedAttr;
    found = c;
  }
  if (!found)
    return func.emitError(pass)
           << ": @" << func.getSymName() << " has no loss seed (a ds.constant "
           << "marked " << kLossSeedAttr << "); run ds-autodiff first";
  return found;
}

} // namespace mlir::ds
