//===- VJPTest.cpp - every VJP rule against finite differences -----------===//
//
// DESIGN.md invariant 1. For each op with a VJPOpInterface, a module
//
//   ds.variable param @in0 ... (f64)
//   func.func @forward() -> tensor<f32> {
//     loss = cast(reduce_sum(op(load @in0, ...) * C))   // C: random constant
//   }
//
// goes through the real ds-verify-input and ds-autodiff passes; the
// interpreter runs @micro_step for d(loss)/d(in_i) and compares it with
// central finite differences of @forward. The finite differences run with
// rounding off, so the final cast to the contract's f32 loss is exact and
// the whole loss is float64.
//
// Inputs are drawn fresh each run; a failure prints the seed, and
// DSC_TEST_SEED=<seed> replays it. Adding an op is one entry in allCases().
//
//===----------------------------------------------------------------------===//

#include "compiler/interpreter/Interpreter.h"
#include "dialects/ds/DsOps.h"
#include "passes/Passes.h"
#include "runtime/reference/RefKernels.h"
#include "runtime/rng/Philox.h"
#include "test/compiler/TestSupport.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace mlir;
using namespace mlir::ds;
namespace ref = dsc::ref;
using dsc::Interpreter;

namespace {

//===----------------------------------------------------------------------===//
// Harness
//===----------------------------------------------------------------------===//

using dsc::test::DiagnosticCapture;
using dsc::test::testSeed;

void loadDialects(MLIRContext &ctx) {
  ctx.loadDialect<DSDialect, func::FuncDialect>();
}

enum class Dist {
  Normal,       // N(0, 1)
  Positive,     // U[0.5, 2]: log, sqrt, rsqrt, denominators
  AwayFromZero, // +-U[0.5, 2]: no kink of relu within reach of h
  Distinct,     // spread >= 0.2 apart: a unique maximum everywhere
  Index,        // integers in [0, range), an ignore value at position 0
};
enum class Elt { F64, F32, I32 };

struct Input {
  ref::Shape shape;
  Dist dist = Dist::Normal;
  Elt elt = Elt::F64;
  int64_t range = 0;
  std::optional<int64_t> ignore;
};

Input param(ref::Shape shape, Dist dist = Dist::Normal) {
  return Input{std::move(shape), dist, Elt::F64, 0, std::nullopt};
}
Input paramF32(ref::Shape shape) {
  return Input{std::move(shape), Dist::Normal, Elt::F32, 0, std::nullopt};
}
Input indices(ref::Shape shape, int64_t range,
              std::optional<int64_t> ignore = std::nullopt) {
  return Input{std::move(shape), Dist::Index, Elt::I32, range, ignore};
}

using BuildFn =
    std::function<SmallVector<Value>(OpBuilder &, Location, ValueRange)>;

struct OpCase {
  std::string name;
  std::vector<Input> inputs;
  /// Builds the op on the inputs; returns the results the loss reads.
  BuildFn build;
  /// Run @micro_step without rounding too: narrowing casts, whose rounding
  /// the finite differences could not see through.
  bool exact = false;
};

std::ostream &operator<<(std::ostream &os, const OpCase &c) {
  return os << c.name;
}

Type elementType(OpBuilder &b, Elt elt) {
  switch (elt) {
  case Elt::F64:
    return b.getF64Type();
  case Elt::F32:
    return b.getF32Type();
  case Elt::I32:
    return b.getI32Type();
  }
  return {};
}

RankedTensorType tensorType(ArrayRef<int64_t> shape, Type elt) {
  return RankedTensorType::get(shape, elt);
}

ref::Tensor draw(const Input &input, std::mt19937_64 &rng) {
  ref::Tensor t(input.shape);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  switch (input.dist) {
  case Dist::Normal:
    for (double &v : t.data)
      v = normal(rng);
    break;
  case Dist::Positive:
    for (double &v : t.data)
      v = 0.5 + 1.5 * unit(rng);
    break;
  case Dist::AwayFromZero:
    for (double &v : t.data)
      v = (unit(rng) < 0.5 ? -1 : 1) * (0.5 + 1.5 * unit(rng));
    break;
  case Dist::Distinct: {
    std::vector<double> ranks(t.data.size());
    for (size_t i = 0; i < ranks.size(); ++i)
      ranks[i] = double(i) - double(ranks.size()) / 2;
    std::shuffle(ranks.begin(), ranks.end(), rng);
    for (size_t i = 0; i < ranks.size(); ++i)
      t.data[i] = 0.3 * ranks[i] + 0.05 * unit(rng);
    break;
  }
  case Dist::Index: {
    std::uniform_int_distribution<int64_t> index(0, input.range - 1);
    for (double &v : t.data)
      v = double(index(rng));
    if (input.ignore && !t.data.empty())
      t.data[0] = double(*input.ignore);
    break;
  }
  }
  return t;
}

std::string paramName(size_t i) { return "in" + std::to_string(i); }

/// The module of the header comment; `values` holds the integer inputs,
/// which become constants (float inputs are variables set later).
OwningOpRef<ModuleOp> buildModule(MLIRContext &ctx, const OpCase &c,
                                  const std::vector<ref::Tensor> &values,
                                  std::mt19937_64 &rng) {
  OpBuilder b(&ctx);
  Location loc = NameLoc::get(b.getStringAttr(c.name));
  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (c.inputs[i].elt != Elt::I32)
      b.create<VariableOp>(
          loc, VariableKind::param, paramName(i), FlatSymbolRefAttr(),
          tensorType(c.inputs[i].shape, elementType(b, c.inputs[i].elt)),
          InitKind::zeros, FloatAttr());

  auto f32Scalar = tensorType({}, b.getF32Type());
  auto forward = b.create<func::FuncOp>(loc, "forward",
                                        b.getFunctionType({}, {f32Scalar}));
  b.setInsertionPointToStart(forward.addEntryBlock());
  SmallVector<Value> operands;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Input &input = c.inputs[i];
    auto type = tensorType(input.shape, elementType(b, input.elt));
    if (input.elt != Elt::I32) {
      operands.push_back(b.create<LoadOp>(loc, type, paramName(i)));
      continue;
    }
    std::vector<int32_t> ints(values[i].data.begin(), values[i].data.end());
    operands.push_back(b.create<ConstantOp>(
        loc, DenseElementsAttr::get(type, ArrayRef<int32_t>(ints))));
  }

  Value total;
  for (Value result : c.build(b, loc, operands)) {
    auto type = cast<RankedTensorType>(result.getType());
    auto f64Type = tensorType(type.getShape(), b.getF64Type());
    if (type != f64Type)
      result = b.create<CastOp>(loc, f64Type, result);
    std::normal_distribution<double> normal;
    std::vector<double> cotangent(type.getNumElements());
    for (double &v : cotangent)
      v = normal(rng);
    Value weights = b.create<ConstantOp>(
        loc, DenseElementsAttr::get(f64Type, ArrayRef<double>(cotangent)));
    Value term = b.create<MulOp>(loc, result, weights);
    if (type.getRank() > 0) {
      SmallVector<int64_t> all;
      for (int64_t d = 0; d < type.getRank(); ++d)
        all.push_back(d);
      term = b.create<ReduceSumOp>(loc, term, all);
    }
    total = total ? b.create<AddOp>(loc, total, term).getResult() : term;
  }
  Value loss = b.create<CastOp>(loc, f32Scalar, total);
  b.create<func::ReturnOp>(loc, loss);
  return module;
}

/// Runs @forward and returns its loss (NaN after a reported failure).
double forwardLoss(Interpreter &interp) {
  std::vector<ref::Tensor> out;
  if (failed(interp.run("forward", {}, out)) || out.size() != 1) {
    ADD_FAILURE() << "@forward failed";
    return std::nan("");
  }
  return out[0].data[0];
}

/// d(loss)/d(variable[index]) by central differences with a relative step.
double finiteDifference(Interpreter &interp, ref::Tensor &variable,
                        size_t index, double relStep = 1e-6) {
  double x = variable.data[index];
  double h = relStep * std::max(1.0, std::abs(x));
  double xp = x + h, xm = x - h;
  variable.data[index] = xp;
  double lp = forwardLoss(interp);
  variable.data[index] = xm;
  double lm = forwardLoss(interp);
  variable.data[index] = x;
  return (lp - lm) / (xp - xm);
}

constexpr double kTolerance = 1e-6;

void checkGradients(const OpCase &c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  MLIRContext ctx;
  loadDialects(ctx);
  DiagnosticCapture diags(ctx);

  std::vector<ref::Tensor> values;
  for (const Input &input : c.inputs)
    values.push_back(draw(input, rng));
  OwningOpRef<ModuleOp> module = buildModule(ctx, c, values, rng);
  ASSERT_TRUE(succeeded(verify(*module))) << diags.text;

  PassManager pm(&ctx);
  pm.addPass(createDsVerifyInput());
  pm.addPass(createDsAutodiff());
  ASSERT_TRUE(succeeded(pm.run(*module))) << diags.text;

  Interpreter interp(*module, seed);
  interp.setStep(3);
  ASSERT_TRUE(succeeded(interp.initVariables())) << diags.text;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    if (c.inputs[i].elt != Elt::I32)
      interp.variable(paramName(i)) = values[i];

  interp.setRounding(!c.exact);
  std::vector<ref::Tensor> out;
  ASSERT_TRUE(succeeded(interp.run("micro_step", {}, out))) << diags.text;

  interp.setRounding(false);
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (c.inputs[i].elt == Elt::I32)
      continue;
    std::string name = paramName(i);
    ASSERT_TRUE(interp.hasVariable(name + ".grad"))
        << "ds-autodiff gave @" << name << " no gradient accumulator";
    ref::Tensor grad = interp.variable(name + ".grad");
    ASSERT_EQ(grad.shape, values[i].shape);
    ref::Tensor &param = interp.variable(name);
    double worst = -1;
    size_t worstIndex = 0;
    double worstFd = 0;
    for (size_t j = 0; j < param.data.size(); ++j) {
      double fd = finiteDifference(interp, param, j);
      double err =
          std::abs(grad.data[j] - fd) / std::max(1.0, std::abs(grad.data[j]));
      if (!(err <= worst)) {
        worst = err;
        worstIndex = j;
        worstFd = fd;
      }
    }
    EXPECT_LE(worst, kTolerance)
        << "@" << name << "[" << worstIndex << "] (flat index): autodiff "
        << grad.data[worstIndex] << ", finite differences " << worstFd;
  }
}

class VJPTest : public ::testing::TestWithParam<OpCase> {};

TEST_P(VJPTest, MatchesFiniteDifferences) {
  uint64_t seed = testSeed();
  SCOPED_TRACE("DSC_TEST_SEED=" + std::to_string(seed));
  checkGradients(GetParam(), seed);
}

//===----------------------------------------------------------------------===//
// The cases: one entry per op and shape
//===----------------------------------------------------------------------===//

std::string shapeName(const ref::Shape &shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

template <typename OpT> BuildFn unaryOp() {
  return [](OpBuilder &b, Location loc, ValueRange in) -> SmallVector<Value> {
    return {b.create<OpT>(loc, in[0])};
  };
}

template <typename OpT> BuildFn binaryOp() {
  return [](OpBuilder &b, Location loc, ValueRange in) -> SmallVector<Value> {
    return {b.create<OpT>(loc, in[0], in[1])};
  };
}

void addElementwise(std::vector<OpCase> &cases) {
  // Broadcasting in every direction: equal shapes, a trailing vector, a
  // scalar, and size-1 dims on both sides.
  const std::vector<std::pair<ref::Shape, ref::Shape>> binaryShapes = {
      {{3, 5}, {3, 5}}, {{2, 3, 7}, {7}}, {{}, {3, 5}}, {{2, 1, 7}, {3, 1}}};
  auto binary = [&](const char *name, BuildFn build, Dist rhsDist) {
    for (const auto &[lhs, rhs] : binaryShapes)
      cases.push_back(
          {std::string(name) + "_" + shapeName(lhs) + "_" + shapeName(rhs),
           {param(lhs), param(rhs, rhsDist)},
           build});
  };
  binary("add", binaryOp<AddOp>(), Dist::Normal);
  binary("sub", binaryOp<SubOp>(), Dist::Normal);
  binary("mul", binaryOp<MulOp>(), Dist::Normal);
  binary("div", binaryOp<DivOp>(), Dist::AwayFromZero);
  // One value on both sides: the two cotangents must be summed.
  cases.push_back(
      {"mul_same_operand_3x5",
       {param({3, 5})},
       [](OpBuilder &b, Location loc, ValueRange in) -> SmallVector<Value> {
         return {b.create<MulOp>(loc, in[0], in[0])};
       }});

  const std::vector<ref::Shape> unaryShapes = {{7}, {3, 5}, {2, 3, 5}};
  auto unary = [&](const char *name, BuildFn build, Dist dist) {
    for (const ref::Shape &shape : unaryShapes)
      cases.push_back({std::string(name) + "_" + shapeName(shape),
                       {param(shape, dist)},
                       build});
  };
  unary("neg", unaryOp<NegOp>(), Dist::Normal);
  unary("exp", unaryOp<ExpOp>(), Dist::Normal);
  unary("log", unaryOp<LogOp>(), Dist::Positive);
  unary("tanh", unaryOp<TanhOp>(), Dist::Normal);
  unary("sqrt", unaryOp<SqrtOp>(), Dist::Positive);
  unary("rsqrt", unaryOp<RsqrtOp>(), Dist::Positive);
  unary("relu", unaryOp<ReluOp>(), Dist::AwayFromZero);
  unary("silu", unaryOp<SiluOp>(), Dist::Normal);
  for (auto [approx, name] : {std::pair{GeluApproximation::tanh, "gelu_tanh"},
                              std::pair{GeluApproximation::none, "gelu_erf"}})
    unary(
        name,
        [approx = approx](OpBuilder &b, Location loc,
                          ValueRange in) -> SmallVector<Value> {
          return {b.create<GeluOp>(loc, approx, in[0])};
        },
        Dist::Normal);

  // Casts: the VJP casts the cotangent back. Narrowing rounds, which finite
  // differences cannot see through, so these run exact (see OpCase::exact);
  // CastGradient.RoundsTheCotangent checks the rounding itself.
  struct Narrow {
    const char *name;
    Type (*get)(OpBuilder &);
  };
  const Narrow targets[] = {
      {"f64", [](OpBuilder &b) -> Type { return b.getF64Type(); }},
      {"f32", [](OpBuilder &b) -> Type { return b.getF32Type(); }},
      {"f16", [](OpBuilder &b) -> Type { return b.getF16Type(); }},
      {"bf16", [](OpBuilder &b) -> Type { return b.getBF16Type(); }}};
  for (const Narrow &t : targets)
    cases.push_back({std::string("cast_f64_to_") + t.name + "_3x5",
                     {param({3, 5})},
                     [get = t.get](OpBuilder &b, Location loc,
                                   ValueRange in) -> SmallVector<Value> {
                       auto type = cast<RankedTensorType>(in[0].getType());
                       return {b.create<CastOp>(
                           loc, tensorType(type.getShape(), get(b)), in[0])};
                     },
                     /*exact=*/true});
  cases.push_back(
      {"cast_f32_to_f64_7",
       {paramF32({7})},
       [](OpBuilder &b, Location loc, ValueRange in) -> SmallVector<Value> {
         return {b.create<CastOp>(loc, tensorType({7}, b.getF64Type()), in[0])};
       },
       /*exact=*/true});

  for (auto [shape, rate] :
       {std::pair{ref::Shape{7}, 0.3}, std::pair{ref::Shape{3, 5}, 0.5},
        std::pair{ref::Shape{2, 3, 5}, 0.1}})
    cases.push_back({"dropout_" + shapeName(shape) + "_rate" +
                         std::to_string(int(rate * 10)),
                     {param(shape)},
                     [rate = rate](OpBuilder &b, Location loc,
                                   ValueRange in) -> SmallVector<Value> {
                       return {b.create<DropoutOp>(loc, in[0],
                                                   b.getF64FloatAttr(rate),
                                                   b.getI64IntegerAttr(5))};
                     }});
}

void addMatmul(std::vector<OpCase> &cases) {
  struct Mm {
    ref::Shape lhs, rhs;
    bool ta, tb;
  };
  // Every transpose combination, batched, broadcast batches, and the 2-D rhs
  // of a linear layer (which the VJP folds into one [rows, K] product).
  const Mm shapes[] = {
      {{3, 5}, {5, 7}, false, false},       {{5, 3}, {5, 7}, true, false},
      {{3, 5}, {7, 5}, false, true},        {{5, 3}, {7, 5}, true, true},
      {{2, 3, 5}, {2, 5, 4}, false, false}, {{2, 5, 3}, {2, 4, 5}, true, true},
      {{1, 3, 5}, {3, 5, 2}, false, false}, {{3, 5}, {2, 5, 4}, false, false},
      {{2, 3, 5}, {5, 7}, false, false},    {{2, 3, 5}, {7, 5}, false, true},
      {{2, 2, 3, 5}, {5, 3}, false, false}, {{2, 2, 3, 5}, {3, 5}, false, true},
      {{2, 5, 3}, {5, 7}, true, false},     {{2, 5, 3}, {7, 5}, true, true},
  };
  for (const Mm &m : shapes)
    cases.push_back(
        {"matmul_" + shapeName(m.lhs) + (m.ta ? "T" : "") + "_" +
             shapeName(m.rhs) + (m.tb ? "T" : ""),
         {param(m.lhs), param(m.rhs)},
         [ta = m.ta, tb = m.tb](OpBuilder &b, Location loc,
                                ValueRange in) -> SmallVector<Value> {
           return {b.create<MatmulOp>(loc, in[0], in[1], ta, tb)};
         }});
}

void addNormalizations(std::vector<OpCase> &cases) {
  for (const ref::Shape &shape :
       {ref::Shape{3, 5}, ref::Shape{2, 3, 7}, ref::Shape{1, 4}}) {
    ref::Shape channels{shape.back()};
    cases.push_back(
        {"layer_norm_" + shapeName(shape),
         {param(shape), param(channels), param(channels)},
         [](OpBuilder &b, Location loc, ValueRange in) -> SmallVector<Value> {
           return {b.create<LayerNormOp>(loc, in[0], in[1], in[2],
                                         b.getF64FloatAttr(1e-5))};
         }});
    cases.push_back(
        {"layer_norm_nobias_" + shapeName(shape),
         {param(shape), param(channels)},
         [](OpBuilder &b, Location loc, ValueRange in) -> SmallVector<Value> {
           return {b.create<LayerNormOp>(loc, in[0], in[1], Value(),
                                         b.getF64FloatAttr(1e-5))};
         }});
    cases.push_back(
        {"rms_norm_" + shapeName(shape),
         {param(shape), param(channels)},
         [](OpBuilder &b, Location loc, ValueRange in) -> SmallVector<Value> {
           return {
               b.create<RmsNormOp>(loc, in[0], in[1], b.getF64FloatAttr(1e-6))};
         }});
  }
  for (const ref::Shape &shape :
       {ref::Shape{7}, ref::Shape{3, 5}, ref::Shape{2, 3, 7}})
    cases.push_back(
        {"softmax_" + shapeName(shape), {param(shape)}, unaryOp<SoftmaxOp>()});

  struct Attn {
    int64_t b, h, tq, tk, d, dv;
    bool causal;
  };
  const Attn attns[] = {
      {1, 1, 3, 3, 2, 2, false}, {2, 3, 5, 5, 4, 3, true},
      {1, 2, 3, 5, 4, 6, true},  {2, 1, 5, 3, 2, 3, true},
      {2, 2, 3, 7, 5, 2, false},
  };
  for (const Attn &a : attns) {
    ref::Shape q{a.b, a.h, a.tq, a.d}, k{a.b, a.h, a.tk, a.d},
        v{a.b, a.h, a.tk, a.dv};
    double scale = 1.0 / std::sqrt(double(a.d));
    cases.push_back(
        {std::string("attention_") + (a.causal ? "causal_" : "") +
             shapeName(q) + "_" + shapeName(v),
         {param(q), param(k), param(v)},
         [scale, causal = a.causal](OpBuilder &b, Location loc,
                                    ValueRange in) -> SmallVector<Value> {
           return {b.create<AttentionOp>(
               loc, in[0], in[1], in[2], b.getF64FloatAttr(scale),
               causal ? b.getUnitAttr() : UnitAttr())};
         }});
  }

  for (auto [shape, theta, inverse] :
       {std::tuple{ref::Shape{3, 6}, 10000.0, false},
        std::tuple{ref::Shape{2, 2, 5, 4}, 10.0, false},
        std::tuple{ref::Shape{2, 7, 2}, 3.0, true}})
    cases.push_back(
        {std::string("rotary_") + (inverse ? "inverse_" : "") +
             shapeName(shape),
         {param(shape)},
         [theta = theta, inverse = inverse](
             OpBuilder &b, Location loc, ValueRange in) -> SmallVector<Value> {
           return {b.create<RotaryOp>(loc, in[0], b.getF64FloatAttr(theta),
                                      inverse ? b.getUnitAttr() : UnitAttr())};
         }});
}

void addLookupAndLoss(std::vector<OpCase> &cases) {
  // Repeated indices exercise the scatter-add.
  for (auto [table, idx] : {std::pair{ref::Shape{7, 3}, ref::Shape{2, 5}},
                            std::pair{ref::Shape{5, 4}, ref::Shape{3}},
                            std::pair{ref::Shape{3, 2}, ref::Shape{2, 3, 3}}})
    cases.push_back({"embedding_" + shapeName(table) + "_" + shapeName(idx),
                     {param(table), indices(idx, table[0])},
                     binaryOp<EmbeddingOp>()});

  // An ignored target at position 0: -1 by default, or a custom index that
  // is also a valid class.
  struct Ce {
    ref::Shape logits;
    int64_t ignore;
  };
  for (const Ce &c :
       {Ce{{3, 5}, -1}, Ce{{2, 3, 7}, -1}, Ce{{5, 3}, 2}, Ce{{1, 1, 4}, -1}}) {
    ref::Shape targets(c.logits.begin(), c.logits.end() - 1);
    bool ignoreOne = targets != ref::Shape{1, 1};
    cases.push_back(
        {"cross_entropy_" + shapeName(c.logits) +
             (c.ignore >= 0 ? "_ignore" + std::to_string(c.ignore) : ""),
         {param(c.logits),
          indices(targets, c.logits.back(),
                  ignoreOne ? std::optional<int64_t>(c.ignore) : std::nullopt)},
         [ignore = c.ignore](OpBuilder &b, Location loc,
                             ValueRange in) -> SmallVector<Value> {
           return {b.create<CrossEntropyOp>(loc, in[0], in[1],
                                            b.getI64IntegerAttr(ignore))};
         }});
  }
}

void addShapes(std::vector<OpCase> &cases) {
  for (auto [from, to] : {std::pair{ref::Shape{3, 5}, ref::Shape{5, 3}},
                          std::pair{ref::Shape{2, 3, 7}, ref::Shape{6, 7}},
                          std::pair{ref::Shape{3, 5}, ref::Shape{15}},
                          std::pair{ref::Shape{7}, ref::Shape{1, 7, 1}}})
    cases.push_back({"reshape_" + shapeName(from) + "_to_" + shapeName(to),
                     {param(from)},
                     [to = to](OpBuilder &b, Location loc,
                               ValueRange in) -> SmallVector<Value> {
                       return {b.create<ReshapeOp>(
                           loc, tensorType(to, b.getF64Type()), in[0])};
                     }});

  for (auto [shape, perm] :
       {std::pair{ref::Shape{3, 5}, std::vector<int64_t>{1, 0}},
        std::pair{ref::Shape{2, 3, 5}, std::vector<int64_t>{2, 0, 1}},
        std::pair{ref::Shape{2, 3, 5, 7}, std::vector<int64_t>{0, 2, 1, 3}}})
    cases.push_back(
        {"transpose_" + shapeName(shape) + "_perm" + shapeName(perm),
         {param(shape)},
         [perm = perm](OpBuilder &b, Location loc,
                       ValueRange in) -> SmallVector<Value> {
           return {b.create<TransposeOp>(loc, in[0], perm)};
         }});

  // Slice: offsets and sizes; pad: low and high padding.
  struct Box {
    ref::Shape shape;
    std::vector<int64_t> first, second;
  };
  for (const Box &s :
       {Box{{5, 7}, {1, 2}, {3, 4}}, Box{{3, 5, 7}, {0, 1, 3}, {3, 3, 2}},
        Box{{7}, {6}, {1}}})
    cases.push_back(
        {"slice_" + shapeName(s.shape) + "_at" + shapeName(s.first),
         {param(s.shape)},
         [s](OpBuilder &b, Location loc, ValueRange in) -> SmallVector<Value> {
           return {b.create<SliceOp>(loc, in[0], s.first, s.second)};
         }});
  for (const Box &p :
       {Box{{3, 5}, {1, 0}, {2, 3}}, Box{{2, 3, 7}, {0, 2, 1}, {1, 0, 2}},
        Box{{5}, {0}, {0}}})
    cases.push_back(
        {"pad_" + shapeName(p.shape) + "_low" + shapeName(p.first),
         {param(p.shape)},
         [p](OpBuilder &b, Location loc, ValueRange in) -> SmallVector<Value> {
           return {b.create<PadOp>(loc, in[0], p.first, p.second)};
         }});

  cases.push_back(
      {"concat_axis1_3x5_3x2_3x7",
       {param({3, 5}), param({3, 2}), param({3, 7})},
       [](OpBuilder &b, Location loc, ValueRange in) -> SmallVector<Value> {
         return {b.create<ConcatOp>(loc, in, int64_t(1))};
       }});
  cases.push_back(
      {"concat_axis0_2x3_5x3",
       {param({2, 3}), param({5, 3})},
       [](OpBuilder &b, Location loc, ValueRange in) -> SmallVector<Value> {
         return {b.create<ConcatOp>(loc, in, int64_t(0))};
       }});
  // The same value twice: both slices of the cotangent go back to it.
  cases.push_back(
      {"concat_same_operand_3x5",
       {param({3, 5})},
       [](OpBuilder &b, Location loc, ValueRange in) -> SmallVector<Value> {
         return {b.create<ConcatOp>(loc, ValueRange{in[0], in[0]}, int64_t(0))};
       }});

  // `used` picks the pieces the loss reads; an unused piece gets a zero
  // cotangent in the VJP.
  struct Sp {
    ref::Shape shape;
    int64_t axis;
    std::vector<int64_t> sizes;
    std::vector<int> used;
  };
  for (const Sp &s :
       {Sp{{3, 12}, 1, {5, 4, 3}, {0, 1, 2}}, Sp{{7, 5}, 0, {3, 4}, {0}},
        Sp{{2, 9, 3}, 1, {2, 3, 4}, {0, 2}}}) {
    std::string usedName;
    for (int u : s.used)
      usedName += std::to_string(u);
    cases.push_back(
        {"split_" + shapeName(s.shape) + "_axis" + std::to_string(s.axis) +
             "_use" + usedName,
         {param(s.shape)},
         [s](OpBuilder &b, Location loc, ValueRange in) -> SmallVector<Value> {
           auto split = b.create<SplitOp>(loc, in[0], s.axis, s.sizes);
           SmallVector<Value> out;
           for (int u : s.used)
             out.push_back(split.getResult(u));
           return out;
         }});
  }

  for (auto [from, to] : {std::pair{ref::Shape{5}, ref::Shape{3, 5}},
                          std::pair{ref::Shape{3, 1}, ref::Shape{3, 7}},
                          std::pair{ref::Shape{1, 5, 1}, ref::Shape{2, 5, 3}},
                          std::pair{ref::Shape{}, ref::Shape{3, 5}}})
    cases.push_back({"broadcast_" + shapeName(from) + "_to_" + shapeName(to),
                     {param(from)},
                     [to = to](OpBuilder &b, Location loc,
                               ValueRange in) -> SmallVector<Value> {
                       return {b.create<BroadcastOp>(
                           loc, tensorType(to, b.getF64Type()), in[0])};
                     }});

  struct Red {
    ref::Shape shape;
    std::vector<int64_t> axes;
    bool keepdim;
  };
  const Red reductions[] = {{{3, 5}, {1}, false},    {{3, 5}, {0}, true},
                            {{3, 5}, {0, 1}, false}, {{2, 3, 7}, {0, 2}, true},
                            {{2, 3, 7}, {1}, false}, {{7}, {0}, false}};
  auto reduce = [&](const char *name, auto tag, Dist dist) {
    using OpT = decltype(tag);
    for (const Red &r : reductions)
      cases.push_back({std::string(name) + "_" + shapeName(r.shape) + "_axes" +
                           shapeName(r.axes) + (r.keepdim ? "_keepdim" : ""),
                       {param(r.shape, dist)},
                       [r](OpBuilder &b, Location loc,
                           ValueRange in) -> SmallVector<Value> {
                         return {b.create<OpT>(loc, in[0], r.axes, r.keepdim)};
                       }});
  };
  reduce("reduce_sum", ReduceSumOp(), Dist::Normal);
  reduce("reduce_mean", ReduceMeanOp(), Dist::Normal);
  reduce("reduce_max", ReduceMaxOp(), Dist::Distinct);
}

std::vector<OpCase> allCases() {
  std::vector<OpCase> cases;
  addElementwise(cases);
  addMatmul(cases);
  addNormalizations(cases);
  addLookupAndLoss(cases);
  addShapes(cases);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllOps, VJPTest, ::testing::ValuesIn(allCases()),
                         [](const ::testing::TestParamInfo<OpCase> &info) {
                           return info.param.name;
                         });

/// Every op with a VJP rule has a case: a new rule without a test fails here.
TEST(VJPCoverage, EveryDifferentiableOpHasACase) {
  MLIRContext ctx;
  loadDialects(ctx);
  std::vector<OpCase> cases = allCases();
  for (RegisteredOperationName op : ctx.getRegisteredOperations()) {
    if (op.getDialectNamespace() != "ds" || !op.hasInterface<VJPOpInterface>())
      continue;
    std::string prefix = op.getStringRef().drop_front(3).str() + "_";
    bool covered = llvm::any_of(cases, [&](const OpCase &c) {
      return llvm::StringRef(c.name).starts_with(prefix);
    });
    EXPECT_TRUE(covered) << op.getStringRef().str()
                         << " has a VJP rule but no VJPTest case";
  }
}

/// A narrowing cast's VJP rounds the cotangent to the narrow type and
/// widens it back: d(loss)/dx is C rounded to f32, exactly.
TEST(CastGradient, RoundsTheCotangent) {
  uint64_t seed = testSeed();
  SCOPED_TRACE("DSC_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  MLIRContext ctx;
  loadDialects(ctx);
  DiagnosticCapture diags(ctx);
  OpCase c{"cast",
           {param({2, 3})},
           [](OpBuilder &b, Location loc, ValueRange in) -> SmallVector<Value> {
             return {b.create<CastOp>(loc, tensorType({2, 3}, b.getF32Type()),
                                      in[0])};
           }};
  std::vector<ref::Tensor> values{draw(c.inputs[0], rng)};
  OwningOpRef<ModuleOp> module = buildModule(ctx, c, values, rng);
  PassManager pm(&ctx);
  pm.addPass(createDsVerifyInput());
  pm.addPass(createDsAutodiff());
  ASSERT_TRUE(succeeded(pm.run(*module))) << diags.text;

  // The cotangent C is the constant the loss multiplies by.
  ref::Tensor weights;
  module->walk([&](ConstantOp op) {
    auto dense = cast<DenseElementsAttr>(op.getValue());
    if (dense.getNumElements() == 6 && !dense.isSplat()) {
      weights = ref::Tensor({2, 3});
      size_t i = 0;
      for (double v : dense.getValues<double>())
        weights.data[i++] = v;
    }
  });
  Interpreter interp(*module, seed);
  ASSERT_TRUE(succeeded(interp.initVariables()));
  interp.variable("in0") = values[0];
  std::vector<ref::Tensor> out;
  ASSERT_TRUE(succeeded(interp.run("micro_step", {}, out))) << diags.text;
  const ref::Tensor &grad = interp.variable("in0.grad");
  for (size_t i = 0; i < 6; ++i)
    EXPECT_EQ(grad.data[i], ref::roundToDType(weights.data[i], ref::DType::f32))
        << "element " << i;
}

//===----------------------------------------------------------------------===//
// ds-autodiff's accumulation and ds-adamw's @apply
//===----------------------------------------------------------------------===//

/// loss = sum(tanh(x @ W + b) * C): a rank-2 parameter (decayed) and a
/// rank-1 one (not decayed).
OpCase linearTanhCase() {
  return {"linear_tanh",
          {param({4, 3}), param({3, 5}), param({5})},
          [](OpBuilder &b, Location loc, ValueRange in) -> SmallVector<Value> {
            Value y = b.create<MatmulOp>(loc, in[0], in[1], false, false);
            y = b.create<AddOp>(loc, y, in[2]);
            return {b.create<TanhOp>(loc, y)};
          }};
}

struct TrainModule {
  MLIRContext ctx;
  std::unique_ptr<DiagnosticCapture> diags;
  OwningOpRef<ModuleOp> module;
  std::vector<ref::Tensor> values;
};

void buildTrainModule(TrainModule &tm, std::mt19937_64 &rng,
                      int64_t accumulationSteps, double gradClip,
                      double weightDecay) {
  loadDialects(tm.ctx);
  tm.diags = std::make_unique<DiagnosticCapture>(tm.ctx);
  OpCase c = linearTanhCase();
  for (const Input &input : c.inputs)
    tm.values.push_back(draw(input, rng));
  tm.module = buildModule(tm.ctx, c, tm.values, rng);
  PassManager pm(&tm.ctx);
  pm.addPass(createDsVerifyInput());
  DsAutodiffOptions ad;
  ad.accumulationSteps = accumulationSteps;
  pm.addPass(createDsAutodiff(ad));
  DsAdamWOptions opt;
  opt.beta1 = 0.9;
  opt.beta2 = 0.95;
  opt.eps = 1e-8;
  opt.weightDecay = weightDecay;
  opt.gradClip = gradClip;
  pm.addPass(createDsAdamW(opt));
  ASSERT_TRUE(succeeded(pm.run(*tm.module))) << tm.diags->text;
}

TEST(Autodiff, AccumulationStepsAverageMicroSteps) {
  uint64_t seed = testSeed();
  SCOPED_TRACE("DSC_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng1(seed), rng4(seed);
  TrainModule one, four;
  buildTrainModule(one, rng1, 1, 0.0, 0.0);
  // A power of two: the 1/N seed of each micro-step is exact in the f32
  // loss type (1/3 would be rounded to f32 there).
  buildTrainModule(four, rng4, 4, 0.0, 0.0);
  if (HasFatalFailure())
    return;
  Interpreter i1(*one.module, seed), i4(*four.module, seed);
  ASSERT_TRUE(succeeded(i1.initVariables()));
  ASSERT_TRUE(succeeded(i4.initVariables()));
  for (size_t i = 0; i < 3; ++i) {
    i1.variable(paramName(i)) = one.values[i];
    i4.variable(paramName(i)) = four.values[i];
  }
  std::vector<ref::Tensor> out;
  ASSERT_TRUE(succeeded(i1.run("micro_step", {}, out))) << one.diags->text;
  for (int k = 0; k < 4; ++k)
    ASSERT_TRUE(succeeded(i4.run("micro_step", {}, out))) << four.diags->text;
  // Four identical micro-steps of 1/4 each sum to one full gradient.
  for (size_t i = 0; i < 3; ++i) {
    const ref::Tensor &g1 = i1.variable(paramName(i) + ".grad");
    const ref::Tensor &g4 = i4.variable(paramName(i) + ".grad");
    for (size_t j = 0; j < g1.data.size(); ++j)
      EXPECT_NEAR(g4.data[j], g1.data[j],
                  1e-12 * std::max(1.0, std::abs(g1.data[j])))
          << paramName(i) << "[" << j << "]";
  }
}

void expectClose(const ref::Tensor &actual, const ref::Tensor &expected,
                 double relTol, const std::string &what) {
  ASSERT_EQ(actual.shape, expected.shape) << what;
  for (size_t i = 0; i < actual.data.size(); ++i)
    EXPECT_NEAR(actual.data[i], expected.data[i],
                relTol * std::abs(expected.data[i]) + 1e-300)
        << what << "[" << i << "]";
}

class AdamWApply : public ::testing::TestWithParam<double> {};

/// Two optimizer steps through @apply match ref::adamw on the same
/// gradients: moments, parameters, zeroed accumulators and the returned norm.
TEST_P(AdamWApply, MatchesReferenceAdamW) {
  const double clip = GetParam(), weightDecay = 0.1, lr = 0.01;
  uint64_t seed = testSeed();
  SCOPED_TRACE("DSC_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  TrainModule tm;
  buildTrainModule(tm, rng, 1, clip, weightDecay);
  if (HasFatalFailure())
    return;
  Interpreter interp(*tm.module, seed);
  ASSERT_TRUE(succeeded(interp.initVariables()));
  // in0 (x) is a parameter too here; all three get updated.
  std::vector<ref::AdamWState> expected;
  for (size_t i = 0; i < 3; ++i) {
    interp.variable(paramName(i)) = tm.values[i];
    ref::Tensor zeros(tm.values[i].shape);
    expected.push_back({tm.values[i], zeros, zeros});
  }
  // lr and step arrive as f32 scalars.
  const double lr32 = ref::roundToDType(lr, ref::DType::f32);
  for (uint32_t step = 1; step <= 2; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    std::vector<ref::Tensor> out;
    ASSERT_TRUE(succeeded(interp.run("micro_step", {}, out))) << tm.diags->text;
    std::vector<ref::Tensor> grads;
    double sumSq = 0;
    for (size_t i = 0; i < 3; ++i) {
      grads.push_back(interp.variable(paramName(i) + ".grad"));
      for (double g : grads.back().data)
        sumSq += g * g;
    }
    ASSERT_TRUE(succeeded(interp.run(
        "apply", {ref::Tensor::scalar(lr), ref::Tensor::scalar(double(step))},
        out)))
        << tm.diags->text;
    ASSERT_EQ(out.size(), 1u);
    double norm = out[0].data[0];
    // The norm is accumulated in f32.
    EXPECT_NEAR(norm, std::sqrt(sumSq), 1e-6 * std::sqrt(sumSq));
    double scale = 1.0;
    if (clip > 0) {
      scale = std::min(1.0, clip / (norm + 1e-6));
      EXPECT_LT(scale, 1.0) << "the test means to exercise clipping";
    }
    for (size_t i = 0; i < 3; ++i) {
      std::string name = paramName(i);
      double decay = tm.values[i].rank() >= 2 ? weightDecay : 0.0;
      ref::AdamWState &e = expected[i];
      auto next = ref::adamw(e.p, grads[i], e.m, e.v, lr32, step, 0.9, 0.95,
                             1e-8, decay, scale);
      ASSERT_TRUE(next.ok()) << next.error;
      e = next.value;
      // The clip scale is computed in f32 by @apply: 1e-6 relative.
      double tol = clip > 0 ? 1e-6 : 1e-12;
      expectClose(interp.variable(name + ".exp_avg"), e.m, tol, name + " m");
      expectClose(interp.variable(name + ".exp_avg_sq"), e.v, 2 * tol,
                  name + " v");
      expectClose(interp.variable(name), e.p, tol, name);
      for (double g : interp.variable(name + ".grad").data)
        ASSERT_EQ(g, 0.0) << name << ".grad is not zeroed";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Clip, AdamWApply, ::testing::Values(0.0, 1e-3),
                         [](const ::testing::TestParamInfo<double> &info) {
                           return info.param > 0 ? std::string("clipped")
                                                 : std::string("unclipped");
                         });

//===----------------------------------------------------------------------===//
// The interpreter itself
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> parse(MLIRContext &ctx, llvm::StringRef source) {
  loadDialects(ctx);
  return parseSourceString<ModuleOp>(source, &ctx);
}

TEST(Interpreter, RoundsResultsToTheirElementType) {
  MLIRContext ctx;
  DiagnosticCapture diags(ctx);
  auto module = parse(ctx, R"mlir(
    func.func @f(%a: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf64>) {
      %c = ds.constant dense<1.0e-09> : tensor<2xf32>
      %r = ds.add %a, %c : tensor<2xf32>, tensor<2xf32>
      %w = ds.cast %a : tensor<2xf32> -> tensor<2xf64>
      return %r, %w : tensor<2xf32>, tensor<2xf64>
    }
  )mlir");
  ASSERT_TRUE(module) << diags.text;
  Interpreter interp(*module);
  std::vector<ref::Tensor> out;
  ref::Tensor a({2}, {1.0, 0.1});
  ASSERT_TRUE(succeeded(interp.run("f", {a}, out))) << diags.text;
  float tenth = 0.1f;
  // 1 + 1e-9 is 1 in f32; the argument 0.1 arrives as the float 0.1f.
  EXPECT_EQ(out[0].data[0], 1.0);
  EXPECT_EQ(out[1].data[1], double(tenth));

  interp.setRounding(false);
  ASSERT_TRUE(succeeded(interp.run("f", {a}, out))) << diags.text;
  EXPECT_EQ(out[0].data[0], 1.0 + double(1.0e-09f));
  EXPECT_EQ(out[1].data[1], 0.1);
}

TEST(Interpreter, VariablesInitializeFromTheirNameStream) {
  MLIRContext ctx;
  DiagnosticCapture diags(ctx);
  auto module = parse(ctx, R"mlir(
    ds.variable param @w : tensor<3x4xf64> init normal std 2.000000e+00
    ds.variable param @h : tensor<5xf16> init normal std 1.000000e+00
    ds.variable param @o : tensor<2xf32> init ones
    func.func @forward() -> tensor<f32> {
      %w = ds.load @w : tensor<3x4xf64>
      %s = ds.reduce_sum %w axes [0, 1] : tensor<3x4xf64> -> tensor<f64>
      %l = ds.cast %s : tensor<f64> -> tensor<f32>
      return %l : tensor<f32>
    }
  )mlir");
  ASSERT_TRUE(module) << diags.text;
  Interpreter interp(*module, /*seed=*/1234);
  EXPECT_FALSE(interp.hasVariable("w"));
  ASSERT_TRUE(succeeded(interp.initVariables()));
  auto w = ref::init(ref::InitKind::Normal, {3, 4}, 1234,
                     dsc::rng::streamForName("w"), 0.0, 2.0);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(interp.variable("w").data, w.value.data);
  auto h = ref::init(ref::InitKind::Normal, {5}, 1234,
                     dsc::rng::streamForName("h"), 0.0, 1.0);
  ASSERT_TRUE(h.ok());
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(interp.variable("h").data[i],
              ref::roundToDType(h.value.data[i], ref::DType::f16));
  EXPECT_EQ(interp.variable("o").data, std::vector<double>(2, 1.0));

  std::vector<ref::Tensor> out;
  ASSERT_TRUE(succeeded(interp.run("forward", {}, out))) << diags.text;
  double sum = 0;
  for (double v : w.value.data)
    sum += v;
  EXPECT_EQ(out[0].data[0], ref::roundToDType(sum, ref::DType::f32));
}

TEST(Interpreter, StoresAndLoadsInProgramOrder) {
  MLIRContext ctx;
  DiagnosticCapture diags(ctx);
  auto module = parse(ctx, R"mlir(
    ds.variable param @v : tensor<2xf64> init zeros
    func.func @bump(%x: tensor<2xf64>) -> tensor<2xf64> {
      %a = ds.load @v : tensor<2xf64>
      %b = ds.add %a, %x : tensor<2xf64>, tensor<2xf64>
      ds.store %b, @v : tensor<2xf64>
      %c = ds.load @v : tensor<2xf64>
      %d = ds.add %c, %x : tensor<2xf64>, tensor<2xf64>
      return %d : tensor<2xf64>
    }
  )mlir");
  ASSERT_TRUE(module) << diags.text;
  Interpreter interp(*module);
  ASSERT_TRUE(succeeded(interp.initVariables()));
  std::vector<ref::Tensor> out;
  ref::Tensor x({2}, {1.0, 2.0});
  ASSERT_TRUE(succeeded(interp.run("bump", {x}, out))) << diags.text;
  EXPECT_EQ(out[0].data, (std::vector<double>{2.0, 4.0}));
  ASSERT_TRUE(succeeded(interp.run("bump", {x}, out))) << diags.text;
  EXPECT_EQ(interp.variable("v").data, (std::vector<double>{2.0, 4.0}));
  EXPECT_EQ(out[0].data, (std::vector<double>{3.0, 6.0}));
}

TEST(Interpreter, IntegerConstantsIotaAndEmbedding) {
  MLIRContext ctx;
  DiagnosticCapture diags(ctx);
  auto module = parse(ctx, R"mlir(
    func.func @f(%t: tensor<3x2xf64>) -> (tensor<2x2xf64>, tensor<2x3xi64>) {
      %i = ds.constant dense<[2, 0]> : tensor<2xi32>
      %e = ds.embedding %t, %i : tensor<3x2xf64>, tensor<2xi32> -> tensor<2x2xf64>
      %p = ds.iota dim 1 : tensor<2x3xi64>
      return %e, %p : tensor<2x2xf64>, tensor<2x3xi64>
    }
  )mlir");
  ASSERT_TRUE(module) << diags.text;
  Interpreter interp(*module);
  std::vector<ref::Tensor> out;
  ref::Tensor table({3, 2}, {0, 1, 2, 3, 4, 5});
  ASSERT_TRUE(succeeded(interp.run("f", {table}, out))) << diags.text;
  EXPECT_EQ(out[0].data, (std::vector<double>{4, 5, 0, 1}));
  EXPECT_EQ(out[1].data, (std::vector<double>{0, 1, 2, 0, 1, 2}));
}

TEST(Interpreter, DropoutMaskFollowsSeedAndStep) {
  MLIRContext ctx;
  DiagnosticCapture diags(ctx);
  auto module = parse(ctx, R"mlir(
    func.func @f(%x: tensor<64xf64>) -> tensor<64xf64> {
      %y = ds.dropout %x rate 5.000000e-01 id 7 : tensor<64xf64>
      return %y : tensor<64xf64>
    }
  )mlir");
  ASSERT_TRUE(module) << diags.text;
  Interpreter interp(*module, /*seed=*/99);
  ref::Tensor x(std::vector<int64_t>{64}, std::vector<double>(64, 1.0));
  std::vector<ref::Tensor> step4, step5;
  interp.setStep(4);
  ASSERT_TRUE(succeeded(interp.run("f", {x}, step4))) << diags.text;
  interp.setStep(5);
  ASSERT_TRUE(succeeded(interp.run("f", {x}, step5))) << diags.text;
  auto expected4 = ref::dropout(x, 0.5, 99, 7, 4);
  auto expected5 = ref::dropout(x, 0.5, 99, 7, 5);
  ASSERT_TRUE(expected4.ok() && expected5.ok());
  EXPECT_EQ(step4[0].data, expected4.value.data);
  EXPECT_EQ(step5[0].data, expected5.value.data);
  EXPECT_NE(step4[0].data, step5[0].data);
}

TEST(Interpreter, KernelErrorsAreReportedAtTheOp) {
  MLIRContext ctx;
  DiagnosticCapture diags(ctx);
  auto module = parse(ctx, R"mlir(
    func.func @f(%l: tensor<2x3xf64>) -> tensor<f64> {
      %t = ds.constant dense<[1, 5]> : tensor<2xi32>
      %c = ds.cross_entropy %l, %t : tensor<2x3xf64>, tensor<2xi32> -> tensor<f64> loc("the_loss")
      return %c : tensor<f64>
    }
  )mlir");
  ASSERT_TRUE(module) << diags.text;
  Interpreter interp(*module);
  std::vector<ref::Tensor> out;
  EXPECT_TRUE(failed(interp.run("f", {ref::Tensor({2, 3})}, out)));
  EXPECT_NE(diags.text.find("the_loss"), std::string::npos) << diags.text;
  EXPECT_NE(diags.text.find("interpreter: 'ds.cross_entropy' failed: "
                            "cross_entropy: target 5"),
            std::string::npos)
      << diags.text;
}

TEST(Interpreter, UnknownOpsAndBadArgumentsAreErrors) {
  MLIRContext ctx;
  DiagnosticCapture diags(ctx);
  auto module = parse(ctx, R"mlir(
    func.func @g(%x: tensor<2xf64>) -> tensor<2xf64> {
      return %x : tensor<2xf64>
    }
    func.func @f(%x: tensor<2xf64>) -> tensor<2xf64> {
      %y = func.call @g(%x) : (tensor<2xf64>) -> tensor<2xf64>
      return %y : tensor<2xf64>
    }
  )mlir");
  ASSERT_TRUE(module) << diags.text;
  Interpreter interp(*module);
  std::vector<ref::Tensor> out;
  EXPECT_TRUE(failed(interp.run("f", {ref::Tensor({2})}, out)));
  EXPECT_NE(diags.text.find("interpreter: no rule for 'func.call'"),
            std::string::npos)
      << diags.text;
  EXPECT_TRUE(failed(interp.run("g", {ref::Tensor({3})}, out)));
  EXPECT_NE(diags.text.find("argument #0 of @g has shape [3]"),
            std::string::npos)
      << diags.text;
  EXPECT_TRUE(failed(interp.run("h", {}, out)));
  EXPECT_NE(diags.text.find("no func.func @h"), std::string::npos)
      << diags.text;
}

} // namespace
