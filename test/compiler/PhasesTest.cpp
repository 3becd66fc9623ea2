//===- PhasesTest.cpp - later phases compute what `train` computes -------===//
//
// Fusion (ds-fuse) and scheduling (ds-schedule) only regroup and reorder the
// training step: through the interpreter, a micro-step and an optimizer step
// after them give bitwise the same loss, gradients and updated parameters as
// right after phase `train`, dropout included.
//
//===----------------------------------------------------------------------===//

#include "compiler/Pipelines.h"
#include "compiler/interpreter/Interpreter.h"
#include "models/Models.h"
#include "test/support/TestSeed.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <random>

using namespace mlir;

namespace {

struct StepResult {
  double loss = 0, norm = 0;
  llvm::StringMap<std::vector<double>> variables;
};

StepResult runStep(MLIRContext &ctx, llvm::StringRef spec, dsc::Phase phase,
                   const std::vector<double> &tokens,
                   const std::vector<double> &targets) {
  std::string error;
  OwningOpRef<ModuleOp> module = dsc::models::buildModel(ctx, spec, 2, error);
  EXPECT_TRUE(module) << error;
  PassManager pm(&ctx);
  dsc::TrainOptions options;
  options.adamw.gradClip = 1.0;
  dsc::buildPipeline(pm, phase, options);
  EXPECT_TRUE(succeeded(pm.run(*module)));

  dsc::Interpreter interp(*module, /*seed=*/7);
  EXPECT_TRUE(succeeded(interp.initVariables()));
  interp.setStep(3);
  auto micro = module->lookupSymbol<func::FuncOp>("micro_step");
  auto shape = cast<RankedTensorType>(micro.getArgumentTypes()[0]).getShape();
  std::vector<int64_t> dims(shape.begin(), shape.end());
  std::vector<dsc::ref::Tensor> args = {dsc::ref::Tensor(dims, tokens),
                                        dsc::ref::Tensor(dims, targets)};
  std::vector<dsc::ref::Tensor> results;
  EXPECT_TRUE(succeeded(interp.run("micro_step", args, results)));
  StepResult r;
  r.loss = results.at(0).data.at(0);
  std::vector<dsc::ref::Tensor> applyArgs = {dsc::ref::Tensor::scalar(1e-2),
                                             dsc::ref::Tensor::scalar(1)};
  EXPECT_TRUE(succeeded(interp.run("apply", applyArgs, results)));
  r.norm = results.at(0).data.at(0);
  for (const auto &entry : interp.variables())
    r.variables[entry.getKey()] = entry.getValue().data;
  return r;
}

class PhasesTest : public testing::TestWithParam<const char *> {};

TEST_P(PhasesTest, FusionAndSchedulingPreserveTheStep) {
  MLIRContext ctx;
  DialectRegistry registry;
  dsc::registerAll(registry);
  ctx.appendDialectRegistry(registry);
  ctx.loadAllAvailableDialects();

  const uint64_t seed = dsc::test::testSeed();
  SCOPED_TRACE(dsc::test::seedNote(seed));
  std::mt19937_64 rng(seed);
  std::vector<double> tokens(2 * 8), targets(2 * 8);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = rng() % 13;
    targets[i] = rng() % 13;
  }
  StepResult base =
      runStep(ctx, GetParam(), dsc::Phase::Train, tokens, targets);
  StepResult late =
      runStep(ctx, GetParam(), dsc::Phase::Scheduled, tokens, targets);
  EXPECT_EQ(base.loss, late.loss);
  EXPECT_EQ(base.norm, late.norm);
  ASSERT_EQ(base.variables.size(), late.variables.size());
  for (const auto &entry : base.variables)
    EXPECT_EQ(entry.getValue(), late.variables.lookup(entry.getKey()))
        << entry.getKey().str();
}

INSTANTIATE_TEST_SUITE_P(
    Models, PhasesTest,
    testing::Values(
        "gpt2:n_layer=2,n_head=2,n_embd=8,block_size=8,vocab_size=13",
        "gpt2:n_layer=1,n_head=2,n_embd=8,block_size=8,vocab_size=13,bias=0,"
        "dropout=0.1",
        "llama:dim=8,n_layer=2,n_head=2,hidden_dim=12,vocab_size=13,"
        "block_size=8"));

} // namespace
