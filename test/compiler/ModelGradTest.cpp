//===- ModelGradTest.cpp - whole-model gradients against finite differences
//===//
//
// The built-in models at tiny sizes, widened from f32 to f64 (the loss is
// cast back to the contract's f32), go through ds-verify-input and
// ds-autodiff; the interpreter's @micro_step gradient of a sample of
// parameter elements (every parameter tensor, and several elements of the
// tied GPT-2 embedding) must match central finite differences of @forward.
// Finite differences run with rounding off, so the whole loss is float64.
//
// Tokens, targets and parameter values are drawn fresh each run; a failure
// prints the seed, and DSC_TEST_SEED=<seed> replays it.
//
//===----------------------------------------------------------------------===//

#include "compiler/interpreter/Interpreter.h"
#include "compiler/interpreter/Widen.h"
#include "dialects/ds/DsOps.h"
#include "models/Models.h"
#include "passes/Passes.h"
#include "runtime/reference/RefKernels.h"
#include "test/compiler/TestSupport.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace mlir;
using namespace mlir::ds;
namespace ref = dsc::ref;
using dsc::Interpreter;

namespace {

using dsc::test::DiagnosticCapture;
using dsc::test::testSeed;

struct ModelCase {
  std::string name;
  std::string spec;
  int64_t vocab, seqLen;
  /// The tied embedding, sampled more densely (both of its uses).
  std::string tied;
};

std::ostream &operator<<(std::ostream &os, const ModelCase &c) {
  return os << c.spec;
}

const ModelCase kCases[] = {
    {"gpt2", "gpt2:n_layer=2,n_head=2,n_embd=8,block_size=5,vocab_size=11", 11,
     5, "transformer.wte.weight"},
    {"gpt2_nobias",
     "gpt2:n_layer=2,n_head=2,n_embd=8,block_size=5,vocab_size=11,bias=0", 11,
     5, "transformer.wte.weight"},
    {"gpt2_dropout",
     "gpt2:n_layer=2,n_head=2,n_embd=8,block_size=5,vocab_size=11,dropout=0.2",
     11, 5, "transformer.wte.weight"},
    {"llama",
     "llama:dim=8,n_layer=2,n_head=2,hidden_dim=12,vocab_size=11,block_size=5",
     11, 5, ""},
};

constexpr int64_t kBatch = 2;
constexpr double kTolerance = 1e-6;
/// Extra elements drawn anywhere, on top of one per parameter tensor.
constexpr int kExtraSamples = 8;

class ModelGradTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(ModelGradTest, MatchesFiniteDifferences) {
  const ModelCase &c = GetParam();
  uint64_t seed = testSeed();
  SCOPED_TRACE("DSC_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);

  MLIRContext ctx;
  DiagnosticCapture diags(ctx);
  std::string error;
  OwningOpRef<ModuleOp> module =
      dsc::models::buildModel(ctx, c.spec, kBatch, error);
  ASSERT_TRUE(module) << error << diags.text;
  ASSERT_TRUE(succeeded(dsc::widenToF64(*module))) << diags.text;

  PassManager pm(&ctx);
  pm.addPass(createDsVerifyInput());
  pm.addPass(createDsAutodiff());
  ASSERT_TRUE(succeeded(pm.run(*module))) << diags.text;

  // Tokens anywhere in the vocabulary; one target ignored (-1).
  std::uniform_int_distribution<int64_t> token(0, c.vocab - 1);
  ref::Tensor tokens({kBatch, c.seqLen}), targets({kBatch, c.seqLen});
  for (double &t : tokens.data)
    t = double(token(rng));
  for (double &t : targets.data)
    t = double(token(rng));
  targets.data[1] = -1;
  std::vector<ref::Tensor> args{tokens, targets};

  // Parameters away from their initializers, so that every path (biases,
  // norm weights) carries a sizeable gradient.
  Interpreter interp(*module, seed);
  interp.setStep(1);
  ASSERT_TRUE(succeeded(interp.initVariables())) << diags.text;
  std::normal_distribution<double> normal;
  std::vector<std::string> params;
  for (auto var : module->getOps<VariableOp>()) {
    if (var.getKind() != VariableKind::param)
      continue;
    params.push_back(var.getSymName().str());
    bool ones = var.getInit() == InitKind::ones;
    for (double &v : interp.variable(var.getSymName()).data)
      v = ones ? 1.0 + 0.2 * normal(rng) : 0.4 * normal(rng);
  }
  ASSERT_FALSE(params.empty());

  std::vector<ref::Tensor> out;
  ASSERT_TRUE(succeeded(interp.run("micro_step", args, out))) << diags.text;
  ASSERT_EQ(out.size(), 1u);
  const double loss = out[0].data[0];
  EXPECT_TRUE(std::isfinite(loss));

  // One element of every parameter, a few anywhere, and for a tied
  // embedding a row some token reads (embedding + lm_head) and a random one.
  std::vector<std::pair<std::string, size_t>> samples;
  auto pick = [&](const std::string &name, size_t lo, size_t hi) {
    std::uniform_int_distribution<size_t> index(lo, hi - 1);
    samples.push_back({name, index(rng)});
  };
  for (const std::string &p : params)
    pick(p, 0, interp.variable(p).data.size());
  std::uniform_int_distribution<size_t> anyParam(0, params.size() - 1);
  for (int i = 0; i < kExtraSamples; ++i) {
    const std::string &p = params[anyParam(rng)];
    pick(p, 0, interp.variable(p).data.size());
  }
  if (!c.tied.empty()) {
    ASSERT_TRUE(interp.hasVariable(c.tied));
    const ref::Tensor &table = interp.variable(c.tied);
    size_t width = size_t(table.shape[1]);
    size_t row = size_t(tokens.data[0]);
    pick(c.tied, row * width, (row + 1) * width);
    pick(c.tied, 0, table.data.size());
    pick(c.tied, 0, table.data.size());
  }

  interp.setRounding(false);
  auto forwardLoss = [&]() {
    std::vector<ref::Tensor> o;
    if (failed(interp.run("forward", args, o)) || o.size() != 1) {
      ADD_FAILURE() << "@forward failed: " << diags.text;
      return std::nan("");
    }
    return o[0].data[0];
  };
  EXPECT_NEAR(forwardLoss(), loss, 1e-6 * std::abs(loss))
      << "@forward and @micro_step disagree on the loss";
  for (const auto &[name, index] : samples) {
    ASSERT_TRUE(interp.hasVariable(name + ".grad"))
        << "ds-autodiff gave @" << name << " no gradient accumulator";
    double grad = interp.variable(name + ".grad").data[index];
    ref::Tensor &param = interp.variable(name);
    double x = param.data[index];
    double h = 1e-6 * std::max(1.0, std::abs(x));
    double xp = x + h, xm = x - h;
    param.data[index] = xp;
    double lp = forwardLoss();
    param.data[index] = xm;
    double lm = forwardLoss();
    param.data[index] = x;
    double fd = (lp - lm) / (xp - xm);
    EXPECT_NEAR(grad, fd, kTolerance * std::max(1.0, std::abs(grad)))
        << "@" << name << "[" << index << "] (flat index)";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ModelGradTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<ModelCase> &info) {
                           return info.param.name;
                         });

} // namespace
