//===- Eval.cpp - the forward-only program @eval -------------------------===//
//
// @eval(tokens, targets) -> (loss, logits): @forward (or @forward_eval, the
// model built at another batch by dsc) with dropout off (each
// ds.dropout replaced by its input), for held-out loss and sampling (the
// logits when the loss is a ds.cross_entropy). Later
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
    eval.walk([](DropoutOp d) {
      d.getResult().replaceAllUsesWith(d.getX());
      d.erase();
    });
    // A loss from ds.cross_entropy also returns its logits, for sampling.
    auto ret = cast<func::ReturnOp>(eval.front().getTerminator());
    if (ret.getNumOperands() != 1)
      return;
    if (auto ce = ret.getOperand(0).getDefiningOp<CrossEntropyOp>()) {
      ret->insertOperands(1, ce.getLogits());
      eval.setType(FunctionType::get(
          module.getContext(), eval.getFunctionType().getInputs(),
          {ret.getOperand(0).getType(), ce.getLogits().getType()}));
    }
  }
};

} // namespace
