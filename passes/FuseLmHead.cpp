//===- FuseLmHead.cpp - phase `fused`: the LM head and its loss as one op -===//
//
// After autodiff a language model's head is five ops around a [N, V]
// logits tensor and its gradient, the largest activations of a step at a
// real vocabulary. ds.linear_cross_entropy computes the loss and both
// gradients in chunks of rows (docs/performance.md says why rows only and
// why in the forward's place: the loss ends the graph and its cotangent,
// the seed, is known before the backward starts). An f32 or 16-bit head;
// not one whose logits selective remat recomputes.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "runtime/plan/ProgramNames.h"

#include "dialects/ds/Contracts.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSFUSELMHEAD
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
namespace plan = dsc::plan;

namespace {

/// The ops of one head, all found or none.
struct Head {
  MatmulOp logits, dh, dweight;
  CrossEntropyOp loss;
  CrossEntropyGradOp grad;
  ReshapeOp flatGrad, flatH; ///< null where g or h is already [N, .]
};

Type elementOf(Value v) {
  return cast<ShapedType>(v.getType()).getElementType();
}

/// f32, or a mixed-precision head's f16 or bf16.
bool isHeadType(Type t) { return t.isF32() || t.isF16() || t.isBF16(); }

/// `v`, or what the reshape defining it reads; the reshape in `reshape`.
Value throughReshape(Value v, ReshapeOp &reshape) {
  reshape = v.getDefiningOp<ReshapeOp>();
  return reshape ? reshape.getX() : v;
}

/// The head whose logit gradient `grad` computes, if the IR is the shape
/// autodiff writes and nothing else reads its intermediates.
std::optional<Head> match(CrossEntropyGradOp grad) {
  Head head;
  head.grad = grad;
  head.logits = grad.getLogits().getDefiningOp<MatmulOp>();
  if (!head.logits || head.logits.getTransposeLhs() ||
      !head.logits.getTransposeRhs() ||
      cast<ShapedType>(head.logits.getRhs().getType()).getRank() != 2 ||
      !isHeadType(elementOf(head.logits.getLhs())) ||
      elementOf(head.logits.getRhs()) != elementOf(head.logits.getLhs()) ||
      elementOf(grad.getResult()) != elementOf(head.logits.getLhs()) ||
      isRecompute(grad) || isRecompute(head.logits))
    return std::nullopt;
  Value h = head.logits.getLhs(), w = head.logits.getRhs();
  for (Operation *user : head.logits.getResult().getUsers()) {
    if (user == grad.getOperation())
      continue;
    auto loss = dyn_cast<CrossEntropyOp>(user);
    if (!loss || head.loss || loss.getTargets() != grad.getTargets() ||
        loss.getIgnoreIndex() != grad.getIgnoreIndex())
      return std::nullopt;
    head.loss = loss;
  }
  if (!head.loss)
    return std::nullopt;
  for (Operation *user : grad.getResult().getUsers()) {
    if (auto product = dyn_cast<MatmulOp>(user);
        product && !head.dh && product.getLhs() == grad.getResult() &&
        product.getRhs() == w && !product.getTransposeLhs() &&
        !product.getTransposeRhs()) {
      head.dh = product;
      continue;
    }
    MatmulOp product;
    if (auto reshape = dyn_cast<ReshapeOp>(user)) {
      if (!reshape->hasOneUse())
        return std::nullopt;
      head.flatGrad = reshape;
      product = dyn_cast<MatmulOp>(*reshape->getUsers().begin());
    } else {
      product = dyn_cast<MatmulOp>(user);
    }
    if (!product || head.dweight || !product.getTransposeLhs() ||
        product.getTransposeRhs() ||
        throughReshape(product.getRhs(), head.flatH) != h ||
        product.getType() != w.getType())
      return std::nullopt;
    head.dweight = product;
  }
  if (!head.dh || !head.dweight)
    return std::nullopt;
  return head;
}

/// The largest divisor of `rows` not above max(256, rows / 16), or `asked`.
/// Below 256 rows a chunk, dW's read-modify-write per chunk costs more
/// step time than the smaller chunk saves (bench/RESULTS.md: GPT-2 at
/// 1024 rows, 128-row chunks 1.03x the unfused step, 256-row 1.01x).
int64_t chunkRowsFor(int64_t rows, int64_t asked) {
  if (asked > 0)
    return asked;
  const int64_t limit = std::max<int64_t>(256, rows / 16);
  for (int64_t r = std::min(limit, rows); r > 1; --r)
    if (rows % r == 0)
      return r;
  return 1;
}

/// Whether `v` is defined before `at`, or computed from such values by pure
/// ops of at's block that hoist() can move there (autodiff writes the seed
/// constant after the loss).
bool availableAt(Value v, Operation *at) {
  Operation *def = v.getDefiningOp();
  if (!def || (def->getBlock() == at->getBlock() && def->isBeforeInBlock(at)))
    return true;
  if (def->getBlock() != at->getBlock() || !isPure(def) ||
      def->getNumRegions() != 0)
    return false;
  return llvm::all_of(def->getOperands(),
                      [&](Value operand) { return availableAt(operand, at); });
}

/// Moves what computes `v` (availableAt said it can) before `at`.
void hoist(Value v, Operation *at) {
  Operation *def = v.getDefiningOp();
  if (!def || def->isBeforeInBlock(at))
    return;
  for (Value operand : def->getOperands())
    hoist(operand, at);
  def->moveBefore(at);
}

/// Whether the fused op holds less than the unfused ops at their largest:
/// they hold the logits and their gradient (N x V each; then the gradient
/// and dW), it holds the chunk (R x V) and dW, which for a 16-bit head is
/// f32 beside its rounded copy. An f32 head always gains (dW is the same
/// buffer either way); a 16-bit head with few rows (micro-batch 1 of a
/// 1024-token GPT-2) would hold more, and stays unfused.
bool fusingSavesMemory(Head &head, int64_t rows, int64_t chunkRows) {
  auto weight = cast<ShapedType>(head.logits.getRhs().getType());
  const int64_t width = weight.getElementTypeBitWidth() / 8;
  if (width >= 4)
    return true;
  const int64_t V = weight.getDimSize(0), D = weight.getDimSize(1);
  const int64_t unfused =
      std::max(2 * rows * V * width, rows * V * width + V * D * width);
  const int64_t fused = chunkRows * V * width + V * D * (4 + width);
  return fused < unfused;
}

LogicalResult fuse(Head &head, int64_t askedRows) {
  Value g = head.grad.getGrad();
  const int64_t rows =
      cast<ShapedType>(head.loss.getTargets().getType()).getNumElements();
  const int64_t chunk = chunkRowsFor(rows, askedRows);
  if (rows % chunk != 0)
    return head.loss.emitError("ds-fuse-lm-head: chunk-rows (dsc "
                               "--lm-head-chunk-rows) ")
           << chunk << " does not divide the " << rows << " rows";
  // The fused op stands where the loss is; the cotangent must exist there.
  if (!availableAt(g, head.loss) || !fusingSavesMemory(head, rows, chunk))
    return success(); // left unfused
  hoist(g, head.loss);
  OpBuilder b(head.loss);
  // Named as the head (the FLOPs profile's module), tagged as its loss.
  auto fused = b.create<LinearCrossEntropyOp>(
      head.logits.getLoc(), head.logits.getLhs(), head.logits.getRhs(),
      head.loss.getTargets(), g, head.loss.getIgnoreIndexAttr(),
      b.getI64IntegerAttr(chunk));
  // A 16-bit head's dweight is the f32 sum of its chunks, rounded once
  // here to the weight's dtype, as the unfused product's result is.
  Value dweight = fused.getDweight();
  if (dweight.getType() != head.dweight.getType())
    dweight = b.create<CastOp>(head.dweight.getLoc(), head.dweight.getType(),
                               dweight);
  head.loss.getResult().replaceAllUsesWith(fused.getLoss());
  head.dh.getResult().replaceAllUsesWith(fused.getDh());
  head.dweight.getResult().replaceAllUsesWith(dweight);
  for (Operation *op :
       {head.dweight.getOperation(), head.flatGrad.getOperation(),
        head.dh.getOperation(), head.grad.getOperation(),
        head.loss.getOperation(), head.logits.getOperation()})
    if (op)
      op->erase();
  if (head.flatH && head.flatH->use_empty())
    head.flatH->erase();
  return success();
}

struct FuseLmHeadPass : ds::impl::DsFuseLmHeadBase<FuseLmHeadPass> {
  using Base::Base;

  void runOnOperation() override {
    if (!enabled)
      return;
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      // @forward stays the reference; eval keeps its logits.
      if (func.getSymName() == StringRef(plan::kForwardFunction))
        continue;
      SmallVector<CrossEntropyGradOp> grads;
      func.walk([&](CrossEntropyGradOp op) { grads.push_back(op); });
      for (CrossEntropyGradOp grad : grads)
        if (std::optional<Head> head = match(grad))
          if (failed(fuse(*head, chunkRows)))
            return signalPassFailure();
    }
  }
};

} // namespace
