//===- FoldAttentionLayout.cpp - phase `fused`: attention reads [B, T, H, D]
//
// A model's projections write each position's heads side by side
// ([B, T, H * D], viewed as [B, T, H, D]); attention works per (batch,
// head) pair, so the graph transposes q, k and v to [B, H, T, D] before it
// and the output back after it, and the backward does the same to the
// output's gradient and to dq, dk and dv: eight copies of an activation a
// layer (on the small GPT of bench/RESULTS.md, 4% of a step). The kernels
// can read a pair's rows H * D apart as well as D apart (a leading
// dimension on the CPU, a row step on CUDA), so here an attention whose
// operands are all such transposes, and whose results are read only by the
// transposes back, takes the untransposed values (`seq_major`) and the
// transposes go: the same arithmetic, bit for bit. Swaps move past a
// rotary embedding first (which then rotates [B, T, H, D] rows), so
// Llama's attention folds too.
//
// After sharding and autodiff (which see the [B, H, T, D] form only).
//
//===----------------------------------------------------------------------===//

#include "passes/Functions.h"
#include "passes/Passes.h"

#include "dialects/ds/Contracts.h"
#include "dialects/ds/DsUtils.h"

#include "llvm/ADT/SetVector.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSFOLDATTENTIONLAYOUT
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// [B, H, T, D] <-> [B, T, H, D]; the swap is its own inverse.
bool swapsHeadsAndPositions(TransposeOp t) {
  return llvm::equal(t.getPermutation(), ArrayRef<int64_t>{0, 2, 1, 3});
}

/// The same marks (a recomputation's, a host placement's): folding moves
/// work between the ops, which must run where and when the same.
bool sameMarks(Operation *a, Operation *b) {
  return a->getDiscardableAttrDictionary() == b->getDiscardableAttrDictionary();
}

/// What an attention op reads before the transposes, or nothing when some
/// operand or some reader of a result is not the swap.
std::optional<SmallVector<Value>> foldableOperands(Operation *op) {
  SmallVector<Value> sources;
  for (Value operand : op->getOperands()) {
    auto t = operand.getDefiningOp<TransposeOp>();
    if (!t || !swapsHeadsAndPositions(t) || !sameMarks(t, op))
      return std::nullopt;
    sources.push_back(t.getX());
  }
  for (Value result : op->getResults())
    for (Operation *user : result.getUsers()) {
      auto t = dyn_cast<TransposeOp>(user);
      if (!t || !swapsHeadsAndPositions(t) || !sameMarks(t, op))
        return std::nullopt;
    }
  return sources;
}

/// The op rebuilt on `sources` with `seq_major`; every transpose of a
/// result takes the new result's place.
void fold(Operation *op, ArrayRef<Value> sources) {
  OpBuilder b(op);
  OperationState state(op->getLoc(), op->getName());
  state.addOperands(sources);
  for (Value result : op->getResults()) {
    auto type = cast<RankedTensorType>(result.getType());
    ArrayRef<int64_t> s = type.getShape();
    state.addTypes(type.clone({s[0], s[2], s[1], s[3]}));
  }
  state.addAttributes(op->getAttrs());
  Operation *folded = b.create(state);
  if (auto a = dyn_cast<AttentionOp>(folded))
    a.setSeqMajor(true);
  else
    cast<AttentionGradOp>(folded).setSeqMajor(true);
  for (auto [old, now] : llvm::zip(op->getResults(), folded->getResults()))
    for (Operation *user : llvm::make_early_inc_range(old.getUsers())) {
      user->getResult(0).replaceAllUsesWith(now);
      user->erase();
    }
  op->erase();
}

/// `from`'s marks onto `to`.
void copyMarks(Operation *from, Operation *to) {
  to->setDiscardableAttrs(from->getDiscardableAttrDictionary());
}

/// Moves a swap to the attention's side of a rotary embedding (Llama
/// rotates q and k between the transpose and attention, and their
/// gradients between attention_grad and the transpose back): rotary(swap(x))
/// becomes swap(rotary seq_major(x)), and swap(rotary(y)), where the swap
/// is the rotary's only reader, rotary seq_major(swap(y)). Either way as
/// many swaps as before, now where the attention fold removes them.
void moveSwapsPastRotary(RotaryOp r) {
  if (r.getSeqMajor() || cast<RankedTensorType>(r.getType()).getRank() != 4)
    return;
  OpBuilder b(r);
  auto swap = [&](Value v, TransposeOp like) {
    auto type = cast<RankedTensorType>(v.getType());
    ArrayRef<int64_t> s = type.getShape();
    auto t = b.create<TransposeOp>(like.getLoc(),
                                   type.clone({s[0], s[2], s[1], s[3]}), v,
                                   like.getPermutationAttr());
    copyMarks(like, t);
    return t;
  };
  auto rotary = [&](Value v) {
    auto rs = b.create<RotaryOp>(r.getLoc(), v, r.getThetaAttr(),
                                 r.getInverseAttr(), b.getUnitAttr());
    copyMarks(r, rs);
    return rs;
  };
  if (auto t = r.getX().getDefiningOp<TransposeOp>();
      t && swapsHeadsAndPositions(t) && sameMarks(t, r)) {
    r.getResult().replaceAllUsesWith(swap(rotary(t.getX()), t).getResult());
    r.erase();
    if (t->use_empty())
      t.erase();
    return;
  }
  if (!r->hasOneUse())
    return;
  auto t = dyn_cast<TransposeOp>(*r->user_begin());
  if (!t || !swapsHeadsAndPositions(t) || !sameMarks(t, r))
    return;
  b.setInsertionPoint(t);
  t.getResult().replaceAllUsesWith(rotary(swap(r.getX(), t)).getResult());
  t.erase();
  r.erase();
}

struct FoldAttentionLayoutPass
    : ds::impl::DsFoldAttentionLayoutBase<FoldAttentionLayoutPass> {
  using DsFoldAttentionLayoutBase::DsFoldAttentionLayoutBase;

  void runOnOperation() override {
    if (!enabled)
      return;
    for (func::FuncOp func : fusedFunctions(getOperation())) {
      SmallVector<RotaryOp> rotaries;
      func.walk([&](RotaryOp r) { rotaries.push_back(r); });
      for (RotaryOp r : rotaries)
        moveSwapsPastRotary(r);
      SmallVector<Operation *> attentions;
      func.walk([&](Operation *op) {
        if (isa<AttentionOp, AttentionGradOp>(op) && !isSeqMajor(op))
          attentions.push_back(op);
      });
      llvm::SetVector<Operation *> freed;
      for (Operation *op : attentions) {
        std::optional<SmallVector<Value>> sources = foldableOperands(op);
        if (!sources)
          continue;
        for (Value operand : op->getOperands())
          freed.insert(operand.getDefiningOp());
        fold(op, *sources);
      }
      // The forward's transposes of q, k and v also feed the backward's
      // attention_grad: they go once neither reads them.
      for (Operation *t : freed)
        if (t->use_empty())
          t->erase();
    }
  }
};

} // namespace
