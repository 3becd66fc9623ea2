//===- InterpreterOps.cpp - one reference kernel call per ds op ----------===//
//
// evaluateOp maps each stateless ds op onto its float64 reference kernel:
// attributes become kernel parameters, operands are passed in operand order.
// Grouped as in DsOps.td. Rounding to the result types is the caller's job.
//
//===----------------------------------------------------------------------===//

#include "compiler/interpreter/AttentionOps.h"
#include "compiler/interpreter/Interpreter.h"

#include "dialects/ds/DsOps.h"
#include "dialects/ds/DsUtils.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>
#include <string>

using namespace mlir;
using namespace mlir::ds;
using dsc::EvalContext;
namespace ref = dsc::ref;

namespace {

using Tensors = std::vector<ref::Tensor>;
using Outcome = ref::Result<Tensors>;
using Operands = llvm::ArrayRef<const ref::Tensor *>;

ref::Error error(const llvm::Twine &message) {
  return ref::Error{message.str()};
}

Outcome one(ref::Result<ref::Tensor> r) {
  if (!r)
    return ref::Error{r.error};
  Tensors out;
  out.push_back(std::move(r.value));
  return out;
}

ref::Shape shapeOf(Value v) {
  auto shape = cast<RankedTensorType>(v.getType()).getShape();
  return ref::Shape(shape.begin(), shape.end());
}

std::vector<int64_t> toVector(ArrayRef<int64_t> values) {
  return std::vector<int64_t>(values.begin(), values.end());
}

/// An op that computes one tensor-parallel rank's part of a value (its
/// place in the group is not known here: the interpreter runs whole
/// values).
Outcome notOnePart(Operation *op, int64_t parts) {
  std::string what = parts > 1
                         ? " over one of " + std::to_string(parts) + " parts"
                         : " (a vocabulary-parallel loss)";
  return error("interpreter: " + op->getName().getStringRef() + what +
               " is not interpreted");
}

/// The value of a rank-0 (single element) operand.
ref::Result<double> scalarOf(const ref::Tensor &t, StringRef what) {
  if (t.data.size() != 1 || !t.shape.empty())
    return error("interpreter: " + what + " must be a scalar, got shape " +
                 ref::shapeToString(t.shape));
  return t.data[0];
}

//===----------------------------------------------------------------------===//
// Constants and index generation
//===----------------------------------------------------------------------===//

Outcome constant(ConstantOp op) {
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense)
    return error("interpreter: ds.constant holds a non-dense attribute; "
                 "only dense elements (splat or not) are supported");
  ref::Tensor t(shapeOf(op.getResult()));
  Type elt = dense.getElementType();
  if (isa<FloatType>(elt)) {
    if (dense.isSplat()) {
      std::fill(t.data.begin(), t.data.end(),
                dense.getSplatValue<APFloat>().convertToDouble());
    } else {
      size_t i = 0;
      for (const APFloat &v : dense.getValues<APFloat>())
        t.data[i++] = v.convertToDouble();
    }
  } else if (auto intType = dyn_cast<IntegerType>(elt)) {
    auto toDouble = [&](const APInt &v) {
      return intType.isUnsigned() ? double(v.getZExtValue())
                                  : double(v.getSExtValue());
    };
    if (dense.isSplat()) {
      std::fill(t.data.begin(), t.data.end(),
                toDouble(dense.getSplatValue<APInt>()));
    } else {
      size_t i = 0;
      for (const APInt &v : dense.getValues<APInt>())
        t.data[i++] = toDouble(v);
    }
  } else {
    return error("interpreter: ds.constant of unsupported element type");
  }
  Tensors out;
  out.push_back(std::move(t));
  return out;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

Outcome binary(ref::BinaryKind kind, Operands in) {
  return one(ref::binary(kind, *in[0], *in[1]));
}

Outcome unary(ref::UnaryKind kind, Operands in) {
  return one(ref::unary(kind, *in[0]));
}

Outcome castOp(CastOp op, Operands in, const EvalContext &ctx) {
  if (!ctx.round)
    return one(*in[0]);
  std::optional<ref::DType> dtype =
      dsc::dtypeOf(op.getResult().getType().getElementType());
  if (!dtype)
    return error("interpreter: ds.cast to a non-float type");
  return one(ref::cast(*in[0], *dtype));
}

Outcome dropout(DropoutOp op, Operands in, const EvalContext &ctx) {
  int64_t id = op.getId();
  if (id < 0 || id > int64_t(std::numeric_limits<uint32_t>::max()))
    return error("interpreter: dropout id " + llvm::Twine(id) +
                 " does not fit the 32-bit RNG stream");
  if (op.getParts() > 1) // one rank's part: the interpreter runs whole values
    return error("interpreter: dropout over one of " +
                 llvm::Twine(op.getParts()) +
                 " parts (sequence parallelism) is not interpreted");
  return one(ref::dropout(*in[0], op.getRate().convertToDouble(), ctx.seed,
                          uint32_t(id), ctx.step,
                          ctx.sampleOffset + uint64_t(op.getSampleOffset())));
}

//===----------------------------------------------------------------------===//
// Contractions and normalizations
//===----------------------------------------------------------------------===//

Outcome layerNorm(LayerNormOp op, Operands in) {
  const ref::Tensor *bias = op.getBias() ? in[2] : nullptr;
  return one(
      ref::layer_norm(*in[0], in[1], bias, op.getEps().convertToDouble()));
}

ref::Tensor roundLike(ref::Tensor t, Value like, const EvalContext &ctx) {
  std::optional<ref::DType> dtype =
      dsc::dtypeOf(cast<ShapedType>(like.getType()).getElementType());
  if (ctx.round && dtype)
    for (double &v : t.data)
      v = ref::roundToDType(v, *dtype);
  return t;
}

// Fused ops compute exactly what their unfused pair would: the sum first
// (rounded like any result), then the consumer on it.
template <class Op>
Outcome sumThenGelu(Op op, ref::Result<ref::Tensor> sum,
                    const EvalContext &ctx) {
  if (!sum)
    return ref::Error{sum.error};
  ref::Tensor s = roundLike(std::move(sum.value), op.getSum(), ctx);
  auto out = ref::unary(op.getApproximate() == GeluApproximation::tanh
                            ? ref::UnaryKind::GeluTanh
                            : ref::UnaryKind::GeluErf,
                        s);
  if (!out)
    return ref::Error{out.error};
  Tensors results;
  results.push_back(std::move(s));
  results.push_back(std::move(out.value));
  return results;
}

Outcome biasGelu(BiasGeluOp op, Operands in, const EvalContext &ctx) {
  return sumThenGelu(op, ref::binary(ref::BinaryKind::Add, *in[0], *in[1]),
                     ctx);
}

// The product rounded like ds.matmul's result, then the bias as ds.add.
ref::Result<ref::Tensor> matmulPlusBias(Value result, bool ta, bool tb,
                                        Operands in, const EvalContext &ctx) {
  auto product = ref::matmul(*in[0], *in[1], ta, tb);
  if (!product)
    return product;
  ref::Tensor p = roundLike(std::move(product.value), result, ctx);
  return ref::binary(ref::BinaryKind::Add, p, *in[2]);
}

Outcome matmulBias(MatmulBiasOp op, Operands in, const EvalContext &ctx) {
  auto sum = matmulPlusBias(op.getResult(), op.getTransposeLhs(),
                            op.getTransposeRhs(), in, ctx);
  if (!sum)
    return ref::Error{sum.error};
  Tensors results;
  results.push_back(std::move(sum.value));
  return results;
}

Outcome matmulBiasGelu(MatmulBiasGeluOp op, Operands in,
                       const EvalContext &ctx) {
  return sumThenGelu(op,
                     matmulPlusBias(op.getResult(), op.getTransposeLhs(),
                                    op.getTransposeRhs(), in, ctx),
                     ctx);
}

Outcome matmulGeluGrad(MatmulGeluGradOp op, Operands in,
                       const EvalContext &ctx) {
  auto product =
      ref::matmul(*in[0], *in[1], op.getTransposeLhs(), op.getTransposeRhs());
  if (!product)
    return ref::Error{product.error};
  ref::Tensor p = roundLike(std::move(product.value), op.getGrad(), ctx);
  auto grad =
      ref::gelu_grad(*in[2], p, op.getApproximate() == GeluApproximation::tanh);
  if (!grad)
    return ref::Error{grad.error};
  ref::Tensor g = roundLike(std::move(grad.value), op.getGrad(), ctx);
  std::vector<int64_t> axes;
  for (int64_t d = 0; d + 1 < int64_t(g.shape.size()); ++d)
    axes.push_back(d);
  auto dbias = ref::reduce(ref::ReduceKind::Sum, g, axes, false);
  if (!dbias)
    return ref::Error{dbias.error};
  Tensors results;
  results.push_back(std::move(g));
  results.push_back(roundLike(std::move(dbias.value), op.getDbias(), ctx));
  return results;
}

Outcome addLayerNorm(AddLayerNormOp op, Operands in, const EvalContext &ctx) {
  auto sum = ref::binary(ref::BinaryKind::Add, *in[0], *in[1]);
  if (!sum)
    return ref::Error{sum.error};
  ref::Tensor s = roundLike(std::move(sum.value), op.getSum(), ctx);
  const ref::Tensor *bias = op.getBias() ? in[3] : nullptr;
  auto out = ref::layer_norm(s, in[2], bias, op.getEps().convertToDouble());
  if (!out)
    return ref::Error{out.error};
  Tensors results;
  results.push_back(std::move(s));
  results.push_back(std::move(out.value));
  return results;
}

Outcome layerNormGrad(LayerNormGradOp op, Operands in) {
  auto r = ref::layer_norm_grad(*in[0], in[1], *in[2],
                                op.getEps().convertToDouble());
  if (!r)
    return ref::Error{r.error};
  Tensors out;
  out.push_back(std::move(r.value.dx));
  out.push_back(std::move(r.value.dw));
  out.push_back(std::move(r.value.db));
  return out;
}

Outcome rmsNormGrad(RmsNormGradOp op, Operands in) {
  auto r =
      ref::rms_norm_grad(*in[0], in[1], *in[2], op.getEps().convertToDouble());
  if (!r)
    return ref::Error{r.error};
  Tensors out;
  out.push_back(std::move(r.value.dx));
  out.push_back(std::move(r.value.dw));
  return out;
}

//===----------------------------------------------------------------------===//
// Lookup and loss
//===----------------------------------------------------------------------===//

Outcome crossEntropyGrad(CrossEntropyGradOp op, Operands in) {
  ref::Result<double> g = scalarOf(*in[2], "cross_entropy_grad's grad");
  if (!g)
    return ref::Error{g.error};
  return one(
      ref::cross_entropy_grad(*in[0], *in[1], g.value, op.getIgnoreIndex()));
}

// The unfused ops' values, each rounded to its type as theirs would be;
// the chunk is g's last chunk_rows rows.
Outcome linearCrossEntropy(LinearCrossEntropyOp op, Operands in,
                           const EvalContext &ctx) {
  ref::Result<double> g = scalarOf(*in[3], "linear_cross_entropy's grad");
  if (!g)
    return ref::Error{g.error};
  auto product = ref::matmul(*in[0], *in[1], false, true);
  if (!product)
    return ref::Error{product.error};
  const ref::Tensor logits =
      roundLike(std::move(product.value), op.getH(), ctx);
  const int64_t ignore = op.getIgnoreIndex();
  auto loss = ref::cross_entropy(logits, *in[2], ignore);
  auto grad = ref::cross_entropy_grad(logits, *in[2], g.value, ignore);
  if (!loss || !grad)
    return ref::Error{loss ? grad.error : loss.error};
  const ref::Tensor dl = roundLike(std::move(grad.value), op.getH(), ctx);
  const int64_t V = in[1]->shape[0], D = in[1]->shape[1];
  const int64_t rows = int64_t(dl.data.size()) / std::max<int64_t>(V, 1);
  auto flatG = ref::reshape(dl, {rows, V});
  auto flatH = ref::reshape(*in[0], {rows, D});
  auto dh = ref::matmul(dl, *in[1], false, false);
  if (!flatG || !flatH || !dh)
    return ref::Error{!flatG ? flatG.error : !flatH ? flatH.error : dh.error};
  auto dweight = ref::matmul(flatG.value, flatH.value, true, false);
  if (!dweight)
    return ref::Error{dweight.error};
  const int64_t chunk = op.getChunkRows();
  ref::Tensor last = flatG.value;
  last.shape = {chunk, V};
  last.data.erase(last.data.begin(), last.data.end() - chunk * V);
  Tensors out;
  out.push_back(std::move(loss.value));
  out.push_back(std::move(dh.value));
  out.push_back(std::move(dweight.value));
  out.push_back(std::move(last));
  return out;
}

//===----------------------------------------------------------------------===//
// Shape manipulation
//===----------------------------------------------------------------------===//

Outcome concat(ConcatOp op, Operands in) {
  std::vector<ref::Tensor> inputs;
  for (const ref::Tensor *t : in)
    inputs.push_back(*t);
  return one(ref::concat(inputs, op.getAxis()));
}

Outcome split(SplitOp op, Operands in) {
  auto r = ref::split(*in[0], op.getAxis(), toVector(op.getSizes()));
  if (!r)
    return ref::Error{r.error};
  return std::move(r.value);
}

template <typename ReduceOp>
Outcome reduce(ReduceOp op, ref::ReduceKind kind, Operands in) {
  return one(
      ref::reduce(kind, *in[0], toVector(op.getAxes()), op.getKeepdim()));
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

/// An update's lr, step (a whole number) and scale, operands `first` on,
/// and beta1: the op's beta1_value operand after them if it has one, else
/// `beta1`.
struct UpdateScalars {
  double lr, scale;
  int64_t step;
  double beta1;
};
ref::Result<UpdateScalars> updateScalars(Operands in, size_t first,
                                         const std::string &op,
                                         double beta1 = 0) {
  ref::Result<double> lr = scalarOf(*in[first], op + "'s lr");
  ref::Result<double> step = scalarOf(*in[first + 1], op + "'s step");
  ref::Result<double> scale = scalarOf(*in[first + 2], op + "'s scale");
  ref::Result<double> b1 = beta1;
  if (in.size() > first + 3)
    b1 = scalarOf(*in[first + 3], op + "'s beta1_value");
  for (const std::string *e : {&lr.error, &step.error, &scale.error, &b1.error})
    if (!e->empty())
      return ref::Error{*e};
  if (step.value != std::floor(step.value) || !std::isfinite(step.value))
    return ref::Error{"interpreter: " + op +
                      "'s step must be a whole number, got " +
                      std::to_string(step.value)};
  if (!(b1.value >= 0 && b1.value < 1))
    return ref::Error{"interpreter: " + op +
                      "'s beta1_value must be in [0, "
                      "1), got " +
                      std::to_string(b1.value)};
  return UpdateScalars{lr.value, scale.value, int64_t(step.value), b1.value};
}

/// An update with two states (AdamW's, Lamb's) as the op's results.
Outcome triple(ref::Result<ref::AdamWState> r) {
  if (!r)
    return ref::Error{r.error};
  Tensors out;
  out.push_back(std::move(r.value.p));
  out.push_back(std::move(r.value.m));
  out.push_back(std::move(r.value.v));
  return out;
}

Outcome adamw(AdamWOp op, Operands in) {
  auto k = updateScalars(in, 4, "adamw", op.getBeta1().convertToDouble());
  if (!k)
    return ref::Error{k.error};
  return triple(ref::adamw(
      *in[0], *in[1], *in[2], *in[3], k.value.lr, k.value.step, k.value.beta1,
      op.getBeta2().convertToDouble(), op.getEps().convertToDouble(),
      op.getWeightDecay().convertToDouble(), k.value.scale));
}

Outcome pair(ref::Result<ref::UpdateState> r) {
  if (!r)
    return ref::Error{r.error};
  Tensors out;
  out.push_back(std::move(r.value.p));
  out.push_back(std::move(r.value.state));
  return out;
}

Outcome sgd(SgdOp op, Operands in) {
  auto k = updateScalars(in, 3, "sgd");
  if (!k)
    return ref::Error{k.error};
  return pair(ref::sgd(
      *in[0], *in[1], *in[2], k.value.lr, k.value.step,
      op.getMomentum().convertToDouble(), op.getDampening().convertToDouble(),
      op.getWeightDecay().convertToDouble(), op.getNesterov(), k.value.scale));
}

Outcome lion(LionOp op, Operands in) {
  auto k = updateScalars(in, 3, "lion", op.getBeta1().convertToDouble());
  if (!k)
    return ref::Error{k.error};
  return pair(ref::lion(*in[0], *in[1], *in[2], k.value.lr, k.value.beta1,
                        op.getBeta2().convertToDouble(),
                        op.getWeightDecay().convertToDouble(), k.value.scale));
}

Outcome adagrad(AdagradOp op, Operands in) {
  auto k = updateScalars(in, 3, "adagrad");
  if (!k)
    return ref::Error{k.error};
  return pair(ref::adagrad(
      *in[0], *in[1], *in[2], k.value.lr, k.value.step,
      op.getLrDecay().convertToDouble(), op.getEps().convertToDouble(),
      op.getWeightDecay().convertToDouble(), k.value.scale));
}

Outcome muon(MuonOp op, Operands in) {
  auto k = updateScalars(in, 3, "muon");
  if (!k)
    return ref::Error{k.error};
  return pair(ref::muon(*in[0], *in[1], *in[2], k.value.lr,
                        op.getMomentum().convertToDouble(),
                        op.getWeightDecay().convertToDouble(), op.getNesterov(),
                        op.getNsSteps(), k.value.scale, op.getHeads()));
}

Outcome muonMomentum(MuonMomentumOp op, Operands in) {
  ref::Result<double> scale = scalarOf(*in[2], "muon_momentum's scale");
  if (!scale)
    return ref::Error{scale.error};
  return pair(ref::muonMomentum(*in[0], *in[1],
                                op.getMomentum().convertToDouble(),
                                op.getNesterov(), scale.value));
}

Outcome muonApply(MuonApplyOp op, Operands in) {
  ref::Result<double> lr = scalarOf(*in[2], "muon_apply's lr");
  ref::Result<double> scale = scalarOf(*in[3], "muon_apply's scale");
  if (!lr || !scale)
    return ref::Error{lr ? scale.error : lr.error};
  return one(ref::muonApply(*in[0], *in[1], lr.value,
                            op.getWeightDecay().convertToDouble(),
                            op.getFactor().convertToDouble(), scale.value));
}

/// The sharded forms read the shard's place in its group from the rank,
/// which a plan's executor has and the interpreter (before ds-zero) never
/// needs.
constexpr const char *kShardedLamb =
    "a ZeRO-sharded Lamb (norms, members) runs only in plans, after ds-zero";

Outcome lamb(LambOp op, Operands in) {
  if (op.getNorms())
    return error(llvm::Twine("ds.lamb: ") + kShardedLamb);
  auto k = updateScalars(in, 4, "lamb");
  if (!k)
    return ref::Error{k.error};
  ref::LambParams params;
  params.beta1 = op.getBeta1().convertToDouble();
  params.beta2 = op.getBeta2().convertToDouble();
  params.eps = op.getEps().convertToDouble();
  params.weightDecay = op.getWeightDecay().convertToDouble();
  params.minCoeff = op.getMinCoeff().convertToDouble();
  params.maxCoeff = op.getMaxCoeff().convertToDouble();
  params.biasCorrection = op.getBiasCorrection();
  params.epsInsideSqrt = op.getEpsInsideSqrt();
  return triple(ref::lamb(*in[0], *in[1], *in[2], *in[3], k.value.lr,
                          k.value.step, params, k.value.scale));
}

//===----------------------------------------------------------------------===//
// One overload per stateless ds op: evaluateOp's cases
// (dialects/generated/InterpretedOps.inc, generated from DsOps.td) call
// them, so an op without one does not compile.
//===----------------------------------------------------------------------===//

using ref::BinaryKind;
using ref::ReduceKind;
using ref::UnaryKind;

// Constants and index generation.
Outcome evaluate(ConstantOp c, Operands, const EvalContext &) {
  return constant(c);
}
Outcome evaluate(IotaOp o, Operands, const EvalContext &) {
  return one(ref::iota(shapeOf(o.getResult()), o.getDim()));
}

// Elementwise.
Outcome evaluate(AddOp, Operands in, const EvalContext &) {
  return binary(BinaryKind::Add, in);
}
Outcome evaluate(SubOp, Operands in, const EvalContext &) {
  return binary(BinaryKind::Sub, in);
}
Outcome evaluate(MulOp, Operands in, const EvalContext &) {
  return binary(BinaryKind::Mul, in);
}
Outcome evaluate(DivOp, Operands in, const EvalContext &) {
  return binary(BinaryKind::Div, in);
}
Outcome evaluate(MinimumOp, Operands in, const EvalContext &) {
  return binary(BinaryKind::Minimum, in);
}
Outcome evaluate(MaximumOp, Operands in, const EvalContext &) {
  return binary(BinaryKind::Maximum, in);
}
Outcome evaluate(EqualOp, Operands in, const EvalContext &) {
  return binary(BinaryKind::Equal, in);
}
Outcome evaluate(NegOp, Operands in, const EvalContext &) {
  return unary(UnaryKind::Neg, in);
}
Outcome evaluate(ExpOp, Operands in, const EvalContext &) {
  return unary(UnaryKind::Exp, in);
}
Outcome evaluate(LogOp, Operands in, const EvalContext &) {
  return unary(UnaryKind::Log, in);
}
Outcome evaluate(TanhOp, Operands in, const EvalContext &) {
  return unary(UnaryKind::Tanh, in);
}
Outcome evaluate(SqrtOp, Operands in, const EvalContext &) {
  return unary(UnaryKind::Sqrt, in);
}
Outcome evaluate(RsqrtOp, Operands in, const EvalContext &) {
  return unary(UnaryKind::Rsqrt, in);
}
Outcome evaluate(ReluOp, Operands in, const EvalContext &) {
  return unary(UnaryKind::Relu, in);
}
Outcome evaluate(SiluOp, Operands in, const EvalContext &) {
  return unary(UnaryKind::Silu, in);
}
Outcome evaluate(GeluOp o, Operands in, const EvalContext &) {
  return unary(o.getApproximate() == GeluApproximation::tanh
                   ? UnaryKind::GeluTanh
                   : UnaryKind::GeluErf,
               in);
}
Outcome evaluate(SwigluOp, Operands in, const EvalContext &) {
  // silu(gate) * up in float64, rounded once by the caller like any result.
  auto silu = ref::unary(UnaryKind::Silu, *in[0]);
  if (!silu)
    return ref::Error{silu.error};
  return one(ref::binary(BinaryKind::Mul, silu.value, *in[1]));
}
Outcome evaluate(ReluGradOp, Operands in, const EvalContext &) {
  return one(ref::relu_grad(*in[0], *in[1]));
}
Outcome evaluate(SiluGradOp, Operands in, const EvalContext &) {
  return one(ref::silu_grad(*in[0], *in[1]));
}
Outcome evaluate(GeluGradOp o, Operands in, const EvalContext &) {
  return one(ref::gelu_grad(*in[0], *in[1],
                            o.getApproximate() == GeluApproximation::tanh));
}
Outcome evaluate(CastOp o, Operands in, const EvalContext &ctx) {
  return castOp(o, in, ctx);
}
Outcome evaluate(DropoutOp o, Operands in, const EvalContext &ctx) {
  return dropout(o, in, ctx);
}

// Contractions and normalizations.
Outcome evaluate(MatmulOp o, Operands in, const EvalContext &) {
  return one(
      ref::matmul(*in[0], *in[1], o.getTransposeLhs(), o.getTransposeRhs()));
}
Outcome evaluate(LayerNormOp o, Operands in, const EvalContext &) {
  return layerNorm(o, in);
}
Outcome evaluate(BiasGeluOp o, Operands in, const EvalContext &ctx) {
  return biasGelu(o, in, ctx);
}
Outcome evaluate(MatmulBiasOp o, Operands in, const EvalContext &ctx) {
  return matmulBias(o, in, ctx);
}
Outcome evaluate(MatmulBiasGeluOp o, Operands in, const EvalContext &ctx) {
  return matmulBiasGelu(o, in, ctx);
}
Outcome evaluate(MatmulGeluGradOp o, Operands in, const EvalContext &ctx) {
  return matmulGeluGrad(o, in, ctx);
}
Outcome evaluate(AddLayerNormOp o, Operands in, const EvalContext &ctx) {
  return addLayerNorm(o, in, ctx);
}
Outcome evaluate(LayerNormGradOp o, Operands in, const EvalContext &) {
  return layerNormGrad(o, in);
}
Outcome evaluate(RmsNormOp o, Operands in, const EvalContext &) {
  return one(ref::rms_norm(*in[0], in[1], o.getEps().convertToDouble()));
}
Outcome evaluate(RmsNormGradOp o, Operands in, const EvalContext &) {
  return rmsNormGrad(o, in);
}
Outcome evaluate(SoftmaxOp, Operands in, const EvalContext &) {
  return one(ref::softmax(*in[0]));
}
Outcome evaluate(SoftmaxGradOp, Operands in, const EvalContext &) {
  return one(ref::softmax_grad(*in[0], *in[1]));
}
Outcome evaluate(AttentionOp o, Operands in, const EvalContext &) {
  return dsc::evaluateAttention(o, in);
}
Outcome evaluate(AttentionGradOp o, Operands in, const EvalContext &) {
  return dsc::evaluateAttentionGrad(o, in);
}
Outcome evaluate(RotaryOp o, Operands in, const EvalContext &) {
  return dsc::evaluateRotary(o, in);
}

// Lookup and loss.
Outcome evaluate(EmbeddingOp o, Operands in, const EvalContext &) {
  if (o.getParts() > 1)
    return notOnePart(o, o.getParts());
  return one(ref::embedding(*in[0], *in[1]));
}
Outcome evaluate(EmbeddingGradOp o, Operands in, const EvalContext &) {
  if (o.getParts() > 1)
    return notOnePart(o, o.getParts());
  return one(ref::embedding_grad(*in[0], *in[1], o.getVocabSize()));
}
// One rank's share of a vocabulary-parallel loss (phase shard) needs the
// rank's place in its group; the interpreter runs whole values.
Outcome evaluate(CrossEntropyPartOp o, Operands, const EvalContext &) {
  return notOnePart(o, o.getParts());
}
Outcome evaluate(CrossEntropyPartLossOp o, Operands, const EvalContext &) {
  return notOnePart(o, 0);
}
Outcome evaluate(CrossEntropyPartGradOp o, Operands, const EvalContext &) {
  return notOnePart(o, o.getParts());
}
Outcome evaluate(CrossEntropyOp o, Operands in, const EvalContext &) {
  return one(ref::cross_entropy(*in[0], *in[1], o.getIgnoreIndex()));
}
Outcome evaluate(CrossEntropyGradOp o, Operands in, const EvalContext &) {
  return crossEntropyGrad(o, in);
}
Outcome evaluate(LinearCrossEntropyOp o, Operands in, const EvalContext &ctx) {
  return linearCrossEntropy(o, in, ctx);
}

// Shape manipulation.
Outcome evaluate(ReshapeOp o, Operands in, const EvalContext &) {
  return one(ref::reshape(*in[0], shapeOf(o.getResult())));
}
Outcome evaluate(TransposeOp o, Operands in, const EvalContext &) {
  return one(ref::transpose(*in[0], toVector(o.getPermutation())));
}
Outcome evaluate(SliceOp o, Operands in, const EvalContext &) {
  return one(
      ref::slice(*in[0], toVector(o.getOffsets()), toVector(o.getSizes())));
}
Outcome evaluate(PadOp o, Operands in, const EvalContext &) {
  return one(ref::pad(*in[0], toVector(o.getLow()), toVector(o.getHigh())));
}
Outcome evaluate(ConcatOp o, Operands in, const EvalContext &) {
  return concat(o, in);
}
Outcome evaluate(SplitOp o, Operands in, const EvalContext &) {
  return split(o, in);
}
Outcome evaluate(BroadcastOp o, Operands in, const EvalContext &) {
  return one(ref::broadcast_to(*in[0], shapeOf(o.getResult())));
}
Outcome evaluate(FusedElementwiseOp o, Operands in, const EvalContext &ctx) {
  return dsc::evaluateFusedBody(o, in, ctx);
}
Outcome evaluate(ReduceSumOp o, Operands in, const EvalContext &) {
  return reduce(o, ReduceKind::Sum, in);
}
Outcome evaluate(ReduceMeanOp o, Operands in, const EvalContext &) {
  return reduce(o, ReduceKind::Mean, in);
}
Outcome evaluate(ReduceMaxOp o, Operands in, const EvalContext &) {
  return reduce(o, ReduceKind::Max, in);
}

// Optimizer.
Outcome evaluate(AdamWOp o, Operands in, const EvalContext &) {
  return adamw(o, in);
}
Outcome evaluate(SgdOp o, Operands in, const EvalContext &) {
  return sgd(o, in);
}
Outcome evaluate(LionOp o, Operands in, const EvalContext &) {
  return lion(o, in);
}
Outcome evaluate(AdagradOp o, Operands in, const EvalContext &) {
  return adagrad(o, in);
}
Outcome evaluate(LambOp o, Operands in, const EvalContext &) {
  return lamb(o, in);
}
Outcome evaluate(MuonOp o, Operands in, const EvalContext &) {
  return muon(o, in);
}
Outcome evaluate(MuonMomentumOp o, Operands in, const EvalContext &) {
  return muonMomentum(o, in);
}
Outcome evaluate(MuonApplyOp o, Operands in, const EvalContext &) {
  return muonApply(o, in);
}
Outcome evaluate(LambNormsOp, Operands, const EvalContext &) {
  return error(llvm::Twine("ds.lamb_norms: ") + kShardedLamb);
}
Outcome evaluate(OverflowGuardOp, Operands in, const EvalContext &) {
  return one(ref::overflow_guard(*in[0], *in[1]));
}

} // namespace

std::optional<ref::DType> dsc::dtypeOf(Type elementType) {
  std::optional<dsc::DType> t = ds::dtypeOfElement(elementType);
  return t && dsc::isFloat(*t) ? t : std::nullopt;
}

ref::Result<std::vector<ref::Tensor>>
dsc::evaluateOp(Operation *op, llvm::ArrayRef<const ref::Tensor *> in,
                const EvalContext &ctx) {
  return llvm::TypeSwitch<Operation *, Outcome>(op)
#include "dialects/generated/InterpretedOps.inc"
      .Default([](Operation *o) -> Outcome {
        return error("interpreter: no rule for '" +
                     o->getName().getStringRef() + "'");
      });
}
