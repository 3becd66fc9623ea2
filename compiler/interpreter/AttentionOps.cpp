//===- AttentionOps.cpp - interpreter rules for attention and rotary ------===//
//
// The reference kernels take [B, H, T, D]. A seq_major op's operands and
// results are [B, T, H, D] (the projections' layout, after
// ds-fold-attention-layout): they are evaluated by swapping dims 1 and 2 of
// every operand, running the reference, and swapping the results back (the
// swap is its own inverse).
//
//===----------------------------------------------------------------------===//

#include "compiler/interpreter/AttentionOps.h"

#include "dialects/ds/DsOps.h"

#include "llvm/ADT/STLFunctionalExtras.h"

using namespace mlir::ds;

namespace dsc {
namespace {

using Tensors = std::vector<ref::Tensor>;

/// Each tensor with its dims 1 and 2 swapped.
RefTensors swapHeadsAndPositions(const Tensors &in) {
  Tensors out;
  for (const ref::Tensor &t : in) {
    auto r = ref::transpose(t, {0, 2, 1, 3});
    if (!r)
      return ref::Error{r.error};
    out.push_back(std::move(r.value));
  }
  return out;
}

/// `reference` on in's tensors in [B, H, T, D]; with seqMajor, on their swaps,
/// and its results swapped back.
RefTensors
evaluateHeadsMajor(bool seqMajor, RefOperands in,
                   llvm::function_ref<RefTensors(RefOperands)> reference) {
  if (!seqMajor)
    return reference(in);
  Tensors copies;
  for (const ref::Tensor *t : in)
    copies.push_back(*t);
  RefTensors swapped = swapHeadsAndPositions(copies);
  if (!swapped)
    return swapped;
  std::vector<const ref::Tensor *> ptrs;
  for (const ref::Tensor &t : swapped.value)
    ptrs.push_back(&t);
  RefTensors out = reference(ptrs);
  if (!out)
    return out;
  return swapHeadsAndPositions(out.value);
}

} // namespace

RefTensors evaluateAttention(AttentionOp op, RefOperands in) {
  bool causal = op.getCausal();
  double scale = op.getScale().convertToDouble();
  return evaluateHeadsMajor(
      op.getSeqMajor(), in, [&](RefOperands x) -> RefTensors {
        auto r = ref::attention(*x[0], *x[1], *x[2], causal, scale);
        if (!r)
          return ref::Error{r.error};
        Tensors out;
        out.push_back(std::move(r.value));
        return out;
      });
}

RefTensors evaluateAttentionGrad(AttentionGradOp op, RefOperands in) {
  bool causal = op.getCausal();
  double scale = op.getScale().convertToDouble();
  return evaluateHeadsMajor(
      op.getSeqMajor(), in, [&](RefOperands x) -> RefTensors {
        auto r = ref::attention_grad(*x[0], *x[1], *x[2], *x[3], causal, scale);
        if (!r)
          return ref::Error{r.error};
        Tensors out;
        out.push_back(std::move(r.value.dq));
        out.push_back(std::move(r.value.dk));
        out.push_back(std::move(r.value.dv));
        return out;
      });
}

RefTensors evaluateRotary(RotaryOp op, RefOperands in) {
  double theta = op.getTheta().convertToDouble();
  bool inverse = op.getInverse();
  return evaluateHeadsMajor(op.getSeqMajor(), in,
                            [&](RefOperands x) -> RefTensors {
                              auto r = ref::rotary(*x[0], theta, inverse);
                              if (!r)
                                return ref::Error{r.error};
                              Tensors out;
                              out.push_back(std::move(r.value));
                              return out;
                            });
}

} // namespace dsc
