//===- DsShapes.cpp - result-type inference of ds ops --------------------===//
//
// Each shape rule lives here once: the parser, the builders and the verifier
// all go through inferReturnTypes, so an invalid op reports the rule it broke.
//
//===----------------------------------------------------------------------===//

#include "dialects/ds/DsOps.h"
#include "dialects/ds/DsUtils.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::ds;

std::optional<SmallVector<int64_t>>
mlir::ds::broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::string mlir::ds::shapeStr(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::interleave(shape, os, "x");
  return s;
}

static LogicalResult inferBroadcast(std::optional<Location> loc, Value lhs,
                                    Value rhs,
                                    SmallVectorImpl<Type> &inferred) {
  auto a = tensorOf(lhs), b = tensorOf(rhs);
  if (a.getElementType() != b.getElementType())
    return emitOptionalError(loc, "operands have different element types ",
                             a.getElementType(), " and ", b.getElementType());
  auto shape = broadcastShapes(a.getShape(), b.getShape());
  if (!shape)
    return emitOptionalError(loc, "operand shapes ", shapeStr(a.getShape()),
                             " and ", shapeStr(b.getShape()),
                             " are not broadcast-compatible");
  inferred.push_back(RankedTensorType::get(*shape, a.getElementType()));
  return success();
}

#define DS_BROADCAST_INFERENCE(OP)                                             \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> l, \
                                     Adaptor a, SmallVectorImpl<Type> &out) {  \
    return inferBroadcast(l, a.getLhs(), a.getRhs(), out);                     \
  }
DS_BROADCAST_INFERENCE(AddOp)
DS_BROADCAST_INFERENCE(SubOp)
DS_BROADCAST_INFERENCE(MulOp)
DS_BROADCAST_INFERENCE(DivOp)
DS_BROADCAST_INFERENCE(MinimumOp)
DS_BROADCAST_INFERENCE(MaximumOp)
DS_BROADCAST_INFERENCE(EqualOp)
#undef DS_BROADCAST_INFERENCE

FailureOr<RankedTensorType> mlir::ds::inferMatmulType(Value lhs, Value rhs,
                                                      bool transposeLhs,
                                                      bool transposeRhs,
                                                      std::string &why) {
  auto a = tensorOf(lhs), b = tensorOf(rhs);
  llvm::raw_string_ostream os(why);
  if (a.getRank() < 2 || b.getRank() < 2) {
    os << "operands must have rank >= 2, got " << shapeStr(a.getShape())
       << " and " << shapeStr(b.getShape());
    return failure();
  }
  if (a.getElementType() != b.getElementType()) {
    os << "operands have different element types '" << a.getElementType()
       << "' and '" << b.getElementType() << "'";
    return failure();
  }
  int64_t ra = a.getRank(), rb = b.getRank();
  bool ta = transposeLhs, tb = transposeRhs;
  int64_t m = a.getDimSize(ta ? ra - 1 : ra - 2);
  int64_t ka = a.getDimSize(ta ? ra - 2 : ra - 1);
  int64_t kb = b.getDimSize(tb ? rb - 1 : rb - 2);
  int64_t n = b.getDimSize(tb ? rb - 2 : rb - 1);
  if (ka != kb) {
    os << "contracting dimensions differ: lhs has " << ka << ", rhs has " << kb;
    return failure();
  }
  auto batch =
      broadcastShapes(a.getShape().drop_back(2), b.getShape().drop_back(2));
  if (!batch) {
    os << "batch dimensions " << shapeStr(a.getShape().drop_back(2)) << " and "
       << shapeStr(b.getShape().drop_back(2))
       << " are not broadcast-compatible";
    return failure();
  }
  batch->push_back(m);
  batch->push_back(n);
  return RankedTensorType::get(*batch, a.getElementType());
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  std::string why;
  auto type = inferMatmulType(adaptor.getLhs(), adaptor.getRhs(),
                              adaptor.getTransposeLhs(),
                              adaptor.getTransposeRhs(), why);
  if (failed(type))
    return emitOptionalError(loc, why);
  inferred.push_back(*type);
  return success();
}

bool mlir::ds::isSeqMajor(Operation *op) {
  if (auto a = dyn_cast<AttentionOp>(op))
    return a.getSeqMajor();
  if (auto g = dyn_cast<AttentionGradOp>(op))
    return g.getSeqMajor();
  if (auto r = dyn_cast<RotaryOp>(op))
    return r.getSeqMajor();
  return false;
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto q = tensorOf(adaptor.getQ()), k = tensorOf(adaptor.getK()),
       v = tensorOf(adaptor.getV());
  const bool seqMajor = bool(adaptor.getSeqMajor());
  const AttentionAxes ax = attentionAxes(seqMajor);
  if (q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4)
    return emitOptionalError(loc, "q, k and v must be ",
                             seqMajor ? "[B, T, H, D]" : "[B, H, T, D]");
  if (q.getElementType() != k.getElementType() ||
      q.getElementType() != v.getElementType())
    return emitOptionalError(loc, "q, k and v have different element types");
  auto qs = q.getShape(), ks = k.getShape(), vs = v.getShape();
  const int64_t h = ax.heads, t = ax.seq;
  if (qs[0] != ks[0] || qs[0] != vs[0] || qs[h] != ks[h] || qs[h] != vs[h])
    return emitOptionalError(loc, "batch and head dimensions differ: q is ",
                             shapeStr(qs), ", k is ", shapeStr(ks), ", v is ",
                             shapeStr(vs));
  if (qs[3] != ks[3])
    return emitOptionalError(loc, "q and k head sizes differ: ", qs[3], " vs ",
                             ks[3]);
  if (ks[t] != vs[t])
    return emitOptionalError(loc, "k and v sequence lengths differ: ", ks[t],
                             " vs ", vs[t]);
  inferred.push_back(
      RankedTensorType::get({qs[0], qs[1], qs[2], vs[3]}, q.getElementType()));
  return success();
}

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto table = tensorOf(adaptor.getTable());
  auto idx = tensorOf(adaptor.getIndices());
  if (table.getRank() != 2)
    return emitOptionalError(loc, "table must be [V, C], got ",
                             shapeStr(table.getShape()));
  SmallVector<int64_t> shape(idx.getShape());
  shape.push_back(table.getDimSize(1));
  inferred.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

LogicalResult
EmbeddingGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &inferred) {
  auto idx = tensorOf(adaptor.getIndices());
  auto grad = tensorOf(adaptor.getGrad());
  if (grad.getRank() != idx.getRank() + 1 ||
      grad.getShape().drop_back() != idx.getShape())
    return emitOptionalError(loc, "grad must be indices' shape + [C], got ",
                             shapeStr(grad.getShape()), " for indices ",
                             shapeStr(idx.getShape()));
  // The attribute's signed value: an I64Attr's getter is unsigned.
  int64_t vocab = adaptor.getVocabSizeAttr().getInt();
  if (vocab <= 0)
    return emitOptionalError(loc, "vocab must be positive");
  inferred.push_back(RankedTensorType::get({vocab, grad.getShape().back()},
                                           grad.getElementType()));
  return success();
}

/// A loss's targets: the logits' shape without the class dimension.
static LogicalResult checkTargetsOfLogits(std::optional<Location> loc,
                                          RankedTensorType logits,
                                          RankedTensorType targets) {
  if (logits.getRank() >= 1 &&
      logits.getShape().drop_back() == targets.getShape())
    return success();
  return emitOptionalError(loc, "targets must have the shape of logits ",
                           "without the class dimension: logits are ",
                           shapeStr(logits.getShape()), ", targets are ",
                           shapeStr(targets.getShape()));
}

LogicalResult
CrossEntropyOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                 Adaptor adaptor,
                                 SmallVectorImpl<Type> &inferred) {
  auto logits = tensorOf(adaptor.getLogits());
  auto targets = tensorOf(adaptor.getTargets());
  if (failed(checkTargetsOfLogits(loc, logits, targets)))
    return failure();
  // The loss is fp32 for 16-bit logits: mixed precision reduces it in fp32
  // and reports it unrounded.
  Type elt = logits.getElementType();
  if (elt.isF16() || elt.isBF16())
    elt = Float32Type::get(elt.getContext());
  inferred.push_back(RankedTensorType::get({}, elt));
  return success();
}

// h [..., D], weight [V, D], targets h's shape without D, grad a scalar;
// chunk_rows divides the rows: the loss (as cross_entropy's), dh like h,
// dweight like weight and the chunk [chunk_rows, V].
LogicalResult LinearCrossEntropyOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto h = tensorOf(adaptor.getH());
  auto weight = tensorOf(adaptor.getWeight());
  auto targets = tensorOf(adaptor.getTargets());
  if (h.getRank() < 1 || weight.getRank() != 2 ||
      weight.getDimSize(1) != h.getDimSize(h.getRank() - 1) ||
      h.getElementType() != weight.getElementType())
    return emitOptionalError(loc,
                             "weight must be [V, D] for h [..., D] of "
                             "its element type: h is ",
                             shapeStr(h.getShape()), ", weight is ",
                             shapeStr(weight.getShape()));
  if (h.getShape().drop_back() != targets.getShape())
    return emitOptionalError(loc,
                             "targets must have the shape of h without "
                             "its last dimension: h is ",
                             shapeStr(h.getShape()), ", targets are ",
                             shapeStr(targets.getShape()));
  if (tensorOf(adaptor.getGrad()).getRank() != 0)
    return emitOptionalError(loc, "grad must be a scalar");
  const int64_t rows = targets.getNumElements();
  const int64_t chunk = adaptor.getChunkRows();
  if (chunk < 1 || rows % chunk != 0)
    return emitOptionalError(loc, "chunk_rows ", chunk, " must divide the ",
                             rows, " rows");
  // A 16-bit head's loss and weight gradient are f32 (DsFusedLossOps.td).
  Type elt = h.getElementType();
  Type wide =
      elt.getIntOrFloatBitWidth() < 32 ? Float32Type::get(h.getContext()) : elt;
  inferred.push_back(RankedTensorType::get({}, wide));
  inferred.push_back(h);
  inferred.push_back(weight.clone(wide));
  inferred.push_back(RankedTensorType::get({chunk, weight.getDimSize(0)}, elt));
  return success();
}

LogicalResult CrossEntropyPartOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto logits = tensorOf(adaptor.getLogits());
  auto targets = tensorOf(adaptor.getTargets());
  if (failed(checkTargetsOfLogits(loc, logits, targets)))
    return failure();
  // fp32 statistics for 16-bit logits, as ds.cross_entropy's loss.
  SmallVector<int64_t> shape{2};
  llvm::append_range(shape, targets.getShape());
  inferred.push_back(RankedTensorType::get(shape, Float32Type::get(ctx)));
  return success();
}

LogicalResult CrossEntropyPartLossOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  auto stats = tensorOf(adaptor.getStats());
  auto targets = tensorOf(adaptor.getTargets());
  if (stats.getRank() < 1 || stats.getDimSize(0) != 2 ||
      stats.getShape().drop_front() != targets.getShape())
    return emitOptionalError(loc, "stats must be [2] + targets' shape, got ",
                             shapeStr(stats.getShape()), " for targets ",
                             shapeStr(targets.getShape()));
  inferred.push_back(RankedTensorType::get({}, Float32Type::get(ctx)));
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  auto x = tensorOf(adaptor.getX());
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  SmallVector<bool> seen(x.getRank(), false);
  bool valid = static_cast<int64_t>(perm.size()) == x.getRank();
  for (int64_t p : perm) {
    if (!valid || p < 0 || p >= x.getRank() || seen[p]) {
      valid = false;
      break;
    }
    seen[p] = true;
  }
  if (!valid)
    return emitOptionalError(
        loc, "permutation [", llvm::make_range(perm.begin(), perm.end()),
        "] is not a permutation of ", x.getRank(), " dimensions");
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(x.getDimSize(p));
  inferred.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto x = tensorOf(adaptor.getX());
  ArrayRef<int64_t> offsets = adaptor.getOffsets(), sizes = adaptor.getSizes();
  if (static_cast<int64_t>(offsets.size()) != x.getRank() ||
      static_cast<int64_t>(sizes.size()) != x.getRank())
    return emitOptionalError(loc,
                             "offsets and sizes need one entry per "
                             "dimension (",
                             x.getRank(), ")");
  for (int64_t d = 0; d < x.getRank(); ++d)
    if (offsets[d] < 0 || sizes[d] < 0 ||
        offsets[d] + sizes[d] > x.getDimSize(d))
      return emitOptionalError(loc, "slice [", offsets[d], ", ",
                               offsets[d] + sizes[d], ") of dimension ", d,
                               " is outside [0, ", x.getDimSize(d), ")");
  inferred.push_back(RankedTensorType::get(sizes, x.getElementType()));
  return success();
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  auto x = tensorOf(adaptor.getX());
  ArrayRef<int64_t> low = adaptor.getLow(), high = adaptor.getHigh();
  if (static_cast<int64_t>(low.size()) != x.getRank() ||
      static_cast<int64_t>(high.size()) != x.getRank())
    return emitOptionalError(loc,
                             "low and high need one entry per "
                             "dimension (",
                             x.getRank(), ")");
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < x.getRank(); ++d) {
    if (low[d] < 0 || high[d] < 0)
      return emitOptionalError(loc, "padding must be non-negative");
    shape.push_back(low[d] + x.getDimSize(d) + high[d]);
  }
  inferred.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  ValueRange inputs = adaptor.getInputs();
  if (inputs.empty())
    return emitOptionalError(loc, "needs at least one input");
  auto first = tensorOf(inputs[0]);
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= first.getRank())
    return emitOptionalError(loc, "axis ", axis, " is out of range for rank ",
                             first.getRank());
  SmallVector<int64_t> shape(first.getShape());
  shape[axis] = 0;
  for (Value in : inputs) {
    auto t = tensorOf(in);
    if (t.getElementType() != first.getElementType() ||
        t.getRank() != first.getRank())
      return emitOptionalError(loc, "inputs differ in rank or element type");
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != axis && t.getDimSize(d) != first.getDimSize(d))
        return emitOptionalError(loc, "inputs differ in dimension ", d, " (",
                                 shapeStr(first.getShape()), " vs ",
                                 shapeStr(t.getShape()), ")");
    shape[axis] += t.getDimSize(axis);
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  auto x = tensorOf(adaptor.getX());
  int64_t axis = adaptor.getAxis();
  if (axis < 0 || axis >= x.getRank())
    return emitOptionalError(loc, "axis ", axis, " is out of range for rank ",
                             x.getRank());
  int64_t total = 0;
  for (int64_t s : adaptor.getSizes()) {
    if (s < 0)
      return emitOptionalError(loc, "sizes must be non-negative");
    total += s;
  }
  if (total != x.getDimSize(axis))
    return emitOptionalError(loc, "sizes add up to ", total, " but dimension ",
                             axis, " has ", x.getDimSize(axis));
  for (int64_t s : adaptor.getSizes()) {
    SmallVector<int64_t> shape(x.getShape());
    shape[axis] = s;
    inferred.push_back(RankedTensorType::get(shape, x.getElementType()));
  }
  return success();
}

static LogicalResult inferReduce(std::optional<Location> loc, Value xv,
                                 ArrayRef<int64_t> axes, bool keepdim,
                                 SmallVectorImpl<Type> &inferred) {
  auto x = tensorOf(xv);
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] < 0 || axes[i] >= x.getRank() || (i && axes[i] <= axes[i - 1]))
      return emitOptionalError(loc, "axes must be increasing and in [0, ",
                               x.getRank(), ")");
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < x.getRank(); ++d) {
    if (!llvm::is_contained(axes, d))
      shape.push_back(x.getDimSize(d));
    else if (keepdim)
      shape.push_back(1);
  }
  inferred.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

#define DS_REDUCE_INFERENCE(OP)                                                \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> l, \
                                     Adaptor a, SmallVectorImpl<Type> &out) {  \
    return inferReduce(l, a.getX(), a.getAxes(), a.getKeepdim(), out);         \
  }
DS_REDUCE_INFERENCE(ReduceSumOp)
DS_REDUCE_INFERENCE(ReduceMeanOp)
DS_REDUCE_INFERENCE(ReduceMaxOp)
#undef DS_REDUCE_INFERENCE
