//===- Zero.cpp - phase `dist`: data parallelism and ZeRO
//------------------===//
//
// Stage 0. Autodiff leaves each micro-step's gradient accumulations as
//   %acc = ds.load @p.grad ; %s = ds.add %acc, %d ; ds.store %s, @p.grad
// This pass buckets the %d in the order they are completed, all-reduces
// (sums; ds-autodiff divided the seed by the world size) each bucket right
// after its last gradient, and rewrites the accumulations to add the
// averaged gradients after a dist.wait placed once the next bucket's
// all-reduce has started (the last bucket's at the end of the micro-step),
// so communication runs under the rest of the backward and at most two
// buckets' results are live. With gradient accumulation the reduction
// moves to @micro_step_sync, a copy of @micro_step that dsrun runs for a
// step's last micro-batch: it reduces the accumulated sums acc + d and
// stores them, while @micro_step only accumulates (DeepSpeed's
// accumulation boundary).
//
//===----------------------------------------------------------------------===//

#include "dialects/ds/DsUtils.h"
#include "passes/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSZERO
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

struct Accumulation {
  LoadOp load;
  AddOp add;
  StoreOp store;
  Value grad;
  int64_t position; ///< where %d is complete
};

/// The micro-step that ends an accumulation window, at stages 0-1 with
/// accumulation (dsrun runs it instead of @micro_step for the window's last
/// micro-batch; runtime/plan/PlanFormat.h).
constexpr llvm::StringLiteral kSyncName = "micro_step_sync";

struct ZeroPass : ds::impl::DsZeroBase<ZeroPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (worldSize < 1 || stage < 0 || stage > 3 || bucketSize < 1) {
      module.emitError("ds-zero: world-size and bucket-size must be >= 1 and "
                       "stage in 0..3");
      return signalPassFailure();
    }
    module->setAttr(
        "dist.world_size",
        IntegerAttr::get(IntegerType::get(&getContext(), 64), worldSize));
    if (worldSize == 1)
      return;
    auto micro = module.lookupSymbol<func::FuncOp>("micro_step");
    if (!micro) {
      module.emitError("ds-zero: no @micro_step; run ds-autodiff first");
      return signalPassFailure();
    }
    if (stage >= 2) {
      if (failed(shardGradients(module, micro)))
        return signalPassFailure();
      return;
    }
    if (accumulationSteps > 1) {
      // Accumulate locally; reduce the sums once, in the micro-step that
      // ends the window (DeepSpeed's accumulation boundary).
      func::FuncOp sync = micro.clone();
      sync.setSymName(kSyncName);
      SymbolTable(module).insert(sync, std::next(micro->getIterator()));
      allReduceGradients(sync, /*accumulated=*/true);
    } else {
      allReduceGradients(micro);
    }
    if (stage >= 1 && failed(shardOptimizer(module)))
      return signalPassFailure();
  }

  /// Stage 2: the buckets become the parameter groups. Each micro-step
  /// reduce-scatters a bucket's gradients (padded to a multiple of the
  /// world size) right after its last one and adds this rank's slice into a
  /// shard-sized accumulator; @apply computes the global norm from the
  /// shards (an all-reduce of sums of squares), updates its slice and
  /// all-gathers each group.
  LogicalResult shardGradients(ModuleOp module, func::FuncOp micro) {
    auto apply = module.lookupSymbol<func::FuncOp>("apply");
    if (!apply)
      return module.emitError("ds-zero: no @apply; run ds-adamw first");
    SymbolTable symbols(module);
    MLIRContext *ctx = module.getContext();
    OpBuilder mb(ctx);
    mb.setInsertionPointToEnd(module.getBody());
    auto microRet = cast<func::ReturnOp>(micro.front().getTerminator());
    auto applyRet = cast<func::ReturnOp>(apply.front().getTerminator());
    auto ranks = mb.getI64IntegerAttr(worldSize);

    llvm::StringMap<AdamWOp> updateOf; // param name -> its update
    apply.walk([&](AdamWOp op) {
      if (auto load = op.getParam().getDefiningOp<LoadOp>())
        updateOf[load.getName()] = op;
    });
    auto paramOf = [&](Accumulation a) {
      return symbols.lookup<VariableOp>(a.store.getName()).getOfAttr();
    };

    // Buckets in completion order, one list per weight-decay class; at
    // stage 3 the parameters under the persistence threshold form classes
    // of their own, which stay whole as at stage 2.
    SmallVector<Accumulation> classes[4];
    for (Accumulation &a : findAccumulations(micro)) {
      AdamWOp update = updateOf.lookup(paramOf(a).getValue());
      if (!update)
        return a.store.emitError("ds-zero: no AdamW update for ") << paramOf(a);
      int64_t n = cast<RankedTensorType>(a.grad.getType()).getNumElements();
      bool persistent = stage < 3 || n < persistenceThreshold;
      classes[(update.getWeightDecay().convertToDouble() != 0 ? 0 : 1) +
              (persistent ? 2 : 0)]
          .push_back(a);
    }
    struct Group {
      dist::GroupOp op;
      VariableOp grad, m, v;
      VariableOp param; ///< stage 3: this rank's shard of the parameters
      AdamWOp like;
      RankedTensorType shard, flat;
    };
    SmallVector<Group> groups;
    SmallVector<Operation *> scatters; // one per group
    SmallVector<Operation *> dead;
    SmallVector<VariableOp> deadVars;
    for (auto [index, list] : llvm::enumerate(classes)) {
      for (SmallVector<Accumulation> &bucket : buckets(list)) {
        int64_t total = elementsOf(bucket);

        std::string name = "zero.bucket" + std::to_string(groups.size());
        SmallVector<Attribute> members;
        for (Accumulation &a : bucket)
          members.push_back(paramOf(a));
        int64_t shard = (total + worldSize - 1) / worldSize;
        Type elt =
            cast<RankedTensorType>(bucket[0].grad.getType()).getElementType();
        Group g;
        g.shard = RankedTensorType::get({shard}, elt);
        g.flat = RankedTensorType::get({shard * worldSize}, elt);
        g.op = mb.create<dist::GroupOp>(
            module.getLoc(), mb.getStringAttr(name), mb.getArrayAttr(members),
            mb.getI64IntegerAttr(shard * worldSize), UnitAttr());
        auto state = [&](VariableKind kind, StringRef suffix) {
          auto var =
              mb.create<VariableOp>(module.getLoc(), kind, name + suffix.str(),
                                    FlatSymbolRefAttr::get(g.op), g.shard,
                                    InitKind::zeros, FloatAttr());
          symbols.insert(var);
          return var;
        };
        g.grad = state(VariableKind::grad, ".grad");
        g.m = state(VariableKind::opt_state, ".exp_avg");
        g.v = state(VariableKind::opt_state, ".exp_avg_sq");
        if (index < 2) {
          g.op.setSharded(true);
          g.param = state(VariableKind::param, ".param");
        }
        g.like = updateOf.lookup(paramOf(bucket[0]).getValue());

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
        if (shard * worldSize > total)
          flat.push_back(splat(
              b, loc, RankedTensorType::get({shard * worldSize - total}, elt),
              0.0));
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
      b.create<StoreOp>(loc, sum, g.grad.getSymName());
    }

    // Apply: the global norm from the shards.
    auto sqrt = applyRet.getOperand(0).getDefiningOp<SqrtOp>();
    if (!sqrt)
      return apply.emitError("ds-zero: @apply does not return sqrt(norm)");
    OpBuilder b(sqrt);
    Location loc = NameLoc::get(b.getStringAttr("zero.norm"), sqrt.getLoc());
    Value total;
    for (Group &g : groups) {
      Value acc = b.create<LoadOp>(loc, g.shard, g.grad.getSymName());
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
      if (g.param)
        ps = ub.create<LoadOp>(gl, g.shard, g.param.getSymName());
      else
        ps = ub.create<dist::ShardOp>(
            gl, g.shard, ub.create<dist::FlatParamsOp>(gl, g.flat, sym), ranks);
      Value gs = ub.create<LoadOp>(gl, g.shard, g.grad.getSymName());
      Value mv = ub.create<LoadOp>(gl, g.shard, g.m.getSymName());
      Value vv = ub.create<LoadOp>(gl, g.shard, g.v.getSymName());
      auto update = ub.create<AdamWOp>(
          gl, ps, gs, mv, vv, g.like.getLr(), g.like.getStep(),
          g.like.getScale(), g.like.getBeta1Attr(), g.like.getBeta2Attr(),
          g.like.getEpsAttr(), g.like.getWeightDecayAttr());
      ub.create<StoreOp>(gl, update.getNewM(), g.m.getSymName());
      ub.create<StoreOp>(gl, update.getNewV(), g.v.getSymName());
      if (g.param) { // the shard is the parameters' only copy
        ub.create<StoreOp>(gl, update.getNewParam(), g.param.getSymName());
        ub.create<StoreOp>(gl, splat(ub, gl, g.shard, 0.0),
                           g.grad.getSymName());
        continue;
      }
      Value full =
          ub.create<dist::AllGatherOp>(gl, g.flat, update.getNewParam(), ranks);
      ub.create<StoreOp>(gl, splat(ub, gl, g.shard, 0.0), g.grad.getSymName());
      OpBuilder eb(applyRet);
      Value done = eb.create<dist::WaitOp>(gl, full);
      eb.create<dist::StoreParamsOp>(gl, done, sym);
    }
    // The per-parameter updates, moments, accumulators and their zeroing.
    llvm::StringSet<> oldGrads;
    for (VariableOp var : deadVars)
      oldGrads.insert(var.getSymName());
    for (AdamWOp op : updates) {
      for (Value r : op.getResults())
        for (Operation *user : r.getUsers())
          dead.push_back(user);
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
    gatherParameters(module, micro, sharded);
    return success();
  }

  struct ShardedGroup {
    dist::GroupOp op;
    VariableOp param;
    RankedTensorType shard, flat;
  };

  /// Stage 3: in @micro_step the members of a sharded group are read from
  /// an all-gathered copy of the group. A window is a stretch of the
  /// group's uses with no other sharded group's use in between (a layer's
  /// forward, and again its backward); each gets its own all-gather, whose
  /// result dies after the window's last use. The gather of window k is
  /// issued where window k-1 starts (prefetch) if the group has at most
  /// `prefetch-bucket-size` elements and the gathered elements live there
  /// stay within `max-live-parameters`; otherwise where it is needed.
  void gatherParameters(ModuleOp module, func::FuncOp micro,
                        MutableArrayRef<ShardedGroup> groups) {
    if (groups.empty())
      return;
    SymbolTable symbols(module);
    DenseMap<Operation *, int64_t> position;
    SmallVector<Operation *> ops;
    for (Operation &op : micro.front()) {
      position[&op] = ops.size();
      ops.push_back(&op);
    }
    // Every read of a member: the op, the operand, the group and member.
    struct Use {
      Operation *op;
      unsigned operand;
      int group;
      int64_t offset; ///< the member's first element in the group
    };
    llvm::StringMap<std::pair<int, int64_t>> memberOf;
    for (auto [gi, g] : llvm::enumerate(groups)) {
      int64_t offset = 0;
      for (Attribute a : g.op.getMembers()) {
        StringRef name = cast<FlatSymbolRefAttr>(a).getValue();
        memberOf[name] = {static_cast<int>(gi), offset};
        offset +=
            symbols.lookup<VariableOp>(name).getTensorType().getNumElements();
      }
    }
    SmallVector<Use> uses;
    micro.walk([&](LoadOp load) {
      auto it = memberOf.find(load.getName());
      if (it == memberOf.end())
        return;
      SmallVector<Value> views{load.getResult()};
      while (!views.empty())
        for (OpOperand &use : views.pop_back_val().getUses()) {
          if (auto reshape = dyn_cast<ReshapeOp>(use.getOwner()))
            views.push_back(reshape);
          else
            uses.push_back({use.getOwner(), use.getOperandNumber(),
                            it->second.first, it->second.second});
        }
    });
    llvm::stable_sort(uses, [&](const Use &a, const Use &b) {
      return position.lookup(a.op) < position.lookup(b.op);
    });

    // Windows: split a group's uses where another group is used between.
    struct Window {
      int group;
      SmallVector<Use> uses;
      int64_t first, last, issue = 0;
    };
    SmallVector<Window> windows;
    DenseMap<int, size_t> open; // group -> its latest window
    for (const Use &u : uses) {
      int64_t at = position.lookup(u.op);
      auto it = open.find(u.group);
      bool extend = it != open.end();
      if (extend) {
        Window &w = windows[it->second];
        for (const Window &other : windows)
          if (other.group != u.group && other.last > w.last &&
              llvm::any_of(other.uses, [&](const Use &o) {
                int64_t p = position.lookup(o.op);
                return p > w.last && p < at;
              }))
            extend = false;
      }
      if (!extend) {
        open[u.group] = windows.size();
        windows.push_back({u.group, {}, at, at});
      }
      Window &w = windows[open[u.group]];
      w.uses.push_back(u);
      w.last = at;
    }
    llvm::stable_sort(windows, [](const Window &a, const Window &b) {
      return a.first < b.first;
    });

    // Where each gather is issued.
    for (auto [k, w] : llvm::enumerate(windows)) {
      w.issue = w.first;
      if (k == 0)
        continue;
      int64_t size = groups[w.group].flat.getNumElements();
      int64_t at = windows[k - 1].first, live = size;
      for (size_t j = 0; j < k; ++j)
        if (windows[j].issue <= at && at <= windows[j].last)
          live += groups[windows[j].group].flat.getNumElements();
      if (size <= prefetchBucketSize && live <= maxLiveParameters)
        w.issue = at;
    }

    OpBuilder b(module.getContext());
    auto ranks = b.getI64IntegerAttr(worldSize);
    for (Window &w : windows) {
      ShardedGroup &g = groups[w.group];
      Location loc =
          NameLoc::get(g.op.getSymNameAttr(), ops[w.first]->getLoc());
      b.setInsertionPoint(ops[w.issue]);
      Value shard = b.create<LoadOp>(loc, g.shard, g.param.getSymName());
      Value gathered = b.create<dist::AllGatherOp>(loc, g.flat, shard, ranks);
      b.setInsertionPoint(ops[w.first]);
      Value full = b.create<dist::WaitOp>(loc, gathered);
      // A member's elements (offset -> 1-D view), and its shaped views.
      DenseMap<int64_t, Value> member;
      DenseMap<std::pair<int64_t, Type>, Value> shaped;
      for (const Use &u : w.uses) {
        auto type =
            cast<RankedTensorType>(u.op->getOperand(u.operand).getType());
        Value &view = member[u.offset];
        if (!view && type.getNumElements() == g.flat.getNumElements())
          view = full; // the group's only member, without padding
        else if (!view)
          view = b.create<SliceOp>(loc, full, ArrayRef<int64_t>{u.offset},
                                   ArrayRef<int64_t>{type.getNumElements()});
        Value &v = shaped[{u.offset, type}];
        if (!v)
          v = view.getType() == type
                  ? view
                  : b.create<ReshapeOp>(loc, type, view).getResult();
        u.op->setOperand(u.operand, v);
      }
    }
    for (Operation &op :
         llvm::make_early_inc_range(llvm::reverse(micro.front())))
      if (isOpTriviallyDead(&op))
        op.erase();
  }

  /// Stage 1: parameters with gradients form two flat groups (with and
  /// without weight decay, the plan's packing order), padded to a multiple
  /// of the world size. Each rank keeps Adam's moments for its slice only,
  /// updates that slice of the parameters and all-gathers the group.
  LogicalResult shardOptimizer(ModuleOp module) {
    auto apply = module.lookupSymbol<func::FuncOp>("apply");
    if (!apply)
      return module.emitError("ds-zero: no @apply; run ds-adamw first");
    SymbolTable symbols(module);
    MLIRContext *ctx = module.getContext();
    OpBuilder mb(ctx);
    mb.setInsertionPointToEnd(module.getBody());

    // The updates, grouped by hyper-parameters in program order.
    SmallVector<AdamWOp> updates;
    apply.walk([&](AdamWOp op) { updates.push_back(op); });
    auto ret = cast<func::ReturnOp>(apply.front().getTerminator());
    // Partition first: sharding a group erases its updates.
    SmallVector<AdamWOp> groups[2];
    for (AdamWOp op : updates)
      groups[takesWeightDecay(cast<ShapedType>(op.getParam().getType())) ? 0
                                                                         : 1]
          .push_back(op);
    for (int g = 0; g < 2; ++g)
      if (!groups[g].empty() &&
          failed(shardGroup(module, symbols, mb, groups[g], ret,
                            g == 0 ? "zero.decay" : "zero.no_decay")))
        return failure();
    return success();
  }

  LogicalResult shardGroup(ModuleOp module, SymbolTable &symbols, OpBuilder &mb,
                           ArrayRef<AdamWOp> group, func::ReturnOp ret,
                           StringRef name) {
    MLIRContext *ctx = module.getContext();
    SmallVector<Attribute> members;
    SmallVector<Operation *> dead;
    SmallVector<VariableOp> deadVars;
    int64_t total = 0;
    Type elt;
    for (AdamWOp op : group) {
      auto param = op.getParam().getDefiningOp<LoadOp>();
      if (!param)
        return op.emitError("ds-zero: the update does not read a parameter");
      members.push_back(FlatSymbolRefAttr::get(ctx, param.getName()));
      auto t = cast<RankedTensorType>(op.getParam().getType());
      total += t.getNumElements();
      elt = t.getElementType();
      for (Value r : op.getResults())
        for (Operation *user : r.getUsers())
          dead.push_back(user); // the stores of p, m and v
      dead.push_back(op);
      for (Value m : {op.getM(), op.getV()}) {
        auto load = m.getDefiningOp<LoadOp>();
        if (!load)
          return op.emitError("ds-zero: a moment is not a variable");
        dead.push_back(load);
        deadVars.push_back(symbols.lookup<VariableOp>(load.getName()));
      }
    }
    int64_t shard = (total + worldSize - 1) / worldSize;
    int64_t size = shard * worldSize;
    auto groupOp = mb.create<dist::GroupOp>(
        module.getLoc(), mb.getStringAttr(name), mb.getArrayAttr(members),
        mb.getI64IntegerAttr(size), UnitAttr());
    auto shardType = RankedTensorType::get({shard}, elt);
    auto flatType = RankedTensorType::get({size}, elt);
    auto moment = [&](StringRef suffix) {
      auto var = mb.create<VariableOp>(module.getLoc(), VariableKind::opt_state,
                                       (name + suffix).str(),
                                       FlatSymbolRefAttr::get(groupOp),
                                       shardType, InitKind::zeros, FloatAttr());
      symbols.insert(var);
      return var;
    };
    VariableOp m = moment(".exp_avg"), v = moment(".exp_avg_sq");

    AdamWOp first = group.front();
    OpBuilder b(first);
    Location loc = NameLoc::get(b.getStringAttr(name), first.getLoc());
    auto sym = FlatSymbolRefAttr::get(groupOp);
    Value grads = b.create<dist::FlatGradsOp>(loc, flatType, sym);
    Value params = b.create<dist::FlatParamsOp>(loc, flatType, sym);
    auto ranks = b.getI64IntegerAttr(worldSize);
    Value gs = b.create<dist::ShardOp>(loc, shardType, grads, ranks);
    Value ps = b.create<dist::ShardOp>(loc, shardType, params, ranks);
    Value mv = b.create<LoadOp>(loc, shardType, m.getSymName());
    Value vv = b.create<LoadOp>(loc, shardType, v.getSymName());
    auto update = b.create<AdamWOp>(
        loc, ps, gs, mv, vv, first.getLr(), first.getStep(), first.getScale(),
        first.getBeta1Attr(), first.getBeta2Attr(), first.getEpsAttr(),
        first.getWeightDecayAttr());
    b.create<StoreOp>(loc, update.getNewM(), m.getSymName());
    b.create<StoreOp>(loc, update.getNewV(), v.getSymName());
    Value full =
        b.create<dist::AllGatherOp>(loc, flatType, update.getNewParam(), ranks);
    b.setInsertionPoint(ret);
    Value done = b.create<dist::WaitOp>(loc, full);
    b.create<dist::StoreParamsOp>(loc, done, sym);

    // The per-parameter updates (users first), then their moments.
    for (Operation *op : dead)
      op->erase();
    for (VariableOp var : deadVars)
      symbols.erase(var);
    eraseUnusedLoads(ret->getParentOfType<func::FuncOp>());
    return success();
  }

  static void eraseUnusedLoads(func::FuncOp func) {
    for (Operation &op : llvm::make_early_inc_range(func.front()))
      if (isa<LoadOp>(op) && op.use_empty())
        op.erase();
  }

  static int64_t elementsOf(ArrayRef<Accumulation> accs) {
    int64_t n = 0;
    for (const Accumulation &a : accs)
      n += cast<RankedTensorType>(a.grad.getType()).getNumElements();
    return n;
  }

  /// Consecutive gradients, at most bucketSize elements a bucket (a bigger
  /// gradient gets a bucket of its own). At stage 3 a bucket is also the
  /// unit of gathering, so it holds at most prefetch-bucket-size elements
  /// too: DeepSpeed gathers module by module, with at most that many
  /// elements in flight.
  SmallVector<SmallVector<Accumulation>> buckets(ArrayRef<Accumulation> accs) {
    SmallVector<SmallVector<Accumulation>> out;
    int64_t elements = 0;
    int64_t limit = stage == 3
                        ? std::min<int64_t>(bucketSize, prefetchBucketSize)
                        : bucketSize;
    for (const Accumulation &a : accs) {
      int64_t n = elementsOf(a);
      if (out.empty() || elements + n > limit) {
        out.emplace_back();
        elements = 0;
      }
      out.back().push_back(a);
      elements += n;
    }
    return out;
  }

  SmallVector<Accumulation> findAccumulations(func::FuncOp func) {
    DenseMap<Operation *, int64_t> position;
    for (auto [i, op] : llvm::enumerate(func.front()))
      position[&op] = i;
    SmallVector<Accumulation> accs;
    func.walk([&](StoreOp store) {
      auto add = store.getValue().getDefiningOp<AddOp>();
      auto load = add ? add.getLhs().getDefiningOp<LoadOp>() : LoadOp();
      if (!load || load.getName() != store.getName() || !add->hasOneUse())
        return;
      Value d = add.getRhs();
      int64_t at = d.getDefiningOp() ? position.lookup(d.getDefiningOp()) : -1;
      accs.push_back({load, add, store, d, at});
    });
    llvm::stable_sort(accs, [](const Accumulation &a, const Accumulation &b) {
      return a.position < b.position;
    });
    return accs;
  }

  /// Stages 0-1: all-reduces each bucket of `func`'s gradients right after
  /// its last one. With `accumulated` (the micro-step that ends an
  /// accumulation window) the sums acc + d are reduced and stored;
  /// otherwise each micro-step's d is, and added to acc after the wait.
  void allReduceGradients(func::FuncOp func, bool accumulated = false) {
    SmallVector<Accumulation> accs = findAccumulations(func);
    auto ret = cast<func::ReturnOp>(func.front().getTerminator());
    OpBuilder b(func.getContext());
    const double scale = 1.0; // the seed already divided by worldSize

    SmallVector<SmallVector<Accumulation>> all = buckets(accs);
    SmallVector<Operation *> reductions;
    SmallVector<SmallVector<int64_t>> sizesOf;
    for (SmallVector<Accumulation> &bucket : all) {

      // Start the all-reduce right after the bucket's last gradient.
      Value last = bucket.back().grad;
      if (Operation *def = last.getDefiningOp())
        b.setInsertionPointAfter(def);
      else
        b.setInsertionPointToStart(&func.front());
      Location loc = NameLoc::get(b.getStringAttr("zero.bucket"),
                                  bucket.back().store.getLoc());
      SmallVector<Value> flat;
      SmallVector<int64_t> sizes;
      for (Accumulation &a : bucket) {
        auto t = cast<RankedTensorType>(a.grad.getType());
        sizes.push_back(t.getNumElements());
        Value value = a.grad;
        if (accumulated) { // acc + d, computed here
          for (Operation *op : {a.load.getOperation(), a.add.getOperation()}) {
            op->moveBefore(b.getInsertionBlock(), b.getInsertionPoint());
            b.setInsertionPointAfter(op);
          }
          value = a.add;
        }
        flat.push_back(b.create<ReshapeOp>(
            loc,
            RankedTensorType::get({t.getNumElements()}, t.getElementType()),
            value));
      }
      Value packed = flat.size() == 1
                         ? flat[0]
                         : b.create<ConcatOp>(loc, flat, 0).getResult();
      reductions.push_back(
          b.create<dist::AllReduceOp>(loc, packed, b.getF64FloatAttr(scale)));
      sizesOf.push_back(sizes);
    }

    // Wait and accumulate once the next bucket's all-reduce has started.
    for (auto [bucket, reduced, sizes, after] :
         llvm::zip(all, reductions, sizesOf, waitPoints(reductions))) {
      if (after)
        b.setInsertionPointAfter(after);
      else
        b.setInsertionPoint(ret);
      Location loc = reduced->getLoc();
      Value done = b.create<dist::WaitOp>(loc, reduced->getResult(0));
      SmallVector<Value> parts;
      if (bucket.size() == 1)
        parts.push_back(done);
      else
        for (Value p : b.create<SplitOp>(loc, done, 0, sizes).getResults())
          parts.push_back(p);
      for (auto [a, part] : llvm::zip(bucket, parts)) {
        Value g = b.create<ReshapeOp>(loc, a.grad.getType(), part);
        if (accumulated) {
          a.store->moveBefore(b.getInsertionBlock(), b.getInsertionPoint());
          b.setInsertionPointAfter(a.store);
          a.store.getValueMutable().assign(g);
          continue;
        }
        // The accumulation follows, in order, where the builder stands.
        for (Operation *op : {a.load.getOperation(), a.add.getOperation(),
                              a.store.getOperation()}) {
          op->moveBefore(b.getInsertionBlock(), b.getInsertionPoint());
          b.setInsertionPointAfter(op);
        }
        a.add.getRhsMutable().assign(g);
      }
    }
  }

  /// Where to wait for each of `collectives`: after the next one in program
  /// order (null: at the end of the program). The comm stream then always
  /// has the next bucket queued, and at most two buckets' results are live.
  static SmallVector<Operation *>
  waitPoints(ArrayRef<Operation *> collectives) {
    SmallVector<size_t> order;
    for (size_t i = 0; i < collectives.size(); ++i)
      order.push_back(i);
    llvm::stable_sort(order, [&](size_t a, size_t b) {
      return collectives[a]->isBeforeInBlock(collectives[b]);
    });
    SmallVector<Operation *> after(collectives.size(), nullptr);
    for (size_t i = 0; i + 1 < order.size(); ++i)
      after[order[i]] = collectives[order[i + 1]];
    return after;
  }
};

} // namespace
