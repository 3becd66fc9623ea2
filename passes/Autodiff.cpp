//===- Autodiff.cpp - reverse-mode differentiation of @forward -----------===//
//
// @micro_step = @forward + its reverse pass + gradient accumulation. The
// reverse pass is built from the ops' VJPOpInterface rules, only for ops that
// are *active*: depending on a parameter (varied) and reaching the loss
// (useful). Everything else gets no backward code, which is what prunes
// gradients of frozen inputs such as token ids or positions.
//
//===----------------------------------------------------------------------===//

#include "dialects/ds/Contracts.h"
#include "dialects/ds/DsUtils.h"
#include "passes/Passes.h"
#include "runtime/plan/ProgramNames.h"
#include "runtime/plan/VariableNames.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSAUTODIFF
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
namespace plan = dsc::plan;

namespace {

/// Values that depend on a parameter and that the loss depends on.
llvm::DenseSet<Value> activeValues(Block &body, Value loss) {
  llvm::DenseSet<Value> varied, useful;
  for (Operation &op : body.without_terminator()) {
    bool v = isa<LoadOp>(op) || llvm::any_of(op.getOperands(), [&](Value x) {
               return varied.contains(x);
             });
    if (v)
      varied.insert(op.result_begin(), op.result_end());
  }
  useful.insert(loss);
  for (Operation &op : llvm::reverse(body.without_terminator()))
    if (llvm::any_of(op.getResults(),
                     [&](Value r) { return useful.contains(r); }))
      useful.insert(op.operand_begin(), op.operand_end());
  llvm::DenseSet<Value> active;
  for (Value v : varied)
    if (useful.contains(v))
      active.insert(v);
  return active;
}

void eraseDeadOps(Block &body) {
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isOpTriviallyDead(&op))
      op.erase();
}

struct AutodiffPass : ds::impl::DsAutodiffBase<AutodiffPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(differentiate(getOperation())))
      signalPassFailure();
  }

  LogicalResult differentiate(ModuleOp module) {
    auto forward = module.lookupSymbol<func::FuncOp>(plan::kForwardFunction);
    if (!forward)
      return module.emitError("ds-autodiff: no @forward to differentiate");
    if (module.lookupSymbol(plan::kMicroStepProgram))
      return module.emitError("ds-autodiff: @micro_step already exists");
    if (accumulationSteps < 1 || worldSize < 1)
      return module.emitError(
          "ds-autodiff: accumulation-steps and world-size must be >= 1");

    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(forward);
    auto micro = cast<func::FuncOp>(b.clone(*forward));
    micro.setSymName(plan::kMicroStepProgram);
    Block &body = micro.front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Value loss = ret.getOperand(0);

    llvm::DenseSet<Value> active = activeValues(body, loss);
    if (!active.contains(loss))
      return forward.emitError(
          "ds-autodiff: the loss does not depend on any parameter");

    SmallVector<Operation *> forwardOps;
    for (Operation &op : body.without_terminator())
      forwardOps.push_back(&op);

    b.setInsertionPoint(ret);
    llvm::DenseMap<Value, Value> cotangent;
    auto accumulate = [&](Value target, Value g, Location loc) {
      Value &slot = cotangent[target];
      slot = slot ? b.create<AddOp>(loc, slot, g).getResult() : g;
    };
    // Seeding with 1/(A N) makes A micro-steps on each of N ranks sum to the
    // gradient of the mean loss (DeepSpeed's accumulation and averaging).
    // One rounded seed, then exact sums: N ranks match one rank with A N
    // micro-steps up to the order of the additions.
    Value seed =
        splat(b, ret.getLoc(), cast<RankedTensorType>(loss.getType()),
              1.0 / static_cast<double>(accumulationSteps * worldSize));
    markLossSeed(seed.getDefiningOp<ConstantOp>());
    cotangent[loss] = seed;

    llvm::MapVector<StringAttr, Value> paramGrads;
    for (Operation *op : llvm::reverse(forwardOps)) {
      SmallVector<Value> resultGrads;
      bool any = false;
      for (Value r : op->getResults()) {
        resultGrads.push_back(cotangent.lookup(r));
        any |= static_cast<bool>(resultGrads.back());
      }
      if (!any)
        continue;
      if (auto load = dyn_cast<LoadOp>(op)) {
        Value &slot = paramGrads[load.getNameAttr().getAttr()];
        slot = slot ? b.create<AddOp>(op->getLoc(), slot, resultGrads[0])
                          .getResult()
                    : resultGrads[0];
        continue;
      }
      auto vjp = dyn_cast<VJPOpInterface>(op);
      if (!vjp)
        return op->emitError("ds-autodiff: '")
               << op->getName()
               << "' has no gradient rule, but the loss depends on a "
                  "parameter through it";
      SmallVector<bool> needed;
      for (Value operand : op->getOperands())
        needed.push_back(active.contains(operand));
      SmallVector<Value> operandGrads(op->getNumOperands());
      if (failed(vjp.buildVJP(b, resultGrads, needed, operandGrads)))
        return op->emitError("ds-autodiff: gradient rule failed");
      for (auto [operand, g, need] :
           llvm::zip(op->getOperands(), operandGrads, needed)) {
        if (!need || !g)
          continue;
        if (g.getType() != operand.getType())
          return op->emitError("ds-autodiff: gradient rule produced ")
                 << g.getType() << " for an operand of type "
                 << operand.getType();
        accumulate(operand, g, op->getLoc());
      }
    }

    // One accumulator per parameter, declared next to it.
    SymbolTable symbols(module);
    for (auto [name, g] : paramGrads) {
      auto param = symbols.lookup<VariableOp>(name);
      std::string gradName =
          plan::stateName(name.getValue(), plan::kGradSuffix);
      if (symbols.lookup(gradName))
        return param.emitError("ds-autodiff: symbol @")
               << gradName << " already exists";
      OpBuilder mb(param);
      mb.setInsertionPointAfter(param);
      auto gradVar =
          mb.create<VariableOp>(param.getLoc(), VariableKind::grad, gradName,
                                FlatSymbolRefAttr::get(name), param.getType(),
                                InitKind::zeros, FloatAttr());
      symbols.insert(gradVar);
      Location loc = param.getLoc();
      Value acc = b.create<LoadOp>(loc, g.getType(), gradVar.getSymName());
      Value sum = b.create<AddOp>(loc, acc, g);
      markGradAccumulation(b.create<StoreOp>(loc, sum, gradVar.getSymName()));
    }
    eraseDeadOps(body);
    return success();
  }
};

} // namespace
