//===- Eval.cpp - the forward-only program @eval -------------------------===//
//
// @eval(tokens, targets) -> (loss, logits): @forward (or @forward_eval, the
// model built at another batch by dsc) with dropout off (each
// ds.dropout replaced by its input), for held-out loss and sampling (the
// logits when the loss is a ds.cross_entropy). Each @forward_sample_<T>
// (dsc's one-row copies of a built-in model) becomes
// @sample_<T>(tokens) -> logits the same way, its loss dropped. Later
// phases treat it as they treat @micro_step's forward half: ds-precision
// computes it in 16 bits, ZeRO-3 gathers its parameters per window, the
// plan lowers it to the program `eval`.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "runtime/plan/ProgramNames.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSEVAL
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
namespace plan = dsc::plan;

namespace {

struct EvalPass : ds::impl::DsEvalBase<EvalPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(plan::kForwardFunction);
    if (!forward) {
      module.emitError("ds-eval: no @forward");
      return signalPassFailure();
    }
    if (module.lookupSymbol(plan::kEvalProgram)) {
      module.emitError("ds-eval: @eval already exists");
      return signalPassFailure();
    }
    // dsc --eval-micro-batch-size builds the model again at that batch as
    // @forward_eval: that graph becomes @eval.
    func::FuncOp eval;
    if (auto other =
            module.lookupSymbol<func::FuncOp>(plan::kForwardEvalFunction)) {
      eval = other;
      SymbolTable(module).setSymbolName(eval, plan::kEvalProgram);
    } else {
      eval = forward.clone();
      eval.setSymName(plan::kEvalProgram);
      SymbolTable(module).insert(eval, std::next(forward->getIterator()));
    }
    withoutDropout(eval);
    // A loss from ds.cross_entropy also returns its logits, for sampling.
    auto ret = cast<func::ReturnOp>(eval.front().getTerminator());
    if (auto ce = ret.getNumOperands() == 1
                      ? ret.getOperand(0).getDefiningOp<CrossEntropyOp>()
                      : CrossEntropyOp()) {
      ret->insertOperands(1, ce.getLogits());
      eval.setType(FunctionType::get(
          module.getContext(), eval.getFunctionType().getInputs(),
          {ret.getOperand(0).getType(), ce.getLogits().getType()}));
    }
    SmallVector<func::FuncOp> sampling;
    for (auto f : module.getOps<func::FuncOp>())
      if (plan::sampleLength(f.getSymName()) &&
          f.getSymName().starts_with(plan::kForwardSamplePrefix))
        sampling.push_back(f);
    for (func::FuncOp f : sampling)
      if (failed(makeSampleProgram(module, f)))
        return signalPassFailure();
  }

  static void withoutDropout(func::FuncOp f) {
    f.walk([](DropoutOp d) {
      d.getResult().replaceAllUsesWith(d.getX());
      d.erase();
    });
  }

  /// @forward_sample_<T>(tokens, targets) -> loss becomes
  /// @sample_<T>(tokens) -> logits; a forward whose loss is not a
  /// cross-entropy has no logits to sample from and is dropped.
  static LogicalResult makeSampleProgram(ModuleOp module, func::FuncOp f) {
    std::string name = std::string(plan::kSampleProgramPrefix) +
                       std::to_string(plan::sampleLength(f.getSymName()));
    auto ret = cast<func::ReturnOp>(f.front().getTerminator());
    auto ce = ret.getNumOperands() == 1
                  ? ret.getOperand(0).getDefiningOp<CrossEntropyOp>()
                  : CrossEntropyOp();
    if (!ce || !ce->hasOneUse()) {
      f.erase();
      return success();
    }
    if (module.lookupSymbol(name))
      return f.emitError("ds-eval: @") << name << " already exists";
    SymbolTable(module).setSymbolName(f, name);
    withoutDropout(f);
    Value logits = ce.getLogits();
    ret->setOperands(logits);
    ce.erase();
    if (f.getNumArguments() != 2 || !f.getArgument(1).use_empty())
      return f.emitError("ds-eval: @")
             << name << " reads its targets beyond the loss";
    f.eraseArgument(1);
    f.setType(FunctionType::get(module.getContext(),
                                f.getFunctionType().getInputs(),
                                {logits.getType()}));
    return success();
  }
};

} // namespace
