//===- DsKernelFacts.cpp - KernelOpInterface: attribute encodings, FLOPs --===//
//
// The positional attributes of each kernel op, in the order
// runtime/kernels/Kernel.h gives them, and the FLOP counts that are not one
// per result element. Ops without an entry here take no attributes
// (DsOps.td says which ops are kernels and which are in-place safe).
//
//===----------------------------------------------------------------------===//

#include "dialects/ds/DsOps.h"
#include "dialects/ds/DsUtils.h"

namespace mlir::ds {
namespace {

using Ints = SmallVectorImpl<int64_t>;
using Floats = SmallVectorImpl<double>;

double numel(Value v) {
  return static_cast<double>(
      cast<RankedTensorType>(v.getType()).getNumElements());
}

double f(FloatAttr a) { return a.getValueAsDouble(); }

void append(Ints &ints, ArrayRef<int64_t> values) {
  ints.append(values.begin(), values.end());
}

/// q, k: [B, H, T, D] and [B, H, S, D] (or [B, T, H, D] and [B, S, H, D]
/// with seq_major); the forward's two T x S x D contractions, as FLOPs.
double attentionFlops(Value q, Value k, bool seqMajor) {
  auto qs = cast<RankedTensorType>(q.getType()).getShape();
  auto ks = cast<RankedTensorType>(k.getType()).getShape();
  return 4.0 * qs[0] * qs[1] * qs[2] * ks[attentionAxes(seqMajor).seq] * qs[3];
}

/// 2 M N K per batch: two FLOPs per result element per contracted index.
double matmulFlops(Value lhs, Value result, bool transposeLhs) {
  auto a = cast<RankedTensorType>(lhs.getType());
  int64_t k = a.getShape()[transposeLhs ? a.getRank() - 2 : a.getRank() - 1];
  return 2.0 * numel(result) * k;
}

} // namespace

double elementwiseFlops(Operation *op) {
  return op->getNumResults() ? numel(op->getResult(0)) : 0.0;
}

// Elementwise with an approximation flag: [approx 0=erf 1=tanh].
void GeluOp::getKernelAttributes(Ints &ints, Floats &) {
  ints.push_back(getApproximate() == GeluApproximation::tanh);
}
void GeluGradOp::getKernelAttributes(Ints &ints, Floats &) {
  ints.push_back(getApproximate() == GeluApproximation::tanh);
}
void BiasGeluOp::getKernelAttributes(Ints &ints, Floats &) {
  ints.push_back(getApproximate() == GeluApproximation::tanh);
}

void DropoutOp::getKernelAttributes(Ints &ints, Floats &floats) {
  ints.push_back(getId());
  ints.push_back(getParts());
  ints.push_back(getPartDim());
  ints.push_back(getSampleOffset());
  floats.push_back(f(getRateAttr()));
}

void IotaOp::getKernelAttributes(Ints &ints, Floats &) {
  ints.push_back(getDim());
}

void MatmulOp::getKernelAttributes(Ints &ints, Floats &) {
  ints.push_back(getTransposeLhs());
  ints.push_back(getTransposeRhs());
}
double MatmulOp::getFlops() {
  return matmulFlops(getLhs(), getResult(), getTransposeLhs());
}
// The fused forms: [transpose_a, transpose_b] and then GELU's [approx]; the
// epilogue counts one FLOP per element for the bias and one for the GELU.
void MatmulBiasOp::getKernelAttributes(Ints &ints, Floats &) {
  ints.push_back(getTransposeLhs());
  ints.push_back(getTransposeRhs());
}
double MatmulBiasOp::getFlops() {
  return matmulFlops(getLhs(), getResult(), getTransposeLhs()) +
         numel(getResult());
}
void MatmulBiasGeluOp::getKernelAttributes(Ints &ints, Floats &) {
  ints.push_back(getTransposeLhs());
  ints.push_back(getTransposeRhs());
  ints.push_back(getApproximate() == GeluApproximation::tanh);
}
double MatmulBiasGeluOp::getFlops() {
  return matmulFlops(getLhs(), getResult(), getTransposeLhs()) +
         2.0 * numel(getResult());
}
void MatmulGeluGradOp::getKernelAttributes(Ints &ints, Floats &) {
  ints.push_back(getTransposeLhs());
  ints.push_back(getTransposeRhs());
  ints.push_back(getApproximate() == GeluApproximation::tanh);
}
double MatmulGeluGradOp::getFlops() {
  return matmulFlops(getLhs(), getGrad(), getTransposeLhs()) +
         2.0 * numel(getGrad());
}

// [ignore_index, chunk_rows]; the FLOPs of the ops it stands for: three
// products of N x V x D (the logits, dh and dweight), the loss (one, as
// ds.cross_entropy counts) and its gradient (one a logit).
void LinearCrossEntropyOp::getKernelAttributes(Ints &ints, Floats &) {
  ints.push_back(getIgnoreIndex());
  ints.push_back(getChunkRows());
}
double LinearCrossEntropyOp::getFlops() {
  auto weight = cast<ShapedType>(getWeight().getType());
  const double logits = numel(getTargets()) * double(weight.getDimSize(0));
  return 6.0 * logits * double(weight.getDimSize(1)) + logits + 1.0;
}

// Normalizations: [eps].
void LayerNormOp::getKernelAttributes(Ints &, Floats &floats) {
  floats.push_back(f(getEpsAttr()));
}
void LayerNormGradOp::getKernelAttributes(Ints &, Floats &floats) {
  floats.push_back(f(getEpsAttr()));
}
void RmsNormOp::getKernelAttributes(Ints &, Floats &floats) {
  floats.push_back(f(getEpsAttr()));
}
void RmsNormGradOp::getKernelAttributes(Ints &, Floats &floats) {
  floats.push_back(f(getEpsAttr()));
}
void AddLayerNormOp::getKernelAttributes(Ints &, Floats &floats) {
  floats.push_back(f(getEpsAttr()));
}

// Attention: [causal] | [scale]. Backward: recompute the scores, then four
// contractions for dq, dk, dv and the probabilities' gradient.
void AttentionOp::getKernelAttributes(Ints &ints, Floats &floats) {
  ints.push_back(getCausal());
  ints.push_back(getSeqMajor());
  floats.push_back(f(getScaleAttr()));
}
double AttentionOp::getFlops() {
  return attentionFlops(getQ(), getK(), getSeqMajor());
}
void AttentionGradOp::getKernelAttributes(Ints &ints, Floats &floats) {
  ints.push_back(getCausal());
  ints.push_back(getSeqMajor());
  floats.push_back(f(getScaleAttr()));
}
double AttentionGradOp::getFlops() {
  return 2.5 * attentionFlops(getQ(), getK(), getSeqMajor());
}

void RotaryOp::getKernelAttributes(Ints &ints, Floats &floats) {
  ints.push_back(getInverse());
  ints.push_back(getSeqMajor());
  floats.push_back(f(getThetaAttr()));
}

void EmbeddingOp::getKernelAttributes(Ints &ints, Floats &) {
  ints.push_back(getParts());
}
void EmbeddingGradOp::getKernelAttributes(Ints &ints, Floats &) {
  ints.push_back(getParts());
}
void CrossEntropyPartOp::getKernelAttributes(Ints &ints, Floats &) {
  ints.push_back(getIgnoreIndex());
  ints.push_back(getParts());
}
void CrossEntropyPartLossOp::getKernelAttributes(Ints &ints, Floats &) {
  ints.push_back(getIgnoreIndex());
}
void CrossEntropyPartGradOp::getKernelAttributes(Ints &ints, Floats &) {
  ints.push_back(getIgnoreIndex());
  ints.push_back(getParts());
}
void CrossEntropyOp::getKernelAttributes(Ints &ints, Floats &) {
  ints.push_back(getIgnoreIndex());
}
void CrossEntropyGradOp::getKernelAttributes(Ints &ints, Floats &) {
  ints.push_back(getIgnoreIndex());
}

// Data movement: [perm...], [offsets...], [low...], [axis].
void TransposeOp::getKernelAttributes(Ints &ints, Floats &) {
  append(ints, getPermutation());
}
void SliceOp::getKernelAttributes(Ints &ints, Floats &) {
  append(ints, getOffsets());
}
void PadOp::getKernelAttributes(Ints &ints, Floats &) {
  append(ints, getLow());
}
void ConcatOp::getKernelAttributes(Ints &ints, Floats &) {
  ints.push_back(getAxis());
}
void SplitOp::getKernelAttributes(Ints &ints, Floats &) {
  ints.push_back(getAxis());
}

// Reductions: [axes...].
void ReduceSumOp::getKernelAttributes(Ints &ints, Floats &) {
  append(ints, getAxes());
}
void ReduceMeanOp::getKernelAttributes(Ints &ints, Floats &) {
  append(ints, getAxes());
}
void ReduceMaxOp::getKernelAttributes(Ints &ints, Floats &) {
  append(ints, getAxes());
}

// AdamW: | [beta1, beta2, eps, weight_decay].
void AdamWOp::getKernelAttributes(Ints &, Floats &floats) {
  floats.append({f(getBeta1Attr()), f(getBeta2Attr()), f(getEpsAttr()),
                 f(getWeightDecayAttr())});
}

// SGD: [nesterov] | [momentum, dampening, weight_decay].
void SgdOp::getKernelAttributes(Ints &ints, Floats &floats) {
  ints.push_back(getNesterov() ? 1 : 0);
  floats.append(
      {f(getMomentumAttr()), f(getDampeningAttr()), f(getWeightDecayAttr())});
}

// Lion: | [beta1, beta2, weight_decay].
void LionOp::getKernelAttributes(Ints &, Floats &floats) {
  floats.append(
      {f(getBeta1Attr()), f(getBeta2Attr()), f(getWeightDecayAttr())});
}

// Adagrad: | [lr_decay, eps, weight_decay].
void AdagradOp::getKernelAttributes(Ints &, Floats &floats) {
  floats.append(
      {f(getLrDecayAttr()), f(getEpsAttr()), f(getWeightDecayAttr())});
}

// Lamb: [bias_correction, eps_inside_sqrt, members...] | [beta1, beta2,
// eps, weight_decay, min_coeff, max_coeff].
void LambOp::getKernelAttributes(Ints &ints, Floats &floats) {
  ints.append({getBiasCorrection() ? 1 : 0, getEpsInsideSqrt() ? 1 : 0});
  if (std::optional<ArrayRef<int64_t>> members = getMembers())
    ints.append(members->begin(), members->end());
  floats.append({f(getBeta1Attr()), f(getBeta2Attr()), f(getEpsAttr()),
                 f(getWeightDecayAttr()), f(getMinCoeffAttr()),
                 f(getMaxCoeffAttr())});
}

// Muon's momentum: [nesterov] | [momentum].
void MuonMomentumOp::getKernelAttributes(Ints &ints, Floats &floats) {
  ints.push_back(getNesterov() ? 1 : 0);
  floats.push_back(f(getMomentumAttr()));
}

// Muon's step: | [weight_decay, factor].
void MuonApplyOp::getKernelAttributes(Ints &, Floats &floats) {
  floats.append({f(getWeightDecayAttr()), f(getFactorAttr())});
}

// Lamb's norms: [eps_inside_sqrt, members...] | [beta1, beta2, eps,
// weight_decay].
void LambNormsOp::getKernelAttributes(Ints &ints, Floats &floats) {
  ints.push_back(getEpsInsideSqrt() ? 1 : 0);
  ints.append(getMembers().begin(), getMembers().end());
  floats.append({f(getBeta1Attr()), f(getBeta2Attr()), f(getEpsAttr()),
                 f(getWeightDecayAttr())});
}

} // namespace mlir::ds
