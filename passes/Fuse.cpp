//===- Fuse.cpp - phase `fused`: known elementwise patterns -------------===//
//
// Each rewrite replaces a producer/consumer pair by one op that computes
// both values in a single pass over memory. The fused op is created where
// the producer was, so every other user of the intermediate still sees a
// dominating definition.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSFUSE
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// gelu(x + bias) with bias along the last dimension -> ds.bias_gelu.
struct FuseBiasGelu : OpRewritePattern<GeluOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GeluOp gelu,
                                PatternRewriter &rewriter) const override {
    auto add = gelu.getX().getDefiningOp<AddOp>();
    if (!add)
      return failure();
    auto x = cast<RankedTensorType>(add.getLhs().getType());
    auto bias = cast<RankedTensorType>(add.getRhs().getType());
    if (x != add.getType() || bias.getRank() != 1 || x.getRank() < 1 ||
        bias.getDimSize(0) != x.getShape().back())
      return failure();
    rewriter.setInsertionPoint(add);
    auto fused = rewriter.create<BiasGeluOp>(
        add.getLoc(), gelu.getApproximateAttr(), add.getLhs(), add.getRhs());
    rewriter.replaceOp(gelu, fused.getResult());
    rewriter.replaceOp(add, fused.getSum());
    return success();
  }
};

bool writes(func::FuncOp func, StringRef variable) {
  bool found = false;
  func.walk([&](StoreOp store) { found |= store.getName() == variable; });
  return found;
}

/// layer_norm(x + residual) with equal shapes -> ds.add_layer_norm.
struct FuseAddLayerNorm : OpRewritePattern<LayerNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LayerNormOp norm,
                                PatternRewriter &rewriter) const override {
    auto add = norm.getX().getDefiningOp<AddOp>();
    if (!add || add.getLhs().getType() != add.getRhs().getType() ||
        add.getLhs().getType() != add.getType())
      return failure();
    // The weight and bias must exist where the add is. Parameter loads
    // can move up: nothing in a program writes a parameter before reading
    // it (only @apply writes them, after its last read).
    SmallVector<LoadOp> hoist;
    for (Value v : {norm.getWeight(), norm.getBias()}) {
      Operation *def = v ? v.getDefiningOp() : nullptr;
      if (!def || def->getBlock() != add->getBlock() ||
          def->isBeforeInBlock(add))
        continue;
      auto load = dyn_cast<LoadOp>(def);
      if (!load || writes(add->getParentOfType<func::FuncOp>(), load.getName()))
        return failure();
      hoist.push_back(load);
    }
    for (LoadOp load : hoist)
      rewriter.moveOpBefore(load, add);
    rewriter.setInsertionPoint(add);
    auto fused = rewriter.create<AddLayerNormOp>(
        add.getLoc(), add.getType(), add.getType(), add.getLhs(), add.getRhs(),
        norm.getWeight(), norm.getBias(), norm.getEpsAttr());
    rewriter.replaceOp(norm, fused.getResult());
    rewriter.replaceOp(add, fused.getSum());
    return success();
  }
};

struct FusePass : ds::impl::DsFuseBase<FusePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseBiasGelu, FuseAddLayerNorm>(&getContext());
    FrozenRewritePatternSet frozen(std::move(patterns));
    GreedyRewriteConfig config;
    config.enableRegionSimplification = GreedySimplifyRegionLevel::Disabled;
    // @forward stays as written: it is the reference the phases start from.
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (func.getSymName() != "forward" &&
          failed(applyPatternsAndFoldGreedily(func, frozen, config)))
        return signalPassFailure();
  }
};

} // namespace
