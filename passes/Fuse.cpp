//===- Fuse.cpp - phase `fused`: known elementwise patterns -------------===//
//
// Each rewrite replaces a producer/consumer pair by one op that computes
// both values in a single pass over memory. The fused op is created where
// the producer was, so every other user of the intermediate still sees a
// dominating definition.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "runtime/plan/ProgramNames.h"

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
namespace plan = dsc::plan;

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

/// Makes `values` available where `anchor` stands, `consumer` being a later
/// op of the same block that reads them: values defined in between must be
/// parameter loads, which move up to just before `anchor` (nothing in a
/// program writes a parameter before reading it; only @apply writes them,
/// after its last read, and `stored` names what a function writes). False,
/// with nothing moved, when some value cannot move.
bool hoistLoadsAbove(Operation *anchor, Operation *consumer,
                     ArrayRef<Value> values, const llvm::StringSet<> &stored,
                     PatternRewriter &rewriter) {
  if (anchor->getBlock() != consumer->getBlock())
    return false;
  // The ops in between (a few loads, usually). Asking isBeforeInBlock
  // instead renumbers the whole block after every rewrite.
  llvm::SmallPtrSet<Operation *, 8> between;
  for (Operation *op = anchor->getNextNode(); op && op != consumer;
       op = op->getNextNode())
    between.insert(op);
  SmallVector<LoadOp> hoist;
  for (Value v : values) {
    Operation *def = v ? v.getDefiningOp() : nullptr;
    // Defined outside the block or before the anchor: already available.
    if (!def || !between.contains(def))
      continue;
    auto load = dyn_cast<LoadOp>(def);
    if (!load || stored.contains(load.getName()))
      return false;
    hoist.push_back(load);
  }
  for (LoadOp load : hoist)
    rewriter.moveOpBefore(load, anchor);
  return true;
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

/// The matmul defining `v` when v is its only use, on `consumer`'s side: the
/// product then never needs a buffer of its own.
MatmulOp soleMatmul(Value v, Operation *consumer) {
  auto matmul = v.getDefiningOp<MatmulOp>();
  if (!matmul || !matmul->hasOneUse() || !sameSide(matmul, consumer))
    return nullptr;
  return matmul;
}

// The fused matmul takes the matmul's place, not its consumer's: moved
// down, it would hold the matmul's operands longer (under ZeRO-3 a
// gathered layer past the next layer's gather, two layers' buffers at
// once). So the bias must exist there already or be a load that moves up.

/// matmul(a, b) + bias -> ds.matmul_bias (cuBLASLt's BIAS epilogue). Not
/// when a gelu reads the sum: FuseBiasGelu and FuseMatmulBiasGelu keep it
/// whole, pre-activation included.
struct FuseMatmulBias : OpRewritePattern<AddOp> {
  FuseMatmulBias(MLIRContext *ctx, const llvm::StringSet<> &stored)
      : OpRewritePattern(ctx), stored(stored) {}
  const llvm::StringSet<> &stored;

  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    MatmulOp matmul = soleMatmul(add.getLhs(), add);
    if (!matmul || add.getType() != matmul.getType())
      return failure();
    auto bias = cast<RankedTensorType>(add.getRhs().getType());
    if (bias.getRank() != 1 ||
        bias.getDimSize(0) != add.getType().getShape().back())
      return failure();
    for (Operation *user : add->getUsers())
      if (isa<GeluOp>(user) && sameSide(add, user))
        return failure();
    if (!hoistLoadsAbove(matmul, add, {add.getRhs()}, stored, rewriter))
      return failure();
    rewriter.setInsertionPoint(matmul);
    auto fused = rewriter.create<MatmulBiasOp>(
        add.getLoc(), add.getType(), matmul.getLhs(), matmul.getRhs(),
        add.getRhs(), matmul.getTransposeLhsAttr(),
        matmul.getTransposeRhsAttr());
    keepMark(add, fused);
    rewriter.replaceOp(add, fused.getResult());
    rewriter.eraseOp(matmul);
    return success();
  }
};

/// bias_gelu(matmul(a, b), bias) -> ds.matmul_bias_gelu (GELU_AUX_BIAS).
struct FuseMatmulBiasGelu : OpRewritePattern<BiasGeluOp> {
  FuseMatmulBiasGelu(MLIRContext *ctx, const llvm::StringSet<> &stored)
      : OpRewritePattern(ctx), stored(stored) {}
  const llvm::StringSet<> &stored;

  LogicalResult matchAndRewrite(BiasGeluOp biasGelu,
                                PatternRewriter &rewriter) const override {
    MatmulOp matmul = soleMatmul(biasGelu.getX(), biasGelu);
    if (!matmul || !hoistLoadsAbove(matmul, biasGelu, {biasGelu.getBias()},
                                    stored, rewriter))
      return failure();
    rewriter.setInsertionPoint(matmul);
    auto fused = rewriter.create<MatmulBiasGeluOp>(
        biasGelu.getLoc(), biasGelu.getSum().getType(),
        biasGelu.getResult().getType(), biasGelu.getApproximateAttr(),
        matmul.getLhs(), matmul.getRhs(), biasGelu.getBias(),
        matmul.getTransposeLhsAttr(), matmul.getTransposeRhsAttr());
    keepMark(biasGelu, fused);
    rewriter.replaceOp(biasGelu, fused.getResults());
    rewriter.eraseOp(matmul);
    return success();
  }
};

/// reduce_sum(gelu_grad(x, matmul(a, b))) over every dim but the last ->
/// ds.matmul_gelu_grad: the backward of a
/// matmul_bias_gelu's GELU and bias. The GELU gradient keeps its other
/// readers (the two matmuls of the layer below).
struct FuseMatmulGeluGrad : OpRewritePattern<ReduceSumOp> {
  FuseMatmulGeluGrad(MLIRContext *ctx, const llvm::StringSet<> &stored)
      : OpRewritePattern(ctx), stored(stored) {}
  const llvm::StringSet<> &stored;

  LogicalResult matchAndRewrite(ReduceSumOp reduce,
                                PatternRewriter &rewriter) const override {
    auto geluGrad = reduce.getX().getDefiningOp<GeluGradOp>();
    if (!geluGrad || !sameSide(geluGrad, reduce) || reduce.getKeepdim())
      return failure();
    MatmulOp matmul = soleMatmul(geluGrad.getGrad(), geluGrad);
    auto type = cast<RankedTensorType>(geluGrad.getType());
    if (!matmul || type.getRank() < 2 || geluGrad.getX().getType() != type)
      return failure();
    ArrayRef<int64_t> axes = reduce.getAxes();
    if (int64_t(axes.size()) != type.getRank() - 1)
      return failure();
    for (auto [i, axis] : llvm::enumerate(axes))
      if (axis != int64_t(i))
        return failure();
    if (!hoistLoadsAbove(matmul, geluGrad, {geluGrad.getX()}, stored, rewriter))
      return failure();
    rewriter.setInsertionPoint(matmul);
    auto fused = rewriter.create<MatmulGeluGradOp>(
        geluGrad.getLoc(), type, reduce.getType(),
        geluGrad.getApproximateAttr(), matmul.getLhs(), matmul.getRhs(),
        geluGrad.getX(), matmul.getTransposeLhsAttr(),
        matmul.getTransposeRhsAttr());
    keepMark(geluGrad, fused);
    rewriter.replaceOp(reduce, fused.getDbias());
    rewriter.replaceOp(geluGrad, fused.getGrad());
    rewriter.eraseOp(matmul);
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
    // The weight and bias must exist where the add is.
    if (!hoistLoadsAbove(add, norm, {norm.getWeight(), norm.getBias()}, stored,
                         rewriter))
      return failure();
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
      if (func.getSymName() == StringRef(plan::kForwardFunction))
        continue;
      llvm::StringSet<> stored = storedVariables(func);
      RewritePatternSet patterns(&getContext());
      patterns.add<FuseBiasGelu>(&getContext());
      patterns.add<FuseAddLayerNorm, FuseMatmulBias, FuseMatmulBiasGelu,
                   FuseMatmulGeluGrad>(&getContext(), stored);
      if (failed(
              applyPatternsAndFoldGreedily(func, std::move(patterns), config)))
        return signalPassFailure();
    }
  }
};

} // namespace
