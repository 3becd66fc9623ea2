//===- AdamW.cpp - the optimizer step as a function @apply ---------------===//
//
// @apply(lr, step[, beta1]) -> grad_norm: global gradient norm, optional
// clipping, one update per parameter with a gradient (ds.adamw, ds.sgd,
// ds.lion, ds.adagrad, ds.lamb, or ds.muon for Muon's matrices and ds.adamw
// for the rest, its state variables declared beside the parameter),
// accumulators zeroed. Weight decay applies to parameters of
// rank >= 2 only (nanoGPT's grouping: no decay on biases and norm weights).
// With cycle-momentum, beta1 is an input read each step (OneCycle's
// cycle_momentum), given to every update as its beta1_value.
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

  /// The update of `param` (loaded as `p`) by gradient `g`: its state
  /// variables declared after `after`, loaded, updated and stored.
  void update(OpBuilder &b, OpBuilder &mb, SymbolTable &symbols,
              VariableOp param, Operation *after, Value p, Value g,
              ArrayRef<Value> scalars) {
    Location ploc = param.getLoc();
    Type t = param.getType();
    double decay = inDecayGroup(param) ? weightDecay : 0.0;
    auto f64 = [&](double v) { return b.getF64FloatAttr(v); };
    // Muon: matrices but embeddings and the LM head; the rest AdamW.
    const bool muon = optimizer == "muon" && takesMuon(param);
    SmallVector<StringRef> suffixes;
    if (muon)
      suffixes = MuonOp::getStateSuffixes();
    else if (optimizer == "sgd")
      suffixes = SgdOp::getStateSuffixes();
    else if (optimizer == "lion")
      suffixes = LionOp::getStateSuffixes();
    else if (optimizer == "adagrad")
      suffixes = AdagradOp::getStateSuffixes();
    else if (optimizer == "lamb")
      suffixes = LambOp::getStateSuffixes();
    else
      suffixes = AdamWOp::getStateSuffixes();
    SmallVector<VariableOp> vars;
    SmallVector<Value> states;
    for (StringRef suffix : suffixes) {
      vars.push_back(declareMoment(mb, symbols, param, after, suffix));
      after = vars.back();
      states.push_back(b.create<LoadOp>(ploc, t, vars.back().getSymName()));
    }
    Value lr = scalars[0], step = scalars[1], scale = scalars[2];
    Value beta1Value = cycleMomentum ? scalars[3] : Value();
    Operation *op;
    if (muon)
      // scalars[3]: Muon's own lr (build() appends it; Muon takes no
      // cycle-momentum, so nothing else is there).
      op = b.create<MuonOp>(ploc, p, g, states[0], scalars[3], step, scale,
                            f64(momentum), f64(decay), b.getBoolAttr(nesterov),
                            b.getI64IntegerAttr(nsSteps),
                            b.getI64IntegerAttr(muonHeads(param)));
    else if (optimizer == "sgd")
      op =
          b.create<SgdOp>(ploc, p, g, states[0], lr, step, scale, f64(momentum),
                          f64(dampening), f64(decay), b.getBoolAttr(nesterov));
    else if (optimizer == "adagrad")
      op = b.create<AdagradOp>(ploc, p, g, states[0], lr, step, scale,
                               f64(lrDecay), f64(eps), f64(decay));
    else if (optimizer == "lamb")
      op = b.create<LambOp>(
          ploc, p, g, states[0], states[1], lr, step, scale, f64(beta1),
          f64(beta2), f64(eps), f64(decay), f64(minCoeff), f64(maxCoeff),
          b.getBoolAttr(biasCorrection), b.getBoolAttr(epsInsideSqrt),
          /*norms=*/Value(), /*members=*/nullptr);
    else if (optimizer == "lion")
      op = b.create<LionOp>(ploc, p, g, states[0], lr, step, scale, beta1Value,
                            f64(beta1), f64(beta2), f64(decay));
    else
      op = b.create<AdamWOp>(ploc, p, g, states[0], states[1], lr, step, scale,
                             beta1Value, f64(beta1), f64(beta2), f64(eps),
                             f64(decay));
    b.create<StoreOp>(ploc, op->getResult(0), param.getSymName());
    for (auto [value, var] : llvm::zip(op->getResults().drop_front(), vars))
      b.create<StoreOp>(ploc, value, var.getSymName());
  }

  /// DeepSpeed's rule (deepspeed.initialize's use_muon): a parameter of
  /// rank >= 2 whose name has neither "embed" nor "lm_head", in any case.
  static bool takesMuon(VariableOp param) {
    std::string name = param.getSymName().lower();
    return param.getTensorType().getRank() >= 2 &&
           name.find("embed") == std::string::npos &&
           name.find("lm_head") == std::string::npos;
  }

  /// The blocks of rows Muon iterates apart: ds.attention_heads under
  /// per-head-muon, else 1.
  int64_t muonHeads(VariableOp param) {
    auto heads = param->getAttrOfType<IntegerAttr>(kAttentionHeadsAttr);
    return perHeadMuon && heads ? heads.getInt() : 1;
  }

  /// per-head-muon: the heads must divide their matrices' rows, and some
  /// Muon matrix must have them (else the option would do nothing).
  LogicalResult checkHeads(ModuleOp module) {
    if (!perHeadMuon)
      return success();
    if (optimizer != "muon")
      return module.emitError("ds-adamw: per-head-muon needs optimizer=muon");
    bool any = false;
    for (auto var : module.getOps<VariableOp>()) {
      auto heads = var->getAttrOfType<IntegerAttr>(kAttentionHeadsAttr);
      if (!heads || var.getKind() != VariableKind::param || !takesMuon(var))
        continue;
      int64_t rows = var.getTensorType().getDimSize(0);
      if (heads.getInt() < 1 || rows % heads.getInt() != 0)
        return var.emitError("ds-adamw: ")
               << var.getSymName() << " has ds.attention_heads "
               << heads.getInt() << ", which does not divide its " << rows
               << " rows";
      any = true;
    }
    if (!any)
      return module.emitError(
          "ds-adamw: per-head-muon (per_head_muon), but no Muon matrix has "
          "ds.attention_heads (separate query, key and value projections "
          "exported with the model's config have them; a fused QKV "
          "matrix, as GPT-2's c_attn, does not)");
    return success();
  }

  /// decay-all: every parameter's ds.decay, false for those no-decay
  /// names (each must be a parameter).
  LogicalResult markDecayGroups(ModuleOp module, SymbolTable &symbols) {
    SmallVector<StringRef> names;
    StringRef(noDecay).split(names, ',', -1, /*KeepEmpty=*/false);
    if (!decayAll) {
      if (!names.empty())
        return module.emitError("ds-adamw: no-decay needs decay-all");
      return success();
    }
    for (StringRef name : names) {
      auto var = symbols.lookup<VariableOp>(name.trim());
      if (!var || var.getKind() != VariableKind::param)
        return module.emitError("ds-adamw: no-decay names '")
               << name.trim() << "', which is not a parameter";
    }
    Builder b(module.getContext());
    for (auto var : module.getOps<VariableOp>())
      if (var.getKind() == VariableKind::param)
        var->setAttr(kDecayAttr,
                     b.getBoolAttr(!llvm::any_of(names, [&](StringRef n) {
                       return n.trim() == var.getSymName();
                     })));
    return success();
  }

  LogicalResult build(ModuleOp module) {
    StringRef rules[] = {"adamw", "sgd", "lion", "adagrad", "lamb", "muon"};
    if (!llvm::is_contained(rules, StringRef(optimizer)))
      return module.emitError("ds-adamw: unknown optimizer '")
             << optimizer << "' (adamw, sgd, lion, adagrad, lamb or muon)";
    if (optimizer == "muon" && (cycleMomentum || !(muonLrRatio > 0)))
      return module.emitError("ds-adamw: muon takes no cycle-momentum and a "
                              "muon-lr-ratio > 0");
    if (cycleMomentum && optimizer != "adamw" && optimizer != "lion")
      return module.emitError("ds-adamw: cycle-momentum needs betas (adamw "
                              "or lion), not ")
             << optimizer;
    if (module.lookupSymbol(plan::kApplyProgram))
      return module.emitError("ds-adamw: @apply already exists");
    SmallVector<VariableOp> grads;
    for (auto var : module.getOps<VariableOp>())
      if (var.getKind() == VariableKind::grad)
        grads.push_back(var);
    if (grads.empty())
      return module.emitError(
          "ds-adamw: no gradient accumulators; run ds-autodiff first");
    SymbolTable symbols(module);
    if (failed(markDecayGroups(module, symbols)) || failed(checkHeads(module)))
      return failure();

    MLIRContext *ctx = module.getContext();
    Location loc = NameLoc::get(StringAttr::get(ctx, "optimizer"));
    auto scalar = RankedTensorType::get({}, Float32Type::get(ctx));
    OpBuilder b(ctx);
    b.setInsertionPointToEnd(module.getBody());
    SmallVector<Type> inputs(cycleMomentum ? 3 : 2, scalar);
    auto apply = b.create<func::FuncOp>(loc, plan::kApplyProgram,
                                        b.getFunctionType(inputs, {scalar}));
    Block *body = apply.addEntryBlock();
    apply.setArgAttr(0, kArgNameAttr, b.getStringAttr("lr"));
    apply.setArgAttr(1, kArgNameAttr, b.getStringAttr("step"));
    Value lr = body->getArgument(0), step = body->getArgument(1);
    if (cycleMomentum)
      apply.setArgAttr(2, kArgNameAttr, b.getStringAttr("beta1"));
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

    // Muon's half has its own lr: the schedule's times muon_lr / lr.
    Value muonLr = lr;
    if (optimizer == "muon" && muonLrRatio != 1.0)
      muonLr = b.create<MulOp>(loc, lr, splat(b, loc, scalar, muonLrRatio));

    // Decayed parameters first, then the rest: the order in which the plan
    // packs them, so each group updates as one flat range.
    SmallVector<std::pair<VariableOp, Value>> updates;
    for (bool decayed : {true, false})
      for (auto [var, g] : llvm::zip(grads, gradValues))
        if (inDecayGroup(symbols.lookup<VariableOp>(
                var.getOfAttr().getAttr())) == decayed)
          updates.push_back({var, g});

    OpBuilder mb(ctx);
    for (auto [var, g] : updates) {
      auto param = symbols.lookup<VariableOp>(var.getOfAttr().getAttr());
      Location ploc = param.getLoc();
      Value p = b.create<LoadOp>(ploc, param.getType(), param.getSymName());
      SmallVector<Value> operands{lr, step, scale};
      if (cycleMomentum)
        operands.push_back(body->getArgument(2));
      if (optimizer == "muon")
        operands.push_back(muonLr);
      update(b, mb, symbols, param, var, p, g, operands);
      b.create<StoreOp>(ploc, splat(b, ploc, param.getTensorType(), 0.0),
                        var.getSymName());
    }
    b.create<func::ReturnOp>(loc, norm);
    return success();
  }
};

} // namespace
