//===- PhasesTest.cpp - later phases compute what `train` computes -------===//
//
// Fusion (ds-fuse), scheduling (ds-schedule) and storing gradients instead
// of accumulating them (ds-store-gradients) only regroup, reorder and drop
// additions of zero: through the interpreter, two training steps after them
// give bitwise the same losses, norms, updated parameters and moments as
// right after phase `train`, dropout included.
//
//===----------------------------------------------------------------------===//

#include "compiler/Pipelines.h"
#include "compiler/interpreter/Interpreter.h"
#include "dialects/ds/DsOps.h"
#include "models/Models.h"
#include "test/support/TestSeed.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

using namespace mlir;

namespace {

struct StepResult {
  double loss[2] = {0, 0}, norm[2] = {0, 0};
  /// Parameters and optimizer moments after the second step. Gradient
  /// accumulators are left out: with one micro-step a step, phase
  /// `scheduled` stores each gradient instead of adding it to a zeroed
  /// accumulator (ds-store-gradients), so after @apply they hold the last
  /// gradient rather than zeros; the second step shows nothing read them.
  llvm::StringMap<std::vector<double>> variables;
};

/// Two training steps (micro_step, apply) after `phase`, the second on the
/// first's batch reversed.
StepResult runTwoSteps(MLIRContext &ctx, llvm::StringRef spec, dsc::Phase phase,
                       std::vector<double> tokens,
                       std::vector<double> targets) {
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
  auto micro = module->lookupSymbol<func::FuncOp>("micro_step");
  auto shape = cast<RankedTensorType>(micro.getArgumentTypes()[0]).getShape();
  std::vector<int64_t> dims(shape.begin(), shape.end());
  StepResult r;
  for (int step = 0; step < 2; ++step) {
    interp.setStep(3 + step);
    std::vector<dsc::ref::Tensor> args = {dsc::ref::Tensor(dims, tokens),
                                          dsc::ref::Tensor(dims, targets)};
    std::vector<dsc::ref::Tensor> results;
    EXPECT_TRUE(succeeded(interp.run("micro_step", args, results)));
    r.loss[step] = results.at(0).data.at(0);
    std::vector<dsc::ref::Tensor> applyArgs = {
        dsc::ref::Tensor::scalar(1e-2), dsc::ref::Tensor::scalar(1 + step)};
    EXPECT_TRUE(succeeded(interp.run("apply", applyArgs, results)));
    r.norm[step] = results.at(0).data.at(0);
    std::reverse(tokens.begin(), tokens.end());
    std::reverse(targets.begin(), targets.end());
  }
  llvm::StringSet<> accumulators;
  for (auto var : module->getOps<mlir::ds::VariableOp>())
    if (var.getKind() == mlir::ds::VariableKind::grad)
      accumulators.insert(var.getSymName());
  for (const auto &entry : interp.variables())
    if (!accumulators.contains(entry.getKey()))
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
      runTwoSteps(ctx, GetParam(), dsc::Phase::Train, tokens, targets);
  StepResult late =
      runTwoSteps(ctx, GetParam(), dsc::Phase::Scheduled, tokens, targets);
  for (int step = 0; step < 2; ++step) {
    EXPECT_EQ(base.loss[step], late.loss[step]) << "step " << step;
    EXPECT_EQ(base.norm[step], late.norm[step]) << "step " << step;
  }
  ASSERT_FALSE(base.variables.empty());
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
