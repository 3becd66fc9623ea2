//===- DsOps.cpp - ds op verifiers, symbol uses and folders --------------===//
#include "dialects/ds/DsOps.h"
#include "dialects/ds/DsUtils.h"
#include "runtime/plan/VariableNames.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpImplementation.h"

#include <cmath>
#include <optional>

using namespace mlir;
using namespace mlir::ds;

#define GET_OP_CLASSES
#include "dialects/ds/DsOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Model state
//===----------------------------------------------------------------------===//

LogicalResult VariableOp::verify() {
  if (!getTensorType().hasStaticShape())
    return emitOpError("needs a static shape");
  // A variable of no elements has nothing to train, and ops built on it in
  // the backward (an embedding's gradient of a 0-row table) cannot exist.
  if (getTensorType().getNumElements() == 0)
    return emitOpError("holds no elements (shape ")
           << shapeStr(getTensorType().getShape())
           << "): every dimension must be at least 1";
  if (getInit() == InitKind::normal) {
    if (!getStd())
      return emitOpError("init normal needs a std");
    double std = getStd()->convertToDouble();
    if (!(std > 0) || !std::isfinite(std))
      return emitOpError("std must be positive and finite, got ") << std;
  } else if (getStd()) {
    return emitOpError("std is only meaningful with init normal");
  }
  if (getKind() != VariableKind::param && !getOf())
    return emitOpError("a ")
           << stringifyVariableKind(getKind()) << " variable needs `of @param`";
  return success();
}

LogicalResult VariableOp::verifySymbolUses(SymbolTableCollection &symbols) {
  if (!getOf())
    return success();
  Operation *scope = getOperation()->getParentOp();
  if (getKind() == VariableKind::param) {
    // A parameter group's shard (ZeRO stage 3) is `of` the group.
    Operation *group = symbols.lookupNearestSymbolFrom(scope, getOfAttr());
    if (!group || isa<VariableOp>(group))
      return emitOpError("a param can belong only to a parameter group, not ")
             << getOfAttr();
    return success();
  }
  Operation *ownerOp = symbols.lookupNearestSymbolFrom(scope, getOfAttr());
  // Sharded gradients and optimizer state belong to a parameter group
  // (dist.group).
  if (ownerOp && !isa<VariableOp>(ownerOp))
    return success();
  auto owner = dyn_cast_or_null<VariableOp>(ownerOp);
  if (!owner || owner.getKind() != VariableKind::param)
    return emitOpError("`of` must name a param variable, got ") << getOfAttr();
  if (owner.getTensorType().getShape() != getTensorType().getShape())
    return emitOpError("shape differs from its param ") << getOfAttr();
  return success();
}

static LogicalResult verifyVariableUse(Operation *op, FlatSymbolRefAttr name,
                                       Type type,
                                       SymbolTableCollection &symbols) {
  auto var = symbols.lookupNearestSymbolFrom<VariableOp>(op, name);
  if (!var)
    return op->emitOpError("refers to ") << name << ", which is not a variable";
  if (var.getType() != type)
    return op->emitOpError("type ") << type << " does not match variable "
                                    << name << " of type " << var.getType();
  return success();
}

LogicalResult LoadOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyVariableUse(*this, getNameAttr(), getType(), symbols);
}

LogicalResult StoreOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyVariableUse(*this, getNameAttr(), getValue().getType(), symbols);
}

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult IotaOp::verify() {
  auto type = tensorOf(getResult());
  int64_t dim = getDimAttr().getInt(); // signed: the getter is unsigned
  if (dim < 0 || dim >= type.getRank())
    return emitOpError("dim ")
           << dim << " is out of range for rank " << type.getRank();
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult DropoutOp::verify() {
  double rate = getRate().convertToDouble();
  if (!(rate >= 0 && rate < 1)) // NaN too
    return emitOpError("rate must be in [0, 1), got ") << rate;
  if (getParts() < 1)
    return emitOpError("parts must be at least 1, got ") << getParts();
  int64_t rank = tensorOf(getX()).getRank();
  if (getParts() > 1 && (getPartDim() < 0 || getPartDim() >= rank))
    return emitOpError("part_dim must be a dimension of x, got ")
           << getPartDim();
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = tensorOf(getX()), out = tensorOf(getResult());
  if (in.getElementType() != out.getElementType())
    return emitOpError("cannot change the element type");
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ")
           << shapeStr(in.getShape()) << " (" << in.getNumElements()
           << " elements) to " << shapeStr(out.getShape()) << " ("
           << out.getNumElements() << " elements)";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getX().getType() == getType())
    return getX();
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getX()))
    return dense.reshape(cast<ShapedType>(getType()));
  return {};
}

LogicalResult BroadcastOp::verify() {
  auto in = tensorOf(getX()), out = tensorOf(getResult());
  if (in.getElementType() != out.getElementType())
    return emitOpError("cannot change the element type");
  auto shape = broadcastShapes(in.getShape(), out.getShape());
  if (in.getRank() > out.getRank() || !shape ||
      ArrayRef<int64_t>(*shape) != out.getShape())
    return emitOpError("cannot broadcast ")
           << shapeStr(in.getShape()) << " to " << shapeStr(out.getShape());
  return success();
}

//===----------------------------------------------------------------------===//
// Normalizations and position encodings
//===----------------------------------------------------------------------===//

static LogicalResult verifyNormWeight(Operation *op, Value x, Value weight,
                                      StringRef what) {
  auto xt = tensorOf(x), wt = tensorOf(weight);
  if (xt.getRank() < 1)
    return op->emitOpError("x must have rank >= 1");
  if (wt.getRank() != 1 || wt.getDimSize(0) != xt.getShape().back())
    return op->emitOpError()
           << what << " must be [" << xt.getShape().back()
           << "] (the last dimension of x), got " << shapeStr(wt.getShape());
  if (wt.getElementType() != xt.getElementType())
    return op->emitOpError()
           << what << " has element type " << wt.getElementType() << ", x has "
           << xt.getElementType();
  return success();
}

LogicalResult LayerNormOp::verify() {
  if (failed(verifyNormWeight(*this, getX(), getWeight(), "weight")))
    return failure();
  if (getBias() && failed(verifyNormWeight(*this, getX(), getBias(), "bias")))
    return failure();
  if (!(getEps().convertToDouble() >= 0) ||
      !std::isfinite(getEps().convertToDouble()))
    return emitOpError("eps must be non-negative and finite");
  return success();
}

LogicalResult RmsNormOp::verify() {
  if (failed(verifyNormWeight(*this, getX(), getWeight(), "weight")))
    return failure();
  if (!(getEps().convertToDouble() >= 0) ||
      !std::isfinite(getEps().convertToDouble()))
    return emitOpError("eps must be non-negative and finite");
  return success();
}

LogicalResult BiasGeluOp::verify() {
  return verifyNormWeight(*this, getX(), getBias(), "bias");
}

/// A matmul with a bias epilogue: the result is the matmul's, and the bias
/// runs along its last dimension.
static LogicalResult verifyMatmulBias(Operation *op, Value lhs, Value rhs,
                                      Value bias, Value result, bool ta,
                                      bool tb) {
  std::string why;
  auto type = inferMatmulType(lhs, rhs, ta, tb, why);
  if (failed(type))
    return op->emitOpError(why);
  if (*type != result.getType())
    return op->emitOpError("result must be ")
           << *type << " (the matmul's), got " << result.getType();
  auto bt = tensorOf(bias);
  int64_t n = type->getShape().back();
  if (bt.getRank() != 1 || bt.getDimSize(0) != n)
    return op->emitOpError("bias must be [")
           << n << "] (the result's last dimension), got "
           << shapeStr(bt.getShape());
  if (bt.getElementType() != type->getElementType())
    return op->emitOpError("bias has element type ")
           << bt.getElementType() << ", the result has "
           << type->getElementType();
  return success();
}

LogicalResult MatmulBiasOp::verify() {
  return verifyMatmulBias(*this, getLhs(), getRhs(), getBias(), getResult(),
                          getTransposeLhs(), getTransposeRhs());
}

LogicalResult MatmulBiasGeluOp::verify() {
  if (getSum().getType() != getResult().getType())
    return emitOpError("sum and result must have the same type, got ")
           << getSum().getType() << " and " << getResult().getType();
  return verifyMatmulBias(*this, getLhs(), getRhs(), getBias(), getResult(),
                          getTransposeLhs(), getTransposeRhs());
}

LogicalResult MatmulGeluGradOp::verify() {
  std::string why;
  auto type = inferMatmulType(getLhs(), getRhs(), getTransposeLhs(),
                              getTransposeRhs(), why);
  if (failed(type))
    return emitOpError(why);
  for (Value v : {getX(), getGrad()})
    if (v.getType() != *type)
      return emitOpError(v == getX() ? "x" : "grad")
             << " must be " << *type << " (the matmul's), got " << v.getType();
  auto db = tensorOf(getDbias());
  int64_t n = type->getShape().back();
  if (db.getRank() != 1 || db.getDimSize(0) != n ||
      db.getElementType() != type->getElementType())
    return emitOpError("dbias must be ")
           << RankedTensorType::get({n}, type->getElementType())
           << " (the product's last dimension), got " << getDbias().getType();
  return success();
}

LogicalResult AddLayerNormOp::verify() {
  if (failed(verifyNormWeight(*this, getX(), getWeight(), "weight")))
    return failure();
  if (getBias() && failed(verifyNormWeight(*this, getX(), getBias(), "bias")))
    return failure();
  return success();
}

LogicalResult RotaryOp::verify() {
  auto x = tensorOf(getX());
  if (x.getRank() < 2)
    return emitOpError("x must be [..., T, D]");
  if (getSeqMajor() && x.getRank() != 4)
    return emitOpError("x must be [B, T, H, D] with seq_major");
  if (x.getShape().back() % 2)
    return emitOpError("head size ")
           << x.getShape().back() << " must be even to rotate pairs";
  double theta = getTheta().convertToDouble();
  if (!(theta > 0) || !std::isfinite(theta))
    return emitOpError("theta must be positive and finite");
  return success();
}

LogicalResult EmbeddingOp::verify() {
  if (getParts() < 1)
    return emitOpError("parts must be at least 1, got ") << getParts();
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  if (getParts() < 1)
    return emitOpError("parts must be at least 1, got ") << getParts();
  return success();
}

LogicalResult CrossEntropyPartOp::verify() {
  if (getParts() < 1)
    return emitOpError("parts must be at least 1, got ") << getParts();
  if (tensorOf(getRowMax()).getShape() != tensorOf(getTargets()).getShape())
    return emitOpError("row_max must have the targets' shape");
  return success();
}

LogicalResult CrossEntropyPartGradOp::verify() {
  if (getParts() < 1)
    return emitOpError("parts must be at least 1, got ") << getParts();
  if (tensorOf(getGrad()).getRank() != 0)
    return emitOpError("grad must be a scalar");
  auto logits = tensorOf(getLogits());
  ArrayRef<int64_t> rows = tensorOf(getTargets()).getShape();
  if (logits.getRank() < 1 || logits.getShape().drop_back() != rows)
    return emitOpError("targets must have the shape of logits without the "
                       "class dimension");
  if (tensorOf(getRowMax()).getShape() != rows)
    return emitOpError("row_max must have the targets' shape");
  auto stats = tensorOf(getStats());
  if (stats.getRank() < 1 || stats.getDimSize(0) != 2 ||
      stats.getShape().drop_front() != rows)
    return emitOpError("stats must be [2] + the targets' shape");
  return success();
}

LogicalResult CrossEntropyGradOp::verify() {
  if (tensorOf(getGrad()).getRank() != 0)
    return emitOpError("grad must be a scalar");
  auto logits = tensorOf(getLogits());
  if (logits.getRank() < 1 ||
      logits.getShape().drop_back() != tensorOf(getTargets()).getShape())
    return emitOpError("targets must have the shape of logits without the "
                       "class dimension");
  return success();
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

LogicalResult ds::verifyOptimizerUpdate(Operation *op) {
  unsigned states = op->getNumResults() - 1;
  if (op->getNumResults() < 1 || op->getNumOperands() < states + 5)
    return op->emitOpError("an optimizer update takes param, grad, one state "
                           "per result after the first, lr, step and scale");
  Type param = op->getOperand(0).getType();
  for (unsigned i = 0; i < states; ++i)
    if (op->getOperand(2 + i).getType() != param)
      return op->emitOpError("state ") << i << " is not of the param's type";
  if (tensorOf(op->getOperand(1)).getShape() !=
      tensorOf(op->getOperand(0)).getShape())
    return op->emitOpError("grad shape ")
           << shapeStr(tensorOf(op->getOperand(1)).getShape())
           << " differs from param shape "
           << shapeStr(tensorOf(op->getOperand(0)).getShape());
  return success();
}

Operation *ds::cloneUpdateOver(Operation *op, OpBuilder &b, Location loc,
                               Value param, Value grad, ValueRange states) {
  OperationState state(loc, op->getName());
  state.addOperands({param, grad});
  state.addOperands(states);
  // lr, step, scale and the update's own scalars
  state.addOperands(op->getOperands().drop_front(op->getNumResults() + 1));
  state.addTypes(SmallVector<Type>(op->getNumResults(), param.getType()));
  state.addAttributes(op->getAttrs());
  return b.create(state);
}

namespace {
/// The checks the Adam-like updates share: betas in [0, 1), and eps
/// positive and finite where the rule has one.
LogicalResult verifyBetasAndEps(Operation *op, APFloat beta1, APFloat beta2,
                                std::optional<APFloat> eps) {
  for (double beta : {beta1.convertToDouble(), beta2.convertToDouble()})
    if (!(beta >= 0 && beta < 1)) // NaN too
      return op->emitOpError("betas must be in [0, 1)");
  if (eps &&
      (!(eps->convertToDouble() > 0) || !std::isfinite(eps->convertToDouble())))
    return op->emitOpError("eps must be positive and finite");
  return success();
}
/// A sharded Lamb's per-member norms: two f32 sums per member, each member
/// at least one element.
LogicalResult verifyLambShard(Operation *op, Type normsType,
                              ArrayRef<int64_t> members) {
  auto norms = cast<ShapedType>(normsType);
  if (members.empty() || llvm::any_of(members, [](int64_t n) { return n < 1; }))
    return op->emitOpError("members must be one or more positive counts");
  if (norms.getRank() != 1 || !norms.getElementType().isF32() ||
      norms.getDimSize(0) != 2 * int64_t(members.size()))
    return op->emitOpError("norms must be f32 of 2 x members (")
           << 2 * members.size() << ") elements";
  return success();
}
} // namespace

SmallVector<StringRef> AdamWOp::getStateSuffixes() {
  return {dsc::plan::kExpAvgSuffix, dsc::plan::kExpAvgSqSuffix};
}

bool AdamWOp::decaysWeights() {
  return getWeightDecay().convertToDouble() != 0;
}

LogicalResult AdamWOp::verify() {
  return verifyBetasAndEps(*this, getBeta1(), getBeta2(), getEps());
}

SmallVector<StringRef> SgdOp::getStateSuffixes() {
  return {dsc::plan::kMomentumBufferSuffix};
}

bool SgdOp::decaysWeights() { return getWeightDecay().convertToDouble() != 0; }

LogicalResult SgdOp::verify() {
  double momentum = getMomentum().convertToDouble();
  double dampening = getDampening().convertToDouble();
  if (!(momentum >= 0) || !std::isfinite(momentum))
    return emitOpError("momentum must be >= 0 and finite");
  if (!std::isfinite(dampening))
    return emitOpError("dampening must be finite");
  // PyTorch's rule: Nesterov momentum needs momentum and no dampening.
  if (getNesterov() && (momentum <= 0 || dampening != 0))
    return emitOpError("nesterov needs momentum > 0 and dampening 0");
  double decay = getWeightDecay().convertToDouble();
  if (!(decay >= 0) || !std::isfinite(decay))
    return emitOpError("weight_decay must be >= 0 and finite");
  return success();
}

SmallVector<StringRef> LionOp::getStateSuffixes() {
  return {dsc::plan::kExpAvgSuffix};
}

bool LionOp::decaysWeights() { return getWeightDecay().convertToDouble() != 0; }

LogicalResult LionOp::verify() {
  if (failed(verifyBetasAndEps(*this, getBeta1(), getBeta2(), std::nullopt)))
    return failure();
  double decay = getWeightDecay().convertToDouble();
  if (!(decay >= 0) || !std::isfinite(decay))
    return emitOpError("weight_decay must be >= 0 and finite");
  return success();
}

SmallVector<StringRef> LambOp::getStateSuffixes() {
  return {dsc::plan::kExpAvgSuffix, dsc::plan::kExpAvgSqSuffix};
}

bool LambOp::decaysWeights() { return getWeightDecay().convertToDouble() != 0; }

LogicalResult LambOp::verify() {
  if (failed(verifyBetasAndEps(*this, getBeta1(), getBeta2(), getEps())))
    return failure();
  double decay = getWeightDecay().convertToDouble();
  if (!(decay >= 0) || !std::isfinite(decay))
    return emitOpError("weight_decay must be >= 0 and finite");
  double lo = getMinCoeff().convertToDouble();
  double hi = getMaxCoeff().convertToDouble();
  if (!(lo > 0) || !(hi >= lo) || !std::isfinite(hi))
    return emitOpError("coeff needs 0 < min_coeff <= max_coeff, finite");
  if (bool(getNorms()) != bool(getMembers()))
    return emitOpError("takes norms and members together or neither");
  if (getNorms())
    return verifyLambShard(*this, getNorms().getType(), *getMembers());
  return success();
}

LogicalResult LambNormsOp::verify() {
  if (failed(verifyBetasAndEps(*this, getBeta1(), getBeta2(), getEps())))
    return failure();
  double decay = getWeightDecay().convertToDouble();
  if (!(decay >= 0) || !std::isfinite(decay))
    return emitOpError("weight_decay must be >= 0 and finite");
  return verifyLambShard(*this, getResult().getType(), getMembers());
}

SmallVector<StringRef> MuonOp::getStateSuffixes() {
  return {dsc::plan::kMomentumBufferSuffix};
}

bool MuonOp::decaysWeights() { return getWeightDecay().convertToDouble() != 0; }

namespace {
/// Muon's momentum in [0, 1) (torch's lerp weight 1 - momentum).
LogicalResult verifyMomentum(Operation *op, APFloat momentum) {
  double m = momentum.convertToDouble();
  if (!(m >= 0 && m < 1))
    return op->emitOpError("momentum must be in [0, 1)");
  return success();
}
} // namespace

LogicalResult MuonOp::verify() {
  if (failed(verifyMomentum(*this, getMomentum())))
    return failure();
  double decay = getWeightDecay().convertToDouble();
  if (!(decay >= 0) || !std::isfinite(decay))
    return emitOpError("weight_decay must be >= 0 and finite");
  if (getNsSteps() < 1 || getNsSteps() > 100)
    return emitOpError("ns_steps must be in [1, 100]");
  auto t = cast<RankedTensorType>(getParam().getType());
  if (t.getRank() < 2 || t.getNumElements() == 0)
    return emitOpError("updates a matrix: the parameter needs rank >= 2 and "
                       "elements, got ")
           << t;
  if (getHeads() < 1 || t.getDimSize(0) % getHeads() != 0)
    return emitOpError("heads must be >= 1 and divide the ")
           << t.getDimSize(0) << " rows, got " << getHeads();
  return success();
}

LogicalResult MuonMomentumOp::verify() {
  if (getGrad().getType().getShape() != getBuf().getType().getShape())
    return emitOpError("grad and buf must have one shape");
  return verifyMomentum(*this, getMomentum());
}

LogicalResult MuonApplyOp::verify() {
  if (getOrtho().getType().getShape() != getParam().getType().getShape())
    return emitOpError("ortho and param must have one shape");
  double decay = getWeightDecay().convertToDouble();
  double factor = getFactor().convertToDouble();
  if (!(decay >= 0) || !std::isfinite(decay))
    return emitOpError("weight_decay must be >= 0 and finite");
  if (!(factor >= 1) || !std::isfinite(factor))
    return emitOpError("factor must be >= 1 and finite");
  return success();
}

SmallVector<StringRef> AdagradOp::getStateSuffixes() {
  return {dsc::plan::kSumSuffix};
}

bool AdagradOp::decaysWeights() {
  return getWeightDecay().convertToDouble() != 0;
}

LogicalResult AdagradOp::verify() {
  double lrDecay = getLrDecay().convertToDouble();
  double eps = getEps().convertToDouble();
  double decay = getWeightDecay().convertToDouble();
  if (!(lrDecay >= 0) || !std::isfinite(lrDecay))
    return emitOpError("lr_decay must be >= 0 and finite");
  if (!(eps > 0) || !std::isfinite(eps))
    return emitOpError("eps must be positive and finite");
  if (!(decay >= 0) || !std::isfinite(decay))
    return emitOpError("weight_decay must be >= 0 and finite");
  return success();
}
