//===- AdamW.cpp - the optimizer step as a function @apply ---------------===//
//
// @apply(lr, step) -> grad_norm: global gradient norm, optional clipping,
// one ds.adamw per parameter with a gradient, accumulators zeroed. Weight
// decay applies to parameters of rank >= 2 only (nanoGPT's grouping: no
// decay on biases and norm weights).
//
//===----------------------------------------------------------------------===//

#include "dialects/ds/Contracts.h"
#include "dialects/ds/DsUtils.h"
#include "passes/Passes.h"
#include "runtime/plan/ProgramNames.h"
#include "runtime/plan/VariableNames.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSADAMW
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
namespace plan = dsc::plan;

namespace {

struct AdamWPass : ds::impl::DsAdamWBase<AdamWPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(build(getOperation())))
      signalPassFailure();
  }

  VariableOp declareMoment(OpBuilder &mb, SymbolTable &symbols,
                           VariableOp param, Operation *after,
                           StringRef suffix) {
    mb.setInsertionPointAfter(after);
    auto var = mb.create<VariableOp>(param.getLoc(), VariableKind::opt_state,
                                     (param.getSymName() + suffix).str(),
                                     SymbolRefAttr::get(param), param.getType(),
                                     InitKind::zeros, FloatAttr());
    symbols.insert(var);
    return var;
  }

  LogicalResult build(ModuleOp module) {
    if (module.lookupSymbol(plan::kApplyProgram))
      return module.emitError("ds-adamw: @apply already exists");
    SmallVector<VariableOp> grads;
    for (auto var : module.getOps<VariableOp>())
      if (var.getKind() == VariableKind::grad)
        grads.push_back(var);
    if (grads.empty())
      return module.emitError(
          "ds-adamw: no gradient accumulators; run ds-autodiff first");

    MLIRContext *ctx = module.getContext();
    Location loc = NameLoc::get(StringAttr::get(ctx, "optimizer"));
    auto scalar = RankedTensorType::get({}, Float32Type::get(ctx));
    OpBuilder b(ctx);
    b.setInsertionPointToEnd(module.getBody());
    auto apply =
        b.create<func::FuncOp>(loc, plan::kApplyProgram,
                               b.getFunctionType({scalar, scalar}, {scalar}));
    Block *body = apply.addEntryBlock();
    apply.setArgAttr(0, kArgNameAttr, b.getStringAttr("lr"));
    apply.setArgAttr(1, kArgNameAttr, b.getStringAttr("step"));
    Value lr = body->getArgument(0), step = body->getArgument(1);
    b.setInsertionPointToStart(body);

    // Global L2 norm over every gradient, as torch.nn.utils.clip_grad_norm_.
    SmallVector<Value> gradValues;
    Value total;
    for (VariableOp var : grads) {
      Value g = b.create<LoadOp>(loc, var.getType(), var.getSymName());
      gradValues.push_back(g);
      auto gt = cast<RankedTensorType>(g.getType());
      SmallVector<int64_t> all(gt.getRank());
      for (int64_t d = 0; d < gt.getRank(); ++d)
        all[d] = d;
      Value sq = b.create<MulOp>(loc, g, g);
      Value s = b.create<ReduceSumOp>(loc, sq, all);
      if (cast<RankedTensorType>(s.getType()) != scalar)
        s = b.create<CastOp>(loc, scalar, s);
      total = total ? b.create<AddOp>(loc, total, s).getResult() : s;
    }
    SqrtOp normOp = b.create<SqrtOp>(loc, total);
    markGlobalGradNorm(normOp);
    Value norm = normOp;
    Value scale;
    if (gradClip > 0) {
      Value clip = splat(b, loc, scalar, gradClip);
      Value denom = b.create<AddOp>(loc, norm, splat(b, loc, scalar, 1e-6));
      Value ratio = b.create<DivOp>(loc, clip, denom);
      scale = b.create<MinimumOp>(loc, ratio, splat(b, loc, scalar, 1.0));
    } else {
      scale = splat(b, loc, scalar, 1.0);
    }

    // Decayed parameters first, then the rest: the order in which the plan
    // packs them, so each group updates as one flat range.
    SmallVector<std::pair<VariableOp, Value>> updates;
    for (bool decayed : {true, false})
      for (auto [var, g] : llvm::zip(grads, gradValues))
        if (takesWeightDecay(var.getTensorType()) == decayed)
          updates.push_back({var, g});

    SymbolTable symbols(module);
    OpBuilder mb(ctx);
    for (auto [var, g] : updates) {
      auto param = symbols.lookup<VariableOp>(var.getOfAttr().getAttr());
      VariableOp m =
          declareMoment(mb, symbols, param, var, plan::kExpAvgSuffix);
      VariableOp v =
          declareMoment(mb, symbols, param, m, plan::kExpAvgSqSuffix);
      Location ploc = param.getLoc();
      Type t = param.getType();
      Value p = b.create<LoadOp>(ploc, t, param.getSymName());
      Value mv = b.create<LoadOp>(ploc, t, m.getSymName());
      Value vv = b.create<LoadOp>(ploc, t, v.getSymName());
      double decay =
          takesWeightDecay(param.getTensorType()) ? weightDecay : 0.0;
      auto update =
          b.create<AdamWOp>(ploc, p, g, mv, vv, lr, step, scale,
                            b.getF64FloatAttr(beta1), b.getF64FloatAttr(beta2),
                            b.getF64FloatAttr(eps), b.getF64FloatAttr(decay));
      b.create<StoreOp>(ploc, update.getNewParam(), param.getSymName());
      b.create<StoreOp>(ploc, update.getNewM(), m.getSymName());
      b.create<StoreOp>(ploc, update.getNewV(), v.getSymName());
      b.create<StoreOp>(ploc, splat(b, ploc, param.getTensorType(), 0.0),
                        var.getSymName());
    }
    b.create<func::ReturnOp>(loc, norm);
    return success();
  }
};

} // namespace
