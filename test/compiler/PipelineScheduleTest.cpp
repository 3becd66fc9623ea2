//===- PipelineScheduleTest.cpp - pipeline stages against one rank --------===//
//
// Phase pipeline's stage functions (ds-pipeline-cut, ds-autodiff,
// ds-pipeline) run together in float64 by a small simulator: each stage
// interprets its @pipeline_step_s op by op with its own copy of the
// variables, a dist.send posts to a mailbox and a dist.recv waits for its
// message (the stages take turns until each is done, so a schedule that
// deadlocks fails). After one step every stage's gradient accumulators
// must equal one rank's after the same micro-batches through @micro_step
// (the tied embedding's: the stages' copies summed), and the last stage's
// loss the mean of one rank's. No runtime is involved: this checks the
// IR's numbers before any plan runs a stage.
//
//===----------------------------------------------------------------------===//

#include "compiler/interpreter/Interpreter.h"
#include "compiler/interpreter/Widen.h"
#include "dialects/dist/DistOps.h"
#include "dialects/ds/DsOps.h"
#include "models/Models.h"
#include "passes/Passes.h"
#include "runtime/reference/RefKernels.h"
#include "test/compiler/TestSupport.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace mlir;
using namespace mlir::ds;
namespace ref = dsc::ref;
using dsc::Interpreter;
using dsc::test::DiagnosticCapture;

namespace {

constexpr int64_t kBatch = 2, kSeqLen = 5, kVocab = 11, kSeed = 7;

struct Case {
  std::string name, spec;
  int64_t stages, microBatches;
  std::string schedule;
};

std::ostream &operator<<(std::ostream &os, const Case &c) {
  return os << c.name;
}

OwningOpRef<ModuleOp> build(MLIRContext &ctx, const Case &c, bool pipelined,
                            std::string &error) {
  OwningOpRef<ModuleOp> module =
      dsc::models::buildModel(ctx, c.spec, kBatch, error);
  if (!module || failed(dsc::widenToF64(*module)))
    return nullptr;
  PassManager pm(&ctx);
  pm.addPass(createDsVerifyInput());
  if (pipelined) {
    DsPipelineCutOptions cut;
    cut.stages = c.stages;
    pm.addPass(createDsPipelineCut(cut));
  }
  DsAutodiffOptions ad;
  ad.accumulationSteps = c.microBatches;
  pm.addPass(createDsAutodiff(ad));
  if (pipelined) {
    DsPipelineOptions p;
    p.stages = c.stages;
    p.microBatches = c.microBatches;
    p.schedule = c.schedule;
    pm.addPass(createDsPipeline(p));
  }
  if (failed(pm.run(*module)))
    return nullptr;
  return module;
}

/// One stage's run through its function, op by op.
struct StageRun {
  func::FuncOp func;
  Block::iterator next;
  llvm::DenseMap<Value, ref::Tensor> values;
  llvm::StringMap<ref::Tensor> vars;
  double loss = 0;
  bool done = false;
};

using Mailbox = std::map<std::pair<int64_t, int64_t>, ref::Tensor>;

/// Runs ops until the stage finishes or waits for a message; whether it
/// ran any. Fails the test on an op the simulator cannot run.
bool advance(StageRun &s, Mailbox &mail, const dsc::EvalContext &ctx) {
  bool ran = false;
  while (!s.done) {
    Operation &op = *s.next;
    if (auto recv = dyn_cast<dist::RecvOp>(op)) {
      auto it = mail.find({recv.getTransfer(), recv.getMicroBatch()});
      if (it == mail.end())
        return ran;
      s.values[recv.getResult()] = it->second;
    } else if (auto send = dyn_cast<dist::SendOp>(op)) {
      mail[{send.getTransfer(), send.getMicroBatch()}] = s.values[send.getX()];
    } else if (auto load = dyn_cast<LoadOp>(op)) {
      s.values[load.getResult()] = s.vars[load.getName()];
    } else if (auto store = dyn_cast<StoreOp>(op)) {
      s.vars[store.getName()] = s.values[store.getValue()];
    } else if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      s.loss = s.values[ret.getOperand(0)].data[0];
      s.done = true;
    } else {
      std::vector<const ref::Tensor *> in;
      for (Value v : op.getOperands())
        in.push_back(&s.values[v]);
      auto out = dsc::evaluateOp(&op, in, ctx);
      if (!out.ok()) {
        ADD_FAILURE() << op.getName().getStringRef().str() << ": " << out.error;
        s.done = true;
        return ran;
      }
      for (auto [r, t] : llvm::zip(op.getResults(), out.value))
        s.values[r] = t;
    }
    ++s.next;
    ran = true;
  }
  return ran;
}

class PipelineScheduleTest : public ::testing::TestWithParam<Case> {};

TEST_P(PipelineScheduleTest, StagesMatchOneRank) {
  const Case &c = GetParam();
  DialectRegistry registry;
  registerDistGradients(registry); // dist.transfer's gradient
  MLIRContext ctx(registry);
  DiagnosticCapture diags(ctx);
  std::string error;
  OwningOpRef<ModuleOp> one = build(ctx, c, false, error);
  ASSERT_TRUE(one) << error << diags.text;
  OwningOpRef<ModuleOp> piped = build(ctx, c, true, error);
  ASSERT_TRUE(piped) << error << diags.text;

  const int64_t m = c.microBatches;
  std::mt19937_64 rng(kSeed);
  std::uniform_int_distribution<int64_t> token(0, kVocab - 1);
  ref::Tensor tokens({m * kBatch, kSeqLen}), targets({m * kBatch, kSeqLen});
  for (double &t : tokens.data)
    t = double(token(rng));
  for (double &t : targets.data)
    t = double(token(rng));
  auto rows = [&](const ref::Tensor &whole, int64_t i) {
    ref::Tensor part({kBatch, kSeqLen});
    std::copy_n(whole.data.begin() + i * kBatch * kSeqLen, kBatch * kSeqLen,
                part.data.begin());
    return part;
  };

  // One rank: m micro-steps accumulate the step's gradients.
  Interpreter reference(*one, kSeed);
  reference.setRounding(false);
  ASSERT_TRUE(succeeded(reference.initVariables())) << diags.text;
  double meanLoss = 0;
  for (int64_t i = 0; i < m; ++i) {
    std::vector<ref::Tensor> out;
    ASSERT_TRUE(succeeded(
        reference.run("micro_step", {rows(tokens, i), rows(targets, i)}, out)))
        << diags.text;
    meanLoss += out[0].data[0] / double(m);
  }

  // The stages, each with the same initial variables.
  Interpreter init(*piped, kSeed);
  ASSERT_TRUE(succeeded(init.initVariables())) << diags.text;
  std::vector<StageRun> runs(c.stages);
  for (int64_t s = 0; s < c.stages; ++s) {
    StageRun &r = runs[s];
    r.func =
        piped->lookupSymbol<func::FuncOp>("pipeline_step_" + std::to_string(s));
    ASSERT_TRUE(r.func);
    r.next = r.func.front().begin();
    r.vars = init.variables();
    r.values[r.func.getArgument(0)] = tokens;
    r.values[r.func.getArgument(1)] = targets;
  }
  Mailbox mail;
  dsc::EvalContext evalContext;
  evalContext.round = false;
  for (bool progress = true; progress;) {
    progress = false;
    for (StageRun &r : runs)
      progress |= advance(r, mail, evalContext);
  }
  for (int64_t s = 0; s < c.stages; ++s)
    ASSERT_TRUE(runs[s].done) << "stage " << s << " waits for a message "
                              << "no stage sends: the schedule deadlocks";
  EXPECT_NEAR(runs.back().loss, meanLoss, 1e-12 * std::abs(meanLoss));

  // Each accumulator one rank has: the sum of the stages' copies (one
  // stage's, but for a tied parameter's).
  int checked = 0;
  for (const auto &entry : reference.variables()) {
    llvm::StringRef name = entry.getKey();
    if (!name.ends_with(".grad"))
      continue;
    const ref::Tensor &want = entry.getValue();
    std::vector<double> sum(want.data.size(), 0.0);
    int holders = 0;
    for (StageRun &r : runs) {
      const ref::Tensor &got = r.vars[name];
      bool stored = llvm::any_of(got.data, [](double v) { return v != 0; });
      if (!stored)
        continue;
      ++holders;
      for (size_t i = 0; i < sum.size(); ++i)
        sum[i] += got.data[i];
    }
    EXPECT_GE(holders, 1) << name.str() << ": no stage accumulated it";
    for (size_t i = 0; i < sum.size(); ++i)
      ASSERT_NEAR(sum[i], want.data[i],
                  1e-12 * std::max(1.0, std::abs(want.data[i])))
          << name.str() << "[" << i << "]";
    ++checked;
  }
  EXPECT_GT(checked, 10);
}

const Case kCases[] = {
    {"gpt2_2x4_1f1b",
     "gpt2:n_layer=2,n_head=2,n_embd=8,block_size=5,vocab_size=11", 2, 4,
     "1f1b"},
    {"gpt2_2x4_gpipe",
     "gpt2:n_layer=2,n_head=2,n_embd=8,block_size=5,vocab_size=11", 2, 4,
     "gpipe"},
    {"gpt2_4x8_1f1b",
     "gpt2:n_layer=4,n_head=2,n_embd=8,block_size=5,vocab_size=11", 4, 8,
     "1f1b"},
    {"llama_2x4_1f1b",
     "llama:dim=8,n_layer=2,n_head=2,hidden_dim=12,vocab_size=11,block_size=5",
     2, 4, "1f1b"},
    {"llama_3x4_gpipe",
     "llama:dim=8,n_layer=3,n_head=2,hidden_dim=12,vocab_size=11,block_size=5",
     3, 4, "gpipe"},
};

INSTANTIATE_TEST_SUITE_P(Schedules, PipelineScheduleTest,
                         ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return info.param.name;
                         });

} // namespace
