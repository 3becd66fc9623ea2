//===- VJPTest.cpp - every VJP rule against finite differences
//--------------===//

#include "test/compiler/VJPTestSupport.h"

using namespace mlir;
using namespace mlir::ds;
using namespace dsc::vjptest;
namespace ref = dsc::ref;
using dsc::Interpreter;

namespace {

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
  // SwiGLU: equal shapes, gate and up both differentiated.
  for (const ref::Shape &shape : unaryShapes)
    cases.push_back({"swiglu_" + shapeName(shape),
                     {param(shape), param(shape)},
                     binaryOp<SwigluOp>()});
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
               causal ? b.getUnitAttr() : UnitAttr(), UnitAttr())};
         }});
  }
  // seq_major: [B, T, H, D] (2 positions of 3 queries, 5 keys, 2 heads).
  cases.push_back(
      {"attention_seq_major",
       {param({2, 3, 2, 4}), param({2, 5, 2, 4}), param({2, 5, 2, 3})},
       [](OpBuilder &b, Location loc, ValueRange in) -> SmallVector<Value> {
         return {b.create<AttentionOp>(loc, in[0], in[1], in[2],
                                       b.getF64FloatAttr(0.5), b.getUnitAttr(),
                                       b.getUnitAttr())};
       }});

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
                                      inverse ? b.getUnitAttr() : UnitAttr(),
                                      UnitAttr())};
         }});
  cases.push_back(
      {"rotary_seq_major",
       {param({2, 5, 2, 4})},
       [](OpBuilder &b, Location loc, ValueRange in) -> SmallVector<Value> {
         return {b.create<RotaryOp>(loc, in[0], b.getF64FloatAttr(10.0),
                                    UnitAttr(), b.getUnitAttr())};
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

} // namespace
