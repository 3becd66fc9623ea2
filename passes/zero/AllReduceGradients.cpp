//===- AllReduceGradients.cpp - ZeRO stages 0-1: buckets all-reduced
//--------===//
//
// Autodiff leaves each micro-step's gradient accumulations as
//   %acc = ds.load @p.grad ; %s = ds.add %acc, %d ; ds.store %s, @p.grad
// (the ds.grad_accumulation contract). The %d are bucketed in the order
// they are completed; each bucket is all-reduced (summed; ds-autodiff
// divided the seed by the world size) right after its last gradient, and
// the accumulations are rewritten to add the averaged gradients after a
// dist.wait placed once the next bucket's all-reduce has started (the last
// bucket's at the end of the micro-step), so communication runs under the
// rest of the backward and at most two buckets' results are live. With
// gradient accumulation the reduction moves to @micro_step_sync (ZeroPass.cpp
// makes it), which reduces the accumulated sums acc + d and stores them.
//
//===----------------------------------------------------------------------===//

#include "passes/zero/ZeroUtils.h"

#include "dialects/ds/DsUtils.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::ds::zero {

/// Stages 0-1: all-reduces each bucket of `func`'s gradients right after
/// its last one. With `accumulated` (the micro-step that ends an
/// accumulation window) the sums acc + d are reduced and stored;
/// otherwise each micro-step's d is, and added to acc after the wait.
LogicalResult allReduceGradients(func::FuncOp func, const Options &opts,
                                 bool accumulated) {
  FailureOr<SmallVector<Accumulation>> found = findAccumulations(func);
  if (failed(found))
    return failure();
  SmallVector<Accumulation> &accs = *found;
  auto ret = cast<func::ReturnOp>(func.front().getTerminator());
  OpBuilder b(func.getContext());
  const double scale = 1.0; // the seed already divided by worldSize

  SmallVector<SmallVector<Accumulation>> all = buckets(accs, opts);
  SmallVector<Operation *> reductions;
  SmallVector<SmallVector<int64_t>> sizesOf;
  for (SmallVector<Accumulation> &bucket : all) {

    // Start the all-reduce right after the bucket's last gradient.
    Value last = bucket.back().grad;
    if (Operation *def = last.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(&func.front());
    Location loc = NameLoc::get(b.getStringAttr("zero.bucket"),
                                bucket.back().store.getLoc());
    SmallVector<Value> flat;
    SmallVector<int64_t> sizes;
    for (Accumulation &a : bucket) {
      auto t = cast<RankedTensorType>(a.grad.getType());
      sizes.push_back(t.getNumElements());
      Value value = a.grad;
      if (accumulated) { // acc + d, computed here
        for (Operation *op : {a.load.getOperation(), a.add.getOperation()}) {
          op->moveBefore(b.getInsertionBlock(), b.getInsertionPoint());
          b.setInsertionPointAfter(op);
        }
        value = a.add;
      }
      flat.push_back(b.create<ReshapeOp>(
          loc, RankedTensorType::get({t.getNumElements()}, t.getElementType()),
          value));
    }
    Value packed = flat.size() == 1
                       ? flat[0]
                       : b.create<ConcatOp>(loc, flat, 0).getResult();
    reductions.push_back(
        b.create<dist::AllReduceOp>(loc, packed, b.getF64FloatAttr(scale)));
    sizesOf.push_back(sizes);
  }

  // Wait and accumulate once the next bucket's all-reduce has started.
  for (auto [bucket, reduced, sizes, after] :
       llvm::zip(all, reductions, sizesOf, waitPoints(reductions))) {
    if (after)
      b.setInsertionPointAfter(after);
    else
      b.setInsertionPoint(ret);
    Location loc = reduced->getLoc();
    Value done = b.create<dist::WaitOp>(loc, reduced->getResult(0));
    SmallVector<Value> parts;
    if (bucket.size() == 1)
      parts.push_back(done);
    else
      for (Value p : b.create<SplitOp>(loc, done, 0, sizes).getResults())
        parts.push_back(p);
    for (auto [a, part] : llvm::zip(bucket, parts)) {
      Value g = b.create<ReshapeOp>(loc, a.grad.getType(), part);
      if (accumulated) {
        a.store->moveBefore(b.getInsertionBlock(), b.getInsertionPoint());
        b.setInsertionPointAfter(a.store);
        a.store.getValueMutable().assign(g);
        continue;
      }
      // The accumulation follows, in order, where the builder stands.
      for (Operation *op : {a.load.getOperation(), a.add.getOperation(),
                            a.store.getOperation()}) {
        op->moveBefore(b.getInsertionBlock(), b.getInsertionPoint());
        b.setInsertionPointAfter(op);
      }
      a.add.getRhsMutable().assign(g);
    }
  }
  return success();
}

} // namespace mlir::ds::zero
