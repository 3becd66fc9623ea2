//===- DsVJP.cpp - reverse-mode rules of ds ops ---------------------------===//
//
// One buildVJP per differentiable op, in the order of DsOps.td. Each rule
// gets the result cotangents and fills the cotangents of the operands whose
// `needed` flag is set. Heavy backward passes get their own op (e.g.
// layer_norm_grad) so the runtime can give them a fused kernel.
//
//===----------------------------------------------------------------------===//

#include "dialects/ds/DsOps.h"
#include "dialects/ds/DsUtils.h"

using namespace mlir;
using namespace mlir::ds;

Value mlir::ds::splat(OpBuilder &b, Location loc, RankedTensorType type,
                      double value) {
  Type elt = type.getElementType();
  Attribute scalar = b.getFloatAttr(elt, value);
  return b.create<ConstantOp>(loc, DenseElementsAttr::get(type, scalar));
}

Value mlir::ds::sumToShape(OpBuilder &b, Location loc, Value grad,
                           ShapedType target) {
  auto g = tensorOf(grad);
  if (g.getShape() == target.getShape())
    return grad;
  int64_t lead = g.getRank() - target.getRank();
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < g.getRank(); ++d)
    if (d < lead || (target.getDimSize(d - lead) == 1 && g.getDimSize(d) != 1))
      axes.push_back(d);
  Value sum = grad;
  if (!axes.empty())
    sum = b.create<ReduceSumOp>(loc, grad, axes);
  if (tensorOf(sum).getShape() != target.getShape())
    sum = b.create<ReshapeOp>(
        loc, RankedTensorType::get(target.getShape(), g.getElementType()), sum);
  return sum;
}

SmallVector<int64_t> mlir::ds::invertPermutation(ArrayRef<int64_t> perm) {
  SmallVector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inv[perm[i]] = i;
  return inv;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                              ArrayRef<bool> needed,
                              SmallVectorImpl<Value> &out) {
  if (needed[0])
    out[0] = sumToShape(b, getLoc(), gs[0], getLhs().getType());
  if (needed[1])
    out[1] = sumToShape(b, getLoc(), gs[0], getRhs().getType());
  return success();
}

LogicalResult SubOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                              ArrayRef<bool> needed,
                              SmallVectorImpl<Value> &out) {
  if (needed[0])
    out[0] = sumToShape(b, getLoc(), gs[0], getLhs().getType());
  if (needed[1])
    out[1] = sumToShape(b, getLoc(), b.create<NegOp>(getLoc(), gs[0]),
                        getRhs().getType());
  return success();
}

LogicalResult MulOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                              ArrayRef<bool> needed,
                              SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  if (needed[0])
    out[0] = sumToShape(b, loc, b.create<MulOp>(loc, gs[0], getRhs()),
                        getLhs().getType());
  if (needed[1])
    out[1] = sumToShape(b, loc, b.create<MulOp>(loc, gs[0], getLhs()),
                        getRhs().getType());
  return success();
}

LogicalResult DivOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                              ArrayRef<bool> needed,
                              SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  Value gOverRhs = b.create<DivOp>(loc, gs[0], getRhs());
  if (needed[0])
    out[0] = sumToShape(b, loc, gOverRhs, getLhs().getType());
  if (needed[1]) {
    // d(l/r)/dr = -(l/r)/r, reusing the forward result.
    Value t = b.create<MulOp>(loc, gOverRhs, getResult());
    out[1] = sumToShape(b, loc, b.create<NegOp>(loc, t), getRhs().getType());
  }
  return success();
}

LogicalResult NegOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs, ArrayRef<bool>,
                              SmallVectorImpl<Value> &out) {
  out[0] = b.create<NegOp>(getLoc(), gs[0]);
  return success();
}

LogicalResult ExpOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs, ArrayRef<bool>,
                              SmallVectorImpl<Value> &out) {
  out[0] = b.create<MulOp>(getLoc(), gs[0], getResult());
  return success();
}

LogicalResult LogOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs, ArrayRef<bool>,
                              SmallVectorImpl<Value> &out) {
  out[0] = b.create<DivOp>(getLoc(), gs[0], getX());
  return success();
}

LogicalResult TanhOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs, ArrayRef<bool>,
                               SmallVectorImpl<Value> &out) {
  // g (1 - y^2) = g - g y y
  Location loc = getLoc();
  Value gy = b.create<MulOp>(loc, gs[0], getResult());
  Value gyy = b.create<MulOp>(loc, gy, getResult());
  out[0] = b.create<SubOp>(loc, gs[0], gyy);
  return success();
}

LogicalResult SqrtOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs, ArrayRef<bool>,
                               SmallVectorImpl<Value> &out) {
  // g / (2 sqrt(x))
  Location loc = getLoc();
  Value half =
      splat(b, loc, RankedTensorType::get({}, getType().getElementType()), 0.5);
  Value t = b.create<DivOp>(loc, gs[0], getResult());
  out[0] = b.create<MulOp>(loc, t, half);
  return success();
}

LogicalResult RsqrtOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                                ArrayRef<bool>, SmallVectorImpl<Value> &out) {
  // d x^(-1/2) = -1/2 x^(-3/2) = -1/2 y^3
  Location loc = getLoc();
  Value y = getResult();
  Value y3 = b.create<MulOp>(loc, b.create<MulOp>(loc, y, y), y);
  Value c = splat(b, loc, RankedTensorType::get({}, getType().getElementType()),
                  -0.5);
  out[0] = b.create<MulOp>(loc, b.create<MulOp>(loc, gs[0], y3), c);
  return success();
}

LogicalResult ReluOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs, ArrayRef<bool>,
                               SmallVectorImpl<Value> &out) {
  out[0] = b.create<ReluGradOp>(getLoc(), getX(), gs[0]);
  return success();
}

LogicalResult SiluOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs, ArrayRef<bool>,
                               SmallVectorImpl<Value> &out) {
  out[0] = b.create<SiluGradOp>(getLoc(), getX(), gs[0]);
  return success();
}

LogicalResult SwigluOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                                 ArrayRef<bool> needed,
                                 SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  if (needed[0])
    out[0] = b.create<SiluGradOp>(loc, getGate(),
                                  b.create<MulOp>(loc, gs[0], getUp()));
  if (needed[1])
    out[1] = b.create<MulOp>(loc, gs[0], b.create<SiluOp>(loc, getGate()));
  return success();
}

LogicalResult GeluOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs, ArrayRef<bool>,
                               SmallVectorImpl<Value> &out) {
  out[0] = b.create<GeluGradOp>(getLoc(), getApproximateAttr(), getX(), gs[0]);
  return success();
}

LogicalResult CastOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs, ArrayRef<bool>,
                               SmallVectorImpl<Value> &out) {
  out[0] = b.create<CastOp>(getLoc(), getX().getType(), gs[0]);
  return success();
}

LogicalResult DropoutOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                                  ArrayRef<bool>, SmallVectorImpl<Value> &out) {
  // Same id, same mask: the VJP of a masked scale is the same masked scale.
  out[0] = b.create<DropoutOp>(getLoc(), gs[0], getRateAttr(), getIdAttr(),
                               getPartsAttr(), getPartDimAttr(),
                               getSampleOffsetAttr());
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions and normalizations
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                                 ArrayRef<bool> needed,
                                 SmallVectorImpl<Value> &out) {
  // With C = op(A) op(B): d op(A) = g op(B)^T and d op(B) = op(A)^T g.
  Location loc = getLoc();
  Value g = gs[0], lhs = getLhs(), rhs = getRhs();
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  auto lt = tensorOf(lhs), rt = tensorOf(rhs);
  if (needed[0]) {
    Value d = ta ? b.create<MatmulOp>(loc, rhs, g, tb, true)
                 : b.create<MatmulOp>(loc, g, rhs, false, !tb);
    out[0] = sumToShape(b, loc, d, lt);
  }
  if (needed[1]) {
    if (rt.getRank() == 2 && lt.getRank() > 2 && !ta) {
      // A linear layer: fold the batch into the rows instead of building
      // one [K, N] product per batch element and summing them.
      int64_t rows = lt.getNumElements() / lt.getShape().back();
      auto flat = [&](Value v) {
        auto t = tensorOf(v);
        return b.create<ReshapeOp>(
            loc,
            RankedTensorType::get({rows, t.getShape().back()},
                                  t.getElementType()),
            v);
      };
      Value a2 = flat(lhs), g2 = flat(g);
      out[1] = tb ? b.create<MatmulOp>(loc, g2, a2, true, false)
                  : b.create<MatmulOp>(loc, a2, g2, true, false);
    } else {
      Value d = tb ? b.create<MatmulOp>(loc, g, lhs, true, ta)
                   : b.create<MatmulOp>(loc, lhs, g, !ta, false);
      out[1] = sumToShape(b, loc, d, rt);
    }
  }
  return success();
}

LogicalResult LayerNormOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &out) {
  auto grad = b.create<LayerNormGradOp>(getLoc(), getX(), getWeight(), gs[0],
                                        getEpsAttr());
  out[0] = grad.getDx();
  out[1] = grad.getDweight();
  if (getBias())
    out[2] = grad.getDbias();
  return success();
}

LogicalResult RmsNormOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                                  ArrayRef<bool>, SmallVectorImpl<Value> &out) {
  auto grad = b.create<RmsNormGradOp>(getLoc(), getX(), getWeight(), gs[0],
                                      getEpsAttr());
  out[0] = grad.getDx();
  out[1] = grad.getDweight();
  return success();
}

LogicalResult SoftmaxOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                                  ArrayRef<bool>, SmallVectorImpl<Value> &out) {
  out[0] = b.create<SoftmaxGradOp>(getLoc(), getResult(), gs[0]);
  return success();
}

LogicalResult AttentionOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                                    ArrayRef<bool>,
                                    SmallVectorImpl<Value> &out) {
  auto grad = b.create<AttentionGradOp>(getLoc(), getQ(), getK(), getV(), gs[0],
                                        getScaleAttr(), getCausalAttr(),
                                        getSeqMajorAttr());
  out[0] = grad.getDq();
  out[1] = grad.getDk();
  out[2] = grad.getDv();
  return success();
}

LogicalResult RotaryOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                                 ArrayRef<bool>, SmallVectorImpl<Value> &out) {
  // A rotation's transpose is the opposite rotation.
  out[0] = b.create<RotaryOp>(getLoc(), gs[0], getThetaAttr(),
                              getInverse() ? UnitAttr() : b.getUnitAttr(),
                              getSeqMajorAttr());
  return success();
}

//===----------------------------------------------------------------------===//
// Lookup and loss
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &out) {
  if (needed[0])
    out[0] = b.create<EmbeddingGradOp>(
        getLoc(), getIndices(), gs[0],
        uint64_t(tensorOf(getTable()).getDimSize(0)), getParts());
  return success();
}

LogicalResult CrossEntropyOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                                       ArrayRef<bool> needed,
                                       SmallVectorImpl<Value> &out) {
  if (needed[0])
    out[0] = b.create<CrossEntropyGradOp>(getLoc(), getLogits(), getTargets(),
                                          gs[0], getIgnoreIndexAttr());
  return success();
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                                  ArrayRef<bool>, SmallVectorImpl<Value> &out) {
  out[0] = b.create<ReshapeOp>(getLoc(), getX().getType(), gs[0]);
  return success();
}

LogicalResult TransposeOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                                    ArrayRef<bool>,
                                    SmallVectorImpl<Value> &out) {
  out[0] = b.create<TransposeOp>(getLoc(), gs[0],
                                 invertPermutation(getPermutation()));
  return success();
}

LogicalResult SliceOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                                ArrayRef<bool>, SmallVectorImpl<Value> &out) {
  auto x = tensorOf(getX());
  SmallVector<int64_t> high;
  for (int64_t d = 0; d < x.getRank(); ++d)
    high.push_back(x.getDimSize(d) - getOffsets()[d] - getSizes()[d]);
  out[0] = b.create<PadOp>(getLoc(), gs[0], getOffsets(), high);
  return success();
}

LogicalResult PadOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs, ArrayRef<bool>,
                              SmallVectorImpl<Value> &out) {
  out[0] =
      b.create<SliceOp>(getLoc(), gs[0], getLow(), tensorOf(getX()).getShape());
  return success();
}

LogicalResult ConcatOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                                 ArrayRef<bool> needed,
                                 SmallVectorImpl<Value> &out) {
  SmallVector<int64_t> sizes;
  for (Value in : getInputs())
    sizes.push_back(tensorOf(in).getDimSize(getAxis()));
  auto split = b.create<SplitOp>(getLoc(), gs[0], getAxis(), sizes);
  for (size_t i = 0; i < sizes.size(); ++i)
    if (needed[i])
      out[i] = split.getResult(i);
  return success();
}

LogicalResult SplitOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                                ArrayRef<bool>, SmallVectorImpl<Value> &out) {
  SmallVector<Value> pieces;
  for (auto [g, r] : llvm::zip(gs, getResults()))
    pieces.push_back(g ? g : splat(b, getLoc(), tensorOf(r), 0.0));
  out[0] = b.create<ConcatOp>(getLoc(), pieces, getAxis());
  return success();
}

LogicalResult BroadcastOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                                    ArrayRef<bool>,
                                    SmallVectorImpl<Value> &out) {
  out[0] = sumToShape(b, getLoc(), gs[0], getX().getType());
  return success();
}

/// Brings a reduction's cotangent back to the input's shape.
static Value expandReduced(OpBuilder &b, Location loc, Value g, Value x,
                           ArrayRef<int64_t> axes) {
  auto xt = tensorOf(x);
  SmallVector<int64_t> kept(xt.getShape());
  for (int64_t a : axes)
    kept[a] = 1;
  auto gt = tensorOf(g);
  if (gt.getShape() != ArrayRef<int64_t>(kept))
    g = b.create<ReshapeOp>(
        loc, RankedTensorType::get(kept, gt.getElementType()), g);
  return b.create<BroadcastOp>(loc, xt, g);
}

LogicalResult ReduceSumOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                                    ArrayRef<bool>,
                                    SmallVectorImpl<Value> &out) {
  out[0] = expandReduced(b, getLoc(), gs[0], getX(), getAxes());
  return success();
}

LogicalResult ReduceMeanOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                                     ArrayRef<bool>,
                                     SmallVectorImpl<Value> &out) {
  auto xt = tensorOf(getX());
  int64_t count = 1;
  for (int64_t a : getAxes())
    count *= xt.getDimSize(a);
  Value inv = splat(b, getLoc(), RankedTensorType::get({}, xt.getElementType()),
                    1.0 / static_cast<double>(count));
  Value g = b.create<MulOp>(getLoc(), gs[0], inv);
  out[0] = expandReduced(b, getLoc(), g, getX(), getAxes());
  return success();
}

LogicalResult ReduceMaxOp::buildVJP(OpBuilder &b, ArrayRef<Value> gs,
                                    ArrayRef<bool>,
                                    SmallVectorImpl<Value> &out) {
  Location loc = getLoc();
  Value maxes = expandReduced(b, loc, getResult(), getX(), getAxes());
  Value mask = b.create<EqualOp>(loc, getX(), maxes);
  Value g = expandReduced(b, loc, gs[0], getX(), getAxes());
  out[0] = b.create<MulOp>(loc, g, mask);
  return success();
}
