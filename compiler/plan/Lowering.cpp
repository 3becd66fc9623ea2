//===- Lowering.cpp - training step -> kernel calls over placed buffers ---===//
//
// The driver of lowerToPlan: lays out the variables and lowers each
// program (LoweringImpl.h lists where the other jobs are).
//
//===----------------------------------------------------------------------===//

#include "compiler/plan/LoweringImpl.h"
#include "dialects/ds/Contracts.h"
#include "runtime/plan/ProgramNames.h"

#include <set>

using namespace mlir;
using namespace mlir::ds;

namespace dsc {

llvm::StringRef categoryName(Category c) {
  static const char *names[] = {
      "params",       "grads",     "optimizer_state", "activations",
      "comm_buffers", "workspace", "inputs",          "constants"};
  return names[static_cast<int>(c)];
}

uint64_t PlanBuffer::bytes() const {
  uint64_t n = 1;
  for (int64_t d : shape)
    n *= static_cast<uint64_t>(d);
  return n * dtypeSize(dtype);
}

namespace lowering {

LogicalResult Lowering::run() {
  if (failed(layoutVariables()))
    return failure();
  // An @eval with a batch of its own gets input buffers below the step's:
  // training writes the step's every step, and an arena's measured
  // high-water mark is its furthest byte written, so predicted and
  // measured bytes agree whether or not eval runs.
  auto eval = module.lookupSymbol<func::FuncOp>(plan::kEvalProgram);
  auto micro = module.lookupSymbol<func::FuncOp>(plan::kMicroStepProgram);
  if (eval && micro &&
      eval.getFunctionType().getInputs() != micro.getFunctionType().getInputs())
    for (BlockArgument arg : eval.getArguments())
      evalInputs.push_back(fixedSlot(
          Category::Inputs, bytesOf(cast<RankedTensorType>(arg.getType())),
          plan::inputBufferName(plan::kEvalProgram, arg.getArgNumber())));
  for (StringRef name : {plan::kMicroStepProgram, plan::kApplyProgram}) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func)
      return module.emitError("plan: no @")
             << name << "; compile to phase `train` first";
    if (failed(lowerProgram(func)))
      return failure();
  }
  // Stages 0-1 with accumulation: the micro-step that reduces; the
  // forward-only program for held-out loss and sampling.
  for (StringRef name : {plan::kMicroStepSyncProgram, plan::kEvalProgram})
    if (auto func = module.lookupSymbol<func::FuncOp>(name))
      if (failed(lowerProgram(func)))
        return failure();
  // The sampling programs, a row of a few lengths each.
  SmallVector<func::FuncOp> sampling;
  for (auto func : module.getOps<func::FuncOp>())
    if (plan::isSampleProgram(func.getSymName()))
      sampling.push_back(func);
  for (func::FuncOp func : sampling)
    if (failed(lowerProgram(func)))
      return failure();
  // The storage the plan module declares; plan-place places the
  // transients (and sizes the arenas they live in).
  for (const Slot &s : slots)
    plan.storages.push_back(
        {s.name, s.category, s.space, s.bytes, s.offset, !s.fixed});
  return success();
}

void Lowering::push(std::vector<Pending> &pend, Pending p) {
  if (p.async && p.op->getNumResults())
    commOf[p.op->getResult(0)] = pend.size();
  pend.push_back(std::move(p));
}

void Lowering::retarget(std::vector<Pending> &pend, Value v, int target) {
  auto it = producerIndex.find(v);
  if (it == producerIndex.end())
    return;
  Pending &p = pend[it->second];
  unsigned idx = cast<OpResult>(v).getResultNumber();
  p.outs[idx].slot = target;
}

} // namespace lowering

using lowering::Lowering;

LogicalResult lowerToPlan(ModuleOp module, const PlanOptions &options,
                          PlanModel &plan) {
  plan = PlanModel();
  plan.options = options;
  if (auto micro = module.lookupSymbol<func::FuncOp>(plan::kMicroStepProgram)) {
    auto inputs = micro.getFunctionType().getInputs();
    if (!inputs.empty())
      if (auto t = dyn_cast<RankedTensorType>(inputs[0]);
          t && t.getRank() == 2) {
        // A pipeline stage's step takes the step's micro-batches at once.
        plan.microBatch =
            t.getDimSize(0) /
            (options.pipelineStages > 1 ? options.accumulationSteps : 1);
        // Ulysses: each rank's [B, L / S] of the whole sequence.
        plan.seqLen = t.getDimSize(1) * options.sequenceParallel;
      }
    micro.walk([&](CrossEntropyOp ce) {
      plan.vocabSize =
          cast<RankedTensorType>(ce.getLogits().getType()).getShape().back();
    });
    // Phase fused's head: the weight's rows (docs/performance.md).
    micro.walk([&](LinearCrossEntropyOp ce) {
      plan.vocabSize =
          cast<RankedTensorType>(ce.getWeight().getType()).getDimSize(0);
    });
    // Vocabulary parallelism: each rank's logits are one part of the whole.
    micro.walk([&](CrossEntropyPartOp ce) {
      plan.vocabSize =
          cast<RankedTensorType>(ce.getLogits().getType()).getShape().back() *
          ce.getParts();
    });
    // ds-precision's loss scale: a third input of the step's programs.
    plan.lossScaling = inputs.size() == 3;
  }
  if (auto apply = module.lookupSymbol<func::FuncOp>(plan::kApplyProgram))
    apply.walk([&](OverflowGuardOp) { plan.skipsOverflow = true; });
  if (failed(Lowering(module, plan).run()))
    return failure();
  return lowerAliases(module, plan);
}

LogicalResult lowerAliases(ModuleOp module, PlanModel &plan) {
  // An exported module's tied state-dict names (frontends/torch puts them
  // on the module): each alias is written and read with a parameter's
  // values, so the weights load into the module with strict=True.
  auto aliases = module->getAttrOfType<DictionaryAttr>(kAliasesAttr);
  if (!aliases)
    return success();
  std::set<std::string> params, names;
  for (const PlanVariable &v : plan.variables) {
    names.insert(v.name);
    if (v.kind == 0)
      params.insert(v.name);
  }
  for (NamedAttribute a : aliases) {
    std::string alias = a.getName().str();
    auto of = dyn_cast<StringAttr>(a.getValue());
    if (!of || !params.count(of.str()))
      return module.emitError() << kAliasesAttr << ": '" << alias
                                << "' must name a parameter of the model";
    if (names.count(alias))
      return module.emitError()
             << kAliasesAttr << ": '" << alias << "' is a variable of its own";
    plan.aliases.push_back({alias, of.str()});
  }
  return success();
}

} // namespace dsc
