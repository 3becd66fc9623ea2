//===- RematPass.cpp - phase `remat`: the policy, and auto's choice -------===//
#include "passes/remat/RematPass.h"
#include "dialects/dist/DistOps.h"
#include "dialects/ds/Contracts.h"
#include "passes/remat/Remat.h"
#include "passes/remat/RematPolicy.h"
#include "runtime/plan/ProgramNames.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace mlir::ds {
#define GEN_PASS_DEF_DSREMAT
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
using namespace mlir::ds::remat;
namespace plan = dsc::plan;

namespace {

struct Candidate {
  Choice choice;
  RematCost cost;
};

/// Block counts 1..blocks-1, at most 8 of them spread evenly.
SmallVector<int> firstBlocks(int blocks) {
  SmallVector<int> out;
  int step = std::max(1, blocks / 8);
  for (int m = step; m < blocks; m += step)
    out.push_back(m);
  return out;
}

/// A value another pipeline stage sent (dist.transfer, before phase
/// pipeline) is kept whatever the policy says: recomputing it would send
/// it again.
void keepMessages(const ForwardGraph &g, llvm::BitVector &kept) {
  for (unsigned v = 0; v < g.size(); ++v)
    if (isa<dist::TransferOp>(g.ops[g.opOf[v]]))
      kept.set(v);
}

struct RematPass : ds::impl::DsRematBase<RematPass> {
  using DsRematBase::DsRematBase;
  RematPass(const DsRematOptions &options, RematEvaluator evaluate)
      : DsRematBase(options), evaluate(std::move(evaluate)) {}

  RematEvaluator evaluate;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (every < 1) {
      module.emitError("ds-remat: every must be at least 1, got ") << every;
      return signalPassFailure();
    }
    if (activationMemory < 0 ||
        (activationMemory && policy != Policy::automatic)) {
      module.emitError("ds-remat: activation-memory is the budget of policy "
                       "auto (a number of bytes), got ")
          << activationMemory << " with policy " << policyName(policy);
      return signalPassFailure();
    }
    if (policy == Policy::none)
      return;
    auto micro = module.lookupSymbol<func::FuncOp>(plan::kMicroStepProgram);
    if (!micro) {
      module.emitError("ds-remat: no @micro_step; run ds-autodiff first");
      return signalPassFailure();
    }
    FailureOr<ForwardGraph> graph = ForwardGraph::build(micro);
    if (failed(graph))
      return signalPassFailure();
    FailureOr<Choice> choice = failure();
    if (policy == Policy::layers)
      choice = keepBlockInputs(*graph, every);
    else if (policy == Policy::selective)
      choice = keepSelective(*graph);
    else
      choice = chooseAuto(module, *graph);
    if (failed(choice))
      return signalPassFailure();
    keepMessages(*graph, choice->kept);
    recompute(*graph, choice->kept);
    module->setAttr(kRematAttr, StringAttr::get(&getContext(), choice->name));
  }

  /// The candidates: the hand policies and the minimum cuts over a sweep
  /// of weights around the model's own bytes-per-FLOP. The set does not
  /// depend on the budget, so a larger budget never recomputes more.
  SmallVector<Choice> candidates(const ForwardGraph &g) {
    SmallVector<Choice> out{keepAll(g), keepSelective(g)};
    for (int64_t k : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}) {
      ScopedDiagnosticHandler quiet(&getContext(), [](Diagnostic &) {
        return success(); // no blocks: simply no layers candidates
      });
      FailureOr<Choice> c = keepBlockInputs(g, k);
      if (failed(c))
        break;
      out.push_back(std::move(*c));
    }
    double bytes = 0, flops = 0;
    for (unsigned v = 0; v < g.size(); ++v) {
      flops += g.flops(v);
      if (g.needed.test(v))
        bytes += g.bytes(v);
    }
    double base = flops > 0 ? bytes / flops : 1;
    out.push_back(minimumCut(g, 0));
    for (int j = -12; j <= 8; ++j)
      out.push_back(minimumCut(g, base * std::ldexp(1.0, j)));
    // Each of those on the first m blocks only, the rest kept whole
    // (Megatron's "block" method): the frontier between the whole-model
    // choices, which a weight sweep alone reaches only at its corners.
    SmallVector<int> block = blockOrdinals(g);
    int blocks = 1 + *llvm::max_element(block);
    size_t whole = out.size();
    Choice all = keepAll(g);
    for (int m : firstBlocks(blocks))
      for (size_t b = 1; b < whole; ++b) {
        Choice mixed = all;
        for (unsigned v = 0; v < g.size(); ++v)
          if (block[v] >= 0 && block[v] < m)
            mixed.kept[v] = out[b].kept[v];
        mixed.name = out[b].name + " on blocks 0-" + std::to_string(m - 1);
        out.push_back(std::move(mixed));
      }
    // Different sets can give the same rewrite; equal sets surely do.
    SmallVector<Choice> unique;
    for (Choice &c : out)
      if (llvm::none_of(unique,
                        [&](const Choice &u) { return u.kept == c.kept; }))
        unique.push_back(std::move(c));
    return unique;
  }

  FailureOr<Choice> chooseAuto(ModuleOp module, const ForwardGraph &g) {
    if (!evaluate)
      return module.emitError(
          "ds-remat: policy auto measures each candidate with the rest of "
          "the pipeline; run it through dsc or ds-opt "
          "--ds-compile-to-remat");
    SmallVector<Candidate> measured;
    for (Choice &c : candidates(g)) {
      OwningOpRef<ModuleOp> copy = module.clone();
      auto micro = copy->lookupSymbol<func::FuncOp>(plan::kMicroStepProgram);
      FailureOr<ForwardGraph> cg = ForwardGraph::build(micro);
      if (failed(cg))
        return failure();
      recompute(*cg, c.kept);
      FailureOr<RematCost> cost = evaluate(*copy);
      if (failed(cost))
        return failure();
      measured.push_back({std::move(c), *cost});
    }
    const uint64_t budget = static_cast<uint64_t>(activationMemory);
    const Candidate *best = nullptr, *smallest = nullptr;
    for (const Candidate &c : measured) {
      if (!smallest || c.cost.activationPeak < smallest->cost.activationPeak ||
          (c.cost.activationPeak == smallest->cost.activationPeak &&
           c.cost.recomputedFlops < smallest->cost.recomputedFlops))
        smallest = &c;
      if (budget && c.cost.activationPeak <= budget &&
          (!best || c.cost.recomputedFlops < best->cost.recomputedFlops ||
           (c.cost.recomputedFlops == best->cost.recomputedFlops &&
            c.cost.activationPeak < best->cost.activationPeak)))
        best = &c;
    }
    if (!budget)
      best = smallest;
    if (!best)
      return module.emitError("ds-remat: activation-memory = ")
             << budget << " bytes is infeasible: the smallest activation "
             << "peak dsc can plan is " << smallest->cost.activationPeak
             << " bytes (" << smallest->choice.name << ")";
    Choice chosen = best->choice;
    chosen.name = "auto: " + chosen.name;
    return chosen;
  }
};

} // namespace

std::unique_ptr<Pass> mlir::ds::createDsRemat(const DsRematOptions &options,
                                              RematEvaluator evaluate) {
  return std::make_unique<RematPass>(options, std::move(evaluate));
}
