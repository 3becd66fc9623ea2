//===- ShardGradients.cpp - ZeRO stages 2-3: gradients sharded
//--------------===//
//
// The buckets become the parameter groups. Each micro-step reduce-scatters
// a bucket's gradients (padded to a multiple of the world size) right after
// its last one and adds this rank's slice into a shard-sized accumulator;
// @apply computes the global norm from the shards (an all-reduce of sums of
// squares, in place of the operand of the ds.global_grad_norm op), updates
// its slice and all-gathers each group. At stage 3 the groups of large
// parameters keep only their shard (GatherParameters.cpp).
//
//===----------------------------------------------------------------------===//

#include "passes/zero/ZeroUtils.h"

#include "dialects/ds/DsUtils.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::ds::zero {

/// Stage 2: the buckets become the parameter groups. Each micro-step
/// reduce-scatters a bucket's gradients (padded to a multiple of the
/// world size) right after its last one and adds this rank's slice into a
/// shard-sized accumulator; @apply computes the global norm from the
/// shards (an all-reduce of sums of squares), updates its slice and
/// all-gathers each group.
LogicalResult shardGradients(ModuleOp module, func::FuncOp micro,
                             const Options &opts) {
  FailureOr<SmallVector<Accumulation>> accs = findAccumulations(micro);
  if (failed(accs))
    return failure();
  auto apply = module.lookupSymbol<func::FuncOp>("apply");
  if (!apply)
    return module.emitError("ds-zero: no @apply; run ds-adamw first");
  SymbolTable symbols(module);
  MLIRContext *ctx = module.getContext();
  OpBuilder mb(ctx);
  mb.setInsertionPointToEnd(module.getBody());
  auto microRet = cast<func::ReturnOp>(micro.front().getTerminator());
  auto applyRet = cast<func::ReturnOp>(apply.front().getTerminator());
  auto ranks = mb.getI64IntegerAttr(opts.worldSize);

  llvm::StringMap<AdamWOp> updateOf; // param name -> its update
  SmallVector<VariableOp> masters;   // mixed precision: per parameter
  SmallVector<AdamWOp> allUpdates;
  apply.walk([&](AdamWOp op) { allUpdates.push_back(op); });
  for (AdamWOp op : allUpdates) {
    FailureOr<UpdateTarget> target = updateTarget(op, symbols);
    if (failed(target))
      return failure();
    updateOf[target->param.getSymName()] = op;
    if (target->master)
      masters.push_back(target->master);
  }
  auto paramOf = [&](Accumulation a) {
    return symbols.lookup<VariableOp>(a.store.getName()).getOfAttr();
  };

  // Buckets in completion order, one list per weight-decay class; at
  // stage 3 the parameters under the persistence threshold form classes
  // of their own, which stay whole as at stage 2.
  SmallVector<Accumulation> classes[4];
  for (Accumulation &a : *accs) {
    AdamWOp update = updateOf.lookup(paramOf(a).getValue());
    if (!update)
      return a.store.emitError("ds-zero: no AdamW update for ") << paramOf(a);
    int64_t n = cast<RankedTensorType>(a.grad.getType()).getNumElements();
    bool persistent = opts.stage < 3 || n < opts.persistenceThreshold;
    classes[(update.getWeightDecay().convertToDouble() != 0 ? 0 : 1) +
            (persistent ? 2 : 0)]
        .push_back(a);
  }
  struct Group {
    dist::GroupOp op;
    VariableOp grad, m, v;
    VariableOp param;  ///< stage 3: this rank's shard of the parameters
    VariableOp master; ///< mixed precision: the fp32 master shard
    AdamWOp like;
    RankedTensorType shard, flat; ///< in the gradients' (and params') type
    RankedTensorType stateShard;  ///< in the optimizer's fp32
  };
  SmallVector<Group> groups;
  SmallVector<Operation *> scatters; // one per group
  SmallVector<Operation *> dead;
  SmallVector<VariableOp> deadVars;
  for (auto [index, list] : llvm::enumerate(classes)) {
    for (SmallVector<Accumulation> &bucket : buckets(list, opts)) {
      int64_t total = elementsOf(bucket);

      std::string name = "zero.bucket" + std::to_string(groups.size());
      SmallVector<Attribute> members;
      for (Accumulation &a : bucket)
        members.push_back(paramOf(a));
      int64_t shard = (total + opts.worldSize - 1) / opts.worldSize;
      Type elt =
          cast<RankedTensorType>(bucket[0].grad.getType()).getElementType();
      Group g;
      g.shard = RankedTensorType::get({shard}, elt);
      g.flat = RankedTensorType::get({shard * opts.worldSize}, elt);
      g.op = mb.create<dist::GroupOp>(
          module.getLoc(), mb.getStringAttr(name), mb.getArrayAttr(members),
          mb.getI64IntegerAttr(shard * opts.worldSize), UnitAttr());
      g.like = updateOf.lookup(paramOf(bucket[0]).getValue());
      g.stateShard = RankedTensorType::get(
          {shard},
          cast<ShapedType>(g.like.getParam().getType()).getElementType());
      auto state = [&](VariableKind kind, StringRef suffix,
                       RankedTensorType type) {
        auto var = mb.create<VariableOp>(
            module.getLoc(), kind, name + suffix.str(),
            FlatSymbolRefAttr::get(g.op), type, InitKind::zeros, FloatAttr());
        symbols.insert(var);
        return var;
      };
      g.grad = state(VariableKind::grad, ".grad", g.shard);
      g.m = state(VariableKind::opt_state, ".exp_avg", g.stateShard);
      g.v = state(VariableKind::opt_state, ".exp_avg_sq", g.stateShard);
      if (index < 2) {
        g.op.setSharded(true);
        g.param = state(VariableKind::param, ".param", g.shard);
      }
      if (!masters.empty())
        g.master = createMasterShard(mb, symbols, g.op, g.stateShard);

      // Micro-step: pack, reduce-scatter after the last gradient, add
      // this rank's slice at the end.
      Value last = bucket.back().grad;
      OpBuilder b(ctx);
      if (Operation *def = last.getDefiningOp())
        b.setInsertionPointAfter(def);
      else
        b.setInsertionPointToStart(&micro.front());
      Location loc =
          NameLoc::get(b.getStringAttr(name), bucket.back().store.getLoc());
      SmallVector<Value> flat;
      for (Accumulation &a : bucket) {
        auto t = cast<RankedTensorType>(a.grad.getType());
        flat.push_back(b.create<ReshapeOp>(
            loc, RankedTensorType::get({t.getNumElements()}, elt), a.grad));
        dead.push_back(a.store);
        dead.push_back(a.add);
        dead.push_back(a.load);
        deadVars.push_back(symbols.lookup<VariableOp>(a.store.getName()));
      }
      if (shard * opts.worldSize > total)
        flat.push_back(splat(
            b, loc,
            RankedTensorType::get({shard * opts.worldSize - total}, elt), 0.0));
      Value packed = flat.size() == 1
                         ? flat[0]
                         : b.create<ConcatOp>(loc, flat, 0).getResult();
      scatters.push_back(b.create<dist::ReduceScatterOp>(
          loc, g.shard, packed, b.getF64FloatAttr(1.0), ranks));
      groups.push_back(g);
    }
  }

  // Each group's slice is added into its accumulator once the next
  // bucket's reduce-scatter has started.
  for (auto [g, scatter, after] :
       llvm::zip(groups, scatters, waitPoints(scatters))) {
    OpBuilder b(ctx);
    if (after)
      b.setInsertionPointAfter(after);
    else
      b.setInsertionPoint(microRet);
    Location loc = scatter->getLoc();
    Value done = b.create<dist::WaitOp>(loc, scatter->getResult(0));
    Value acc = b.create<LoadOp>(loc, g.shard, g.grad.getSymName());
    Value sum = b.create<AddOp>(loc, acc, done);
    markGradAccumulation(b.create<StoreOp>(loc, sum, g.grad.getSymName()));
  }

  // Apply: the global norm from the shards.
  FailureOr<SqrtOp> norm = findGlobalGradNorm(apply, "ds-zero");
  if (failed(norm))
    return failure();
  SqrtOp sqrt = *norm;
  OpBuilder b(sqrt);
  Location loc = NameLoc::get(b.getStringAttr("zero.norm"), sqrt.getLoc());
  Value total;
  for (Group &g : groups) {
    Value acc = b.create<LoadOp>(loc, g.shard, g.grad.getSymName());
    if (g.shard != g.stateShard) // 16-bit squares overflow early
      acc = b.create<CastOp>(loc, g.stateShard, acc);
    Value sq = b.create<MulOp>(loc, acc, acc);
    Value s = b.create<ReduceSumOp>(loc, sq, ArrayRef<int64_t>{0});
    total = total ? b.create<AddOp>(loc, total, s).getResult() : s;
  }
  Value reduced =
      b.create<dist::AllReduceOp>(loc, total, b.getF64FloatAttr(1.0));
  sqrt.getXMutable().assign(b.create<dist::WaitOp>(loc, reduced));

  // Apply: one sharded update per group, where the first update was.
  SmallVector<AdamWOp> updates;
  apply.walk([&](AdamWOp op) { updates.push_back(op); });
  OpBuilder ub(updates.front());
  for (Group &g : groups) {
    Location gl = NameLoc::get(g.op.getSymNameAttr(), g.like.getLoc());
    auto sym = FlatSymbolRefAttr::get(g.op);
    Value ps;
    if (g.master)
      ps = ub.create<LoadOp>(gl, g.stateShard, g.master.getSymName());
    else if (g.param)
      ps = ub.create<LoadOp>(gl, g.shard, g.param.getSymName());
    else
      ps = ub.create<dist::ShardOp>(
          gl, g.shard, ub.create<dist::FlatParamsOp>(gl, g.flat, sym), ranks);
    Value gs = ub.create<LoadOp>(gl, g.shard, g.grad.getSymName());
    Value mv = ub.create<LoadOp>(gl, g.stateShard, g.m.getSymName());
    Value vv = ub.create<LoadOp>(gl, g.stateShard, g.v.getSymName());
    auto update = ub.create<AdamWOp>(
        gl, ps, gs, mv, vv, g.like.getLr(), g.like.getStep(), g.like.getScale(),
        g.like.getBeta1Attr(), g.like.getBeta2Attr(), g.like.getEpsAttr(),
        g.like.getWeightDecayAttr());
    ub.create<StoreOp>(gl, update.getNewM(), g.m.getSymName());
    ub.create<StoreOp>(gl, update.getNewV(), g.v.getSymName());
    Value newShard = newParamShard(ub, gl, update, g.master, g.shard);
    if (g.param) { // the shard is the parameters' only copy
      ub.create<StoreOp>(gl, newShard, g.param.getSymName());
      ub.create<StoreOp>(gl, splat(ub, gl, g.shard, 0.0), g.grad.getSymName());
      continue;
    }
    Value full = ub.create<dist::AllGatherOp>(gl, g.flat, newShard, ranks);
    ub.create<StoreOp>(gl, splat(ub, gl, g.shard, 0.0), g.grad.getSymName());
    OpBuilder eb(applyRet);
    Value done = eb.create<dist::WaitOp>(gl, full);
    eb.create<dist::StoreParamsOp>(gl, done, sym);
  }
  // The per-parameter updates, moments, accumulators and their zeroing.
  llvm::StringSet<> oldGrads;
  for (VariableOp var : deadVars)
    oldGrads.insert(var.getSymName());
  deadVars.append(masters.begin(), masters.end());
  for (AdamWOp op : updates) {
    collectUpdateUsers(op, dead);
    dead.push_back(op);
    for (Value m : {op.getM(), op.getV()})
      if (auto load = m.getDefiningOp<LoadOp>())
        deadVars.push_back(symbols.lookup<VariableOp>(load.getName()));
  }
  apply.walk([&](StoreOp store) {
    if (oldGrads.contains(store.getName()))
      dead.push_back(store);
  });
  for (Operation *op : dead)
    op->erase();
  for (func::FuncOp f : {micro, apply})
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(f.front())))
      if (isOpTriviallyDead(&op))
        op.erase();
  for (VariableOp var : deadVars)
    symbols.erase(var);
  SmallVector<ShardedGroup> sharded;
  for (Group &g : groups)
    if (g.param)
      sharded.push_back({g.op, g.param, g.shard, g.flat});
  gatherParameters(module, micro, sharded, opts);
  if (auto eval = module.lookupSymbol<func::FuncOp>("eval"))
    gatherParameters(module, eval, sharded, opts);
  return success();
}

} // namespace mlir::ds::zero
