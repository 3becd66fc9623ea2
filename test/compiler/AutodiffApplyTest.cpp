//===- AutodiffApplyTest.cpp - ds-autodiff's accumulation and ds-adamw's @apply
//---===//

#include "test/compiler/VJPTestSupport.h"

using namespace mlir;
using namespace mlir::ds;
using namespace dsc::vjptest;
namespace ref = dsc::ref;
using dsc::Interpreter;

namespace {

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

/// Within relTol of |expected|, or of `scale[i]` where given: a sum whose
/// terms cancel is only as exact as its terms.
void expectClose(const ref::Tensor &actual, const ref::Tensor &expected,
                 double relTol, const std::string &what,
                 const std::vector<double> &scale = {}) {
  ASSERT_EQ(actual.shape, expected.shape) << what;
  for (size_t i = 0; i < actual.data.size(); ++i) {
    double size = std::abs(expected.data[i]);
    if (!scale.empty())
      size = std::max(size, scale[i]);
    EXPECT_NEAR(actual.data[i], expected.data[i], relTol * size + 1e-300)
        << what << "[" << i << "]";
  }
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
      // m = 0.9 m' + 0.1 scale g: the f32 clip scale's error is relative to
      // these terms, which can cancel (seed 12434500584679537046 makes an
      // m of 3e-9 from terms of 1e-8).
      std::vector<double> terms(e.m.data.size());
      for (size_t j = 0; j < terms.size(); ++j)
        terms[j] = 0.9 * std::abs(e.m.data[j]) +
                   0.1 * scale * std::abs(grads[i].data[j]);
      auto next = ref::adamw(e.p, grads[i], e.m, e.v, lr32, step, 0.9, 0.95,
                             1e-8, decay, scale);
      ASSERT_TRUE(next.ok()) << next.error;
      e = next.value;
      // The clip scale is computed in f32 by @apply: 1e-6 relative.
      double tol = clip > 0 ? 1e-6 : 1e-12;
      expectClose(interp.variable(name + ".exp_avg"), e.m, tol, name + " m",
                  terms);
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

} // namespace
