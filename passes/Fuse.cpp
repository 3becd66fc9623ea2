//===- Fuse.cpp - phase `fused`: known elementwise patterns -------------===//
//
// Each rewrite replaces a producer/consumer pair by one op that computes
// both values in a single pass over memory. The fused op is created where
// the producer was, so every other user of the intermediate still sees a
// dominating definition.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/ds/Contracts.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSFUSE
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// A recomputation (ds.recompute) fuses only with another: fusing it with
/// its forward producer would compute it in the forward again, and keep
/// it. The fused op carries the mark on.
bool sameSide(Operation *producer, Operation *consumer) {
  return isRecompute(producer) == isRecompute(consumer);
}
void keepMark(Operation *from, Operation *fused) {
  if (isRecompute(from))
    fused->setAttr(kRecomputeAttr, UnitAttr::get(fused->getContext()));
}

/// gelu(x + bias) with bias along the last dimension -> ds.bias_gelu.
struct FuseBiasGelu : OpRewritePattern<GeluOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GeluOp gelu,
                                PatternRewriter &rewriter) const override {
    auto add = gelu.getX().getDefiningOp<AddOp>();
    if (!add || !sameSide(add, gelu))
      return failure();
    auto x = cast<RankedTensorType>(add.getLhs().getType());
    auto bias = cast<RankedTensorType>(add.getRhs().getType());
    if (x != add.getType() || bias.getRank() != 1 || x.getRank() < 1 ||
        bias.getDimSize(0) != x.getShape().back())
      return failure();
    rewriter.setInsertionPoint(add);
    auto fused = rewriter.create<BiasGeluOp>(
        add.getLoc(), gelu.getApproximateAttr(), add.getLhs(), add.getRhs());
    keepMark(add, fused);
    rewriter.replaceOp(gelu, fused.getResult());
    rewriter.replaceOp(add, fused.getSum());
    return success();
  }
};

/// The variables a function stores to, collected once per function: fusion
/// adds no stores, and asking the function for every norm was quadratic.
llvm::StringSet<> storedVariables(func::FuncOp func) {
  llvm::StringSet<> names;
  func.walk([&](StoreOp store) { names.insert(store.getName()); });
  return names;
}

/// layer_norm(x + residual) with equal shapes -> ds.add_layer_norm.
struct FuseAddLayerNorm : OpRewritePattern<LayerNormOp> {
  FuseAddLayerNorm(MLIRContext *ctx, const llvm::StringSet<> &stored)
      : OpRewritePattern(ctx), stored(stored) {}
  const llvm::StringSet<> &stored;

  LogicalResult matchAndRewrite(LayerNormOp norm,
                                PatternRewriter &rewriter) const override {
    auto add = norm.getX().getDefiningOp<AddOp>();
    if (!add || !sameSide(add, norm) ||
        add.getLhs().getType() != add.getRhs().getType() ||
        add.getLhs().getType() != add.getType())
      return failure();
    // The weight and bias must exist where the add is. Parameter loads
    // can move up: nothing in a program writes a parameter before reading
    // it (only @apply writes them, after its last read).
    if (norm->getBlock() != add->getBlock())
      return failure();
    // The ops between the add and the norm (a few loads, usually). Asking
    // isBeforeInBlock instead renumbers the whole block after every rewrite.
    llvm::SmallPtrSet<Operation *, 8> between;
    for (Operation *op = add->getNextNode(); op && op != norm;
         op = op->getNextNode())
      between.insert(op);
    SmallVector<LoadOp> hoist;
    for (Value v : {norm.getWeight(), norm.getBias()}) {
      Operation *def = v ? v.getDefiningOp() : nullptr;
      // Defined outside the block or before the add: already available.
      if (!def || !between.contains(def))
        continue;
      auto load = dyn_cast<LoadOp>(def);
      if (!load || stored.contains(load.getName()))
        return failure();
      hoist.push_back(load);
    }
    for (LoadOp load : hoist)
      rewriter.moveOpBefore(load, add);
    rewriter.setInsertionPoint(add);
    auto fused = rewriter.create<AddLayerNormOp>(
        add.getLoc(), add.getType(), add.getType(), add.getLhs(), add.getRhs(),
        norm.getWeight(), norm.getBias(), norm.getEpsAttr());
    keepMark(add, fused);
    rewriter.replaceOp(norm, fused.getResult());
    rewriter.replaceOp(add, fused.getSum());
    return success();
  }
};

struct FusePass : ds::impl::DsFuseBase<FusePass> {
  void runOnOperation() override {
    GreedyRewriteConfig config;
    config.enableRegionSimplification = GreedySimplifyRegionLevel::Disabled;
    // @forward stays as written: it is the reference the phases start from.
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.getSymName() == "forward")
        continue;
      llvm::StringSet<> stored = storedVariables(func);
      RewritePatternSet patterns(&getContext());
      patterns.add<FuseBiasGelu>(&getContext());
      patterns.add<FuseAddLayerNorm>(&getContext(), stored);
      if (failed(
              applyPatternsAndFoldGreedily(func, std::move(patterns), config)))
        return signalPassFailure();
    }
  }
};

} // namespace
