//===- Zero.cpp - phase `dist`: data parallelism and ZeRO
//------------------===//
//
// Stage 0. Autodiff leaves each micro-step's gradient accumulations as
//   %acc = ds.load @p.grad ; %s = ds.add %acc, %d ; ds.store %s, @p.grad
// This pass buckets the %d in the order they are completed, all-reduces
// (sums; ds-autodiff divided the seed by the world size) each bucket right
// after its last gradient, and rewrites the
// accumulations to add the averaged gradients after a dist.wait at the end
// of the micro-step, so communication runs under the rest of the backward.
// Reducing each micro-step's gradient and summing over micro-steps equals
// reducing the accumulated gradient (DeepSpeed reduces only at the
// accumulation boundary; that saves traffic, not correctness).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSZERO
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

struct Accumulation {
  LoadOp load;
  AddOp add;
  StoreOp store;
  Value grad;
  int64_t position; ///< where %d is complete
};

struct ZeroPass : ds::impl::DsZeroBase<ZeroPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (worldSize < 1 || stage < 0 || stage > 3 || bucketSize < 1) {
      module.emitError("ds-zero: world-size and bucket-size must be >= 1 and "
                       "stage in 0..3");
      return signalPassFailure();
    }
    if (stage > 0) {
      module.emitError("ds-zero: ZeRO stage ")
          << stage.getValue() << " is not implemented yet (stage 0 is)";
      return signalPassFailure();
    }
    module->setAttr(
        "dist.world_size",
        IntegerAttr::get(IntegerType::get(&getContext(), 64), worldSize));
    if (worldSize == 1)
      return;
    auto micro = module.lookupSymbol<func::FuncOp>("micro_step");
    if (!micro) {
      module.emitError("ds-zero: no @micro_step; run ds-autodiff first");
      return signalPassFailure();
    }
    allReduceGradients(micro);
  }

  SmallVector<Accumulation> findAccumulations(func::FuncOp func) {
    DenseMap<Operation *, int64_t> position;
    for (auto [i, op] : llvm::enumerate(func.front()))
      position[&op] = i;
    SmallVector<Accumulation> accs;
    func.walk([&](StoreOp store) {
      auto add = store.getValue().getDefiningOp<AddOp>();
      auto load = add ? add.getLhs().getDefiningOp<LoadOp>() : LoadOp();
      if (!load || load.getName() != store.getName() || !add->hasOneUse())
        return;
      Value d = add.getRhs();
      int64_t at = d.getDefiningOp() ? position.lookup(d.getDefiningOp()) : -1;
      accs.push_back({load, add, store, d, at});
    });
    llvm::stable_sort(accs, [](const Accumulation &a, const Accumulation &b) {
      return a.position < b.position;
    });
    return accs;
  }

  void allReduceGradients(func::FuncOp func) {
    SmallVector<Accumulation> accs = findAccumulations(func);
    auto ret = cast<func::ReturnOp>(func.front().getTerminator());
    OpBuilder b(func.getContext());
    const double scale = 1.0; // the seed already divided by worldSize

    size_t begin = 0;
    while (begin < accs.size()) {
      // A bucket: consecutive gradients up to bucketSize elements.
      size_t end = begin;
      int64_t elements = 0;
      do {
        elements +=
            cast<RankedTensorType>(accs[end].grad.getType()).getNumElements();
        ++end;
      } while (end < accs.size() &&
               elements + cast<RankedTensorType>(accs[end].grad.getType())
                              .getNumElements() <=
                   bucketSize);
      SmallVector<Accumulation> bucket(accs.begin() + begin,
                                       accs.begin() + end);
      begin = end;

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
        flat.push_back(b.create<ReshapeOp>(
            loc,
            RankedTensorType::get({t.getNumElements()}, t.getElementType()),
            a.grad));
      }
      Value packed = flat.size() == 1
                         ? flat[0]
                         : b.create<ConcatOp>(loc, flat, 0).getResult();
      Value reduced =
          b.create<dist::AllReduceOp>(loc, packed, b.getF64FloatAttr(scale));

      // Wait and accumulate at the end of the micro-step.
      b.setInsertionPoint(ret);
      Value done = b.create<dist::WaitOp>(loc, reduced);
      SmallVector<Value> parts;
      if (bucket.size() == 1)
        parts.push_back(done);
      else
        for (Value p : b.create<SplitOp>(loc, done, 0, sizes).getResults())
          parts.push_back(p);
      for (auto [a, part] : llvm::zip(bucket, parts)) {
        Value g = b.create<ReshapeOp>(loc, a.grad.getType(), part);
        a.load->moveBefore(ret);
        a.add->moveBefore(ret);
        a.store->moveBefore(ret);
        a.add.getRhsMutable().assign(g);
      }
    }
  }
};

} // namespace
