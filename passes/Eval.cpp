//===- Eval.cpp - the forward-only program @eval -------------------------===//
//
// @eval(tokens, targets) -> loss: @forward with dropout off (each
// ds.dropout replaced by its input), for held-out loss and sampling. Later
// phases treat it as they treat @micro_step's forward half: ds-precision
// computes it in 16 bits, ZeRO-3 gathers its parameters per window, the
// plan lowers it to the program `eval`.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSEVAL
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

struct EvalPass : ds::impl::DsEvalBase<EvalPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward) {
      module.emitError("ds-eval: no @forward");
      return signalPassFailure();
    }
    if (module.lookupSymbol("eval")) {
      module.emitError("ds-eval: @eval already exists");
      return signalPassFailure();
    }
    func::FuncOp eval = forward.clone();
    eval.setSymName("eval");
    SymbolTable(module).insert(eval, std::next(forward->getIterator()));
    eval.walk([](DropoutOp d) {
      d.getResult().replaceAllUsesWith(d.getX());
      d.erase();
    });
  }
};

} // namespace
