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
// loss the mean of one rank's; after the stages' @apply_s every parameter
// is one rank's; the stages' @eval_s gives one rank's held-out loss and
// logits. No runtime is involved: this checks the IR's numbers before any
// plan runs a stage.
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
  int64_t virtualStages = 1; ///< interleaved: chunks a stage
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
    cut.stages = c.stages * c.virtualStages;
    pm.addPass(createDsPipelineCut(cut));
  }
  DsAutodiffOptions ad;
  ad.accumulationSteps = c.microBatches;
  pm.addPass(createDsAutodiff(ad));
  DsAdamWOptions adamw;
  adamw.gradClip = 1e-3; // clips: the global norm scales every update
  pm.addPass(createDsAdamW(adamw));
  pm.addPass(createDsEval());
  if (pipelined) {
    DsPipelineOptions p;
    p.stages = c.stages;
    p.microBatches = c.microBatches;
    p.schedule = c.schedule;
    p.virtualStages = c.virtualStages;
    pm.addPass(createDsPipeline(p));
  }
  if (failed(pm.run(*module)))
    return nullptr;
  return module;
}

/// One stage's run through a function, op by op.
struct StageRun {
  int64_t stage = 0;
  func::FuncOp func;
  Block::iterator next;
  llvm::DenseMap<Value, ref::Tensor> values;
  llvm::StringMap<ref::Tensor> vars;
  /// Collectives started per group, and whether this one was posted.
  std::map<int64_t, int64_t> started;
  bool posted = false;
  std::vector<ref::Tensor> results;
  bool done = false;
};

/// What the stages exchange: sends by (transfer, micro-batch); all-reduce
/// contributions by (group, index in the group's order), per stage.
struct Exchange {
  std::map<std::pair<int64_t, int64_t>, ref::Tensor> mail;
  std::map<std::pair<int64_t, int64_t>, std::map<int64_t, ref::Tensor>> sums;
};

/// An all-reduce over a group of stages: false while a member has not
/// posted its part.
bool allReduce(StageRun &s, dist::AllReduceOp op, Exchange &x) {
  auto group = op->getAttrOfType<IntegerAttr>(dist::kPipelineGroupAttr);
  EXPECT_TRUE(group) << "an all-reduce without dist.pipeline_group";
  const int64_t mask = group ? group.getInt() : 0;
  auto key = std::make_pair(mask, s.started[mask]);
  auto &parts = x.sums[key];
  if (!s.posted) {
    parts[s.stage] = s.values[op.getX()];
    s.posted = true;
  }
  if (int64_t(parts.size()) != llvm::popcount(uint64_t(mask)))
    return false;
  ref::Tensor sum = parts.begin()->second;
  for (double &v : sum.data)
    v = 0;
  for (const auto &[stage, part] : parts)
    for (size_t i = 0; i < sum.data.size(); ++i)
      sum.data[i] += part.data[i];
  for (double &v : sum.data)
    v *= op.getScale().convertToDouble();
  s.values[op.getResult()] = sum;
  s.posted = false;
  ++s.started[mask];
  return true;
}

/// Runs ops until the stage finishes or waits for another; whether it ran
/// any. Fails the test on an op the simulator cannot run.
bool advance(StageRun &s, Exchange &x, const dsc::EvalContext &ctx) {
  bool ran = false;
  while (!s.done) {
    Operation &op = *s.next;
    if (auto recv = dyn_cast<dist::RecvOp>(op)) {
      auto it = x.mail.find({recv.getTransfer(), recv.getMicroBatch()});
      if (it == x.mail.end())
        return ran;
      s.values[recv.getResult()] = it->second;
    } else if (auto reduce = dyn_cast<dist::AllReduceOp>(op)) {
      if (!allReduce(s, reduce, x))
        return ran;
    } else if (auto wait = dyn_cast<dist::WaitOp>(op)) {
      s.values[wait.getResult()] = s.values[wait.getX()];
    } else if (auto send = dyn_cast<dist::SendOp>(op)) {
      x.mail[{send.getTransfer(), send.getMicroBatch()}] =
          s.values[send.getX()];
    } else if (auto load = dyn_cast<LoadOp>(op)) {
      s.values[load.getResult()] = s.vars[load.getName()];
    } else if (auto store = dyn_cast<StoreOp>(op)) {
      s.vars[store.getName()] = s.values[store.getValue()];
    } else if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (Value v : ret.getOperands())
        s.results.push_back(s.values[v]);
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

/// Runs `name`_s on every stage together; false if they deadlock.
bool runStages(ModuleOp module, const std::string &name,
               std::vector<StageRun> &runs,
               const std::vector<ref::Tensor> &args) {
  Exchange x;
  for (StageRun &r : runs) {
    r.func =
        module.lookupSymbol<func::FuncOp>(name + "_" + std::to_string(r.stage));
    if (!r.func)
      return false;
    r.next = r.func.front().begin();
    r.values.clear();
    r.results.clear();
    r.done = false;
    for (auto [arg, value] : llvm::zip(r.func.getArguments(), args))
      r.values[arg] = value;
  }
  dsc::EvalContext ctx;
  ctx.seed = kSeed; // as the reference interpreter's: dropout's masks
  ctx.round = false;
  for (bool progress = true; progress;) {
    progress = false;
    for (StageRun &r : runs)
      progress |= advance(r, x, ctx);
  }
  return llvm::all_of(runs, [](const StageRun &r) { return r.done; });
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
    reference.setSampleOffset(uint64_t(i * kBatch)); // dropout's keys
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
    runs[s].stage = s;
    runs[s].vars = init.variables();
  }
  ASSERT_TRUE(runStages(*piped, "pipeline_step", runs, {tokens, targets}))
      << "a stage waits for a message no stage sends: the schedule "
         "deadlocks";
  const double lastLoss = runs.back().results.at(0).data[0];
  EXPECT_NEAR(lastLoss, meanLoss, 1e-12 * std::abs(meanLoss));

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

  // The optimizer step: every stage's parameters (a tied one on each of
  // its stages) as one rank's after @apply, and the same global norm.
  const ref::Tensor lr = ref::Tensor::scalar(1e-2),
                    step = ref::Tensor::scalar(1);
  std::vector<ref::Tensor> norm;
  ASSERT_TRUE(succeeded(reference.run("apply", {lr, step}, norm)))
      << diags.text;
  ASSERT_TRUE(runStages(*piped, "apply", runs, {lr, step}));
  for (StageRun &r : runs)
    EXPECT_NEAR(r.results.at(0).data[0], norm.at(0).data[0],
                1e-12 * norm[0].data[0])
        << "stage " << r.stage << "'s global norm";
  int params = 0;
  for (auto var : one->getOps<VariableOp>()) {
    if (var.getKind() != VariableKind::param)
      continue;
    const ref::Tensor &want = reference.variable(var.getSymName());
    int holders = 0;
    for (StageRun &r : runs) {
      if (!r.vars.count(var.getSymName()) ||
          r.vars[var.getSymName()].data == init.variable(var.getSymName()).data)
        continue; // not this stage's: never updated
      ++holders;
      const ref::Tensor &got = r.vars[var.getSymName()];
      for (size_t i = 0; i < want.data.size(); ++i)
        ASSERT_NEAR(got.data[i], want.data[i],
                    1e-12 * std::max(1.0, std::abs(want.data[i])))
            << var.getSymName().str() << "[" << i << "] on stage " << r.stage;
    }
    EXPECT_GE(holders, 1) << var.getSymName().str() << ": no stage updated it";
    ++params;
  }
  EXPECT_GT(params, 10);

  // Held-out loss: @eval_s, a forward-only pipeline of one micro-batch;
  // the last stage returns one rank's loss and logits.
  std::vector<ref::Tensor> want;
  const std::vector<ref::Tensor> batch{rows(tokens, 0), rows(targets, 0)};
  reference.setSampleOffset(0);
  ASSERT_TRUE(succeeded(reference.run("eval", batch, want))) << diags.text;
  ASSERT_TRUE(runStages(*piped, "eval", runs, batch));
  const std::vector<ref::Tensor> &got = runs.back().results;
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k)
    for (size_t i = 0; i < want[k].data.size(); ++i)
      ASSERT_NEAR(got[k].data[i], want[k].data[i],
                  1e-12 * std::max(1.0, std::abs(want[k].data[i])))
          << "eval result " << k << "[" << i << "]";
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
    {"gpt2_dropout_2x4_1f1b",
     "gpt2:n_layer=2,n_head=2,n_embd=8,block_size=5,vocab_size=11,dropout=0.3",
     2, 4, "1f1b"},
    {"llama_2x4_1f1b",
     "llama:dim=8,n_layer=2,n_head=2,hidden_dim=12,vocab_size=11,block_size=5",
     2, 4, "1f1b"},
    {"llama_3x4_gpipe",
     "llama:dim=8,n_layer=3,n_head=2,hidden_dim=12,vocab_size=11,block_size=5",
     3, 4, "gpipe"},
    // Interleaved: chunk c of the stages x virtual stages on stage c % P;
    // GPT-2's tied embedding on chunk 0 (stage 0) and the last chunk.
    {"gpt2_2x4_interleaved2",
     "gpt2:n_layer=4,n_head=2,n_embd=8,block_size=5,vocab_size=11", 2, 4,
     "interleaved", 2},
    {"gpt2_dropout_2x6_interleaved3",
     "gpt2:n_layer=6,n_head=2,n_embd=8,block_size=5,vocab_size=11,dropout=0.3",
     2, 6, "interleaved", 3},
    {"gpt2_4x8_interleaved2",
     "gpt2:n_layer=8,n_head=2,n_embd=8,block_size=5,vocab_size=11", 4, 8,
     "interleaved", 2},
    // ZB-H1: each backward split into its input- and weight-gradient
    // halves, stage s deferring s weight halves to the end.
    {"gpt2_4x8_zbh1",
     "gpt2:n_layer=4,n_head=2,n_embd=8,block_size=5,vocab_size=11", 4, 8,
     "zbh1"},
    {"gpt2_dropout_2x4_zbh1",
     "gpt2:n_layer=2,n_head=2,n_embd=8,block_size=5,vocab_size=11,dropout=0.3",
     2, 4, "zbh1"},
    {"llama_3x2_zbh1",
     "llama:dim=8,n_layer=3,n_head=2,hidden_dim=12,vocab_size=11,block_size=5",
     3, 2, "zbh1"},
    {"llama_2x2_interleaved2",
     "llama:dim=8,n_layer=4,n_head=2,hidden_dim=12,vocab_size=11,block_size=5",
     2, 2, "interleaved", 2},
};

// Between two stages the messages one sends arrive in the order the other
// receives them, so a transport that matches messages by their order on a
// pair of ranks (NCCL's send/recv, which has no tags) would pair each
// receive with its own send, as MPI's tags (transfer, micro-batch) do.
TEST_P(PipelineScheduleTest, MessagesBetweenTwoStagesKeepTheirOrder) {
  const Case &c = GetParam();
  DialectRegistry registry;
  registerDistGradients(registry);
  MLIRContext ctx(registry);
  DiagnosticCapture diags(ctx);
  std::string error;
  OwningOpRef<ModuleOp> piped = build(ctx, c, true, error);
  ASSERT_TRUE(piped) << error << diags.text;
  using Message = std::pair<int64_t, int64_t>; // transfer, micro-batch
  std::map<std::pair<int64_t, int64_t>, std::vector<Message>> sent, received;
  int64_t messages = 0;
  for (int64_t s = 0; s < c.stages; ++s) {
    auto func =
        piped->lookupSymbol<func::FuncOp>("pipeline_step_" + std::to_string(s));
    ASSERT_TRUE(func) << "no @pipeline_step_" << s;
    func.walk([&](Operation *op) {
      if (auto send = dyn_cast<dist::SendOp>(op)) {
        sent[{s, send.getPeer()}].push_back(
            {send.getTransfer(), send.getMicroBatch()});
        ++messages;
      } else if (auto recv = dyn_cast<dist::RecvOp>(op)) {
        received[{recv.getPeer(), s}].push_back(
            {recv.getTransfer(), recv.getMicroBatch()});
      }
    });
  }
  EXPECT_GT(messages, 0);
  EXPECT_EQ(sent, received);
}

INSTANTIATE_TEST_SUITE_P(Schedules, PipelineScheduleTest,
                         ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return info.param.name;
                         });

} // namespace
