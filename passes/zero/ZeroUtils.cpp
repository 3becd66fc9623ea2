//===- ZeroUtils.cpp - accumulations, buckets and wait points -------------===//

#include "passes/zero/ZeroUtils.h"

#include "dialects/ds/DsUtils.h"

#include "runtime/plan/VariableNames.h"

namespace mlir::ds::zero {

namespace {

/// The marked accumulations of `func` in program order, each with its
/// gradient's position.
FailureOr<SmallVector<Accumulation>> markedAccumulations(func::FuncOp func) {
  FailureOr<SmallVector<GradAccumulation>> marked =
      findGradAccumulations(func, "ds-zero");
  if (failed(marked))
    return failure();
  DenseMap<Operation *, int64_t> position;
  for (auto [i, op] : llvm::enumerate(func.front()))
    position[&op] = i;
  SmallVector<Accumulation> accs;
  for (GradAccumulation g : *marked) {
    Accumulation a;
    static_cast<GradAccumulation &>(a) = g;
    Operation *def = g.grad.getDefiningOp();
    a.position = def ? position.lookup(def) : -1;
    accs.push_back(a);
  }
  return accs;
}

void sortByCompletion(MutableArrayRef<Accumulation> accs) {
  llvm::stable_sort(accs, [](const Accumulation &a, const Accumulation &b) {
    return a.position < b.position;
  });
}

} // namespace

FailureOr<SmallVector<SmallVector<Accumulation>>>
findAccumulationRounds(func::FuncOp func) {
  FailureOr<SmallVector<Accumulation>> marked = markedAccumulations(func);
  if (failed(marked))
    return failure();
  llvm::StringMap<int64_t> seen;
  SmallVector<SmallVector<Accumulation>> rounds;
  for (Accumulation a : *marked) {
    int64_t k = seen[a.store.getName()]++;
    if (k >= int64_t(rounds.size()))
      rounds.emplace_back();
    rounds[k].push_back(a);
  }
  for (SmallVector<Accumulation> &round : rounds) {
    if (round.size() != rounds.front().size())
      return round.front().store.emitError(
          "ds-zero: the gradients are accumulated different numbers of "
          "times, and ZeRO stage 2 reduces every accumulation");
    sortByCompletion(round);
  }
  return rounds;
}

FailureOr<SmallVector<Accumulation>> findAccumulations(func::FuncOp func) {
  FailureOr<SmallVector<Accumulation>> marked = markedAccumulations(func);
  if (failed(marked))
    return failure();
  // A pipeline stage's step accumulates each gradient once per micro-
  // batch: the gradient is complete at the last of its accumulations, the
  // only one stages 0-1 reduce (the others stay plain accumulations).
  llvm::StringMap<size_t> last;
  for (auto [i, a] : llvm::enumerate(*marked))
    last[a.store.getName()] = i;
  SmallVector<Accumulation> accs;
  for (auto [i, a] : llvm::enumerate(*marked))
    if (last.lookup(a.store.getName()) == i)
      accs.push_back(a);
  sortByCompletion(accs);
  return accs;
}

int64_t elementsOf(ArrayRef<Accumulation> accs) {
  int64_t n = 0;
  for (const Accumulation &a : accs)
    n += cast<RankedTensorType>(a.grad.getType()).getNumElements();
  return n;
}

SmallVector<SmallVector<Accumulation>> buckets(ArrayRef<Accumulation> accs,
                                               const Options &opts) {
  SmallVector<SmallVector<Accumulation>> out;
  int64_t elements = 0;
  int64_t limit = opts.stage == 3 ? std::min<int64_t>(opts.bucketSize,
                                                      opts.prefetchBucketSize)
                                  : opts.bucketSize;
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

SmallVector<Operation *> waitPoints(ArrayRef<Operation *> collectives) {
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

FailureOr<UpdateTarget> updateTarget(Update op, SymbolTable &symbols) {
  auto load = op.getParam().getDefiningOp<LoadOp>();
  auto var = load ? symbols.lookup<VariableOp>(load.getName()) : VariableOp();
  if (var && var.getKind() == VariableKind::param)
    return UpdateTarget{var, VariableOp()};
  if (var && var.getKind() == VariableKind::master)
    if (auto param = symbols.lookup<VariableOp>(var.getOfAttr().getAttr()))
      return UpdateTarget{param, var};
  return op.emitError("ds-zero: the update does not read a parameter or its "
                      "master weight");
}

void collectUpdateUsers(Update op, SmallVectorImpl<Operation *> &dead) {
  for (Value r : op->getResults())
    for (Operation *user : r.getUsers()) {
      if (isa<CastOp>(user))
        for (Operation *store : user->getUsers())
          dead.push_back(store);
      dead.push_back(user);
    }
}

VariableOp createMasterShard(OpBuilder &mb, SymbolTable &symbols,
                             dist::GroupOp group, RankedTensorType shard) {
  auto var = mb.create<VariableOp>(
      group.getLoc(), VariableKind::master,
      dsc::plan::stateName(group.getSymName(), dsc::plan::kMasterSuffix),
      FlatSymbolRefAttr::get(group), shard, InitKind::zeros, FloatAttr());
  symbols.insert(var);
  return var;
}

Value newParamShard(OpBuilder &b, Location loc, Value newParam,
                    VariableOp master, RankedTensorType paramShard) {
  if (!master)
    return newParam;
  b.create<StoreOp>(loc, newParam, master.getSymName());
  return b.create<CastOp>(loc, paramShard, newParam);
}

namespace {

/// The types of `group`'s members, in order.
SmallVector<RankedTensorType> memberTypes(dist::GroupOp group,
                                          SymbolTable &symbols) {
  SmallVector<RankedTensorType> types;
  for (Attribute member : group.getMembers())
    types.push_back(
        symbols.lookup<VariableOp>(cast<FlatSymbolRefAttr>(member).getValue())
            .getTensorType());
  return types;
}

/// Lamb over a shard: each member's norms summed over the ranks first.
ShardUpdate lambOverShard(OpBuilder &b, Location loc, LambOp lamb,
                          ArrayRef<RankedTensorType> types, Value ps, Value gs,
                          ValueRange states) {
  SmallVector<int64_t> members;
  for (RankedTensorType t : types)
    members.push_back(t.getNumElements());
  b.setInsertionPoint(lamb);
  auto normsType =
      RankedTensorType::get({2 * int64_t(members.size())}, b.getF32Type());
  Value partial = b.create<LambNormsOp>(
      loc, normsType, ps, gs, states[0], states[1], lamb.getScale(),
      lamb.getBeta1Attr(), lamb.getBeta2Attr(), lamb.getEpsAttr(),
      lamb.getWeightDecayAttr(), lamb.getEpsInsideSqrtAttr(),
      b.getDenseI64ArrayAttr(members));
  Value summed =
      b.create<dist::AllReduceOp>(loc, partial, b.getF64FloatAttr(1.0));
  lamb.getNormsMutable().assign(b.create<dist::WaitOp>(loc, summed));
  lamb.setMembers(members);
  b.setInsertionPointAfter(lamb);
  return {lamb.getNewParam(), {lamb.getNewM(), lamb.getNewV()}};
}

} // namespace

ShardUpdate updateOverShard(OpBuilder &b, Location loc,
                            ArrayRef<Update> updates, dist::GroupOp group,
                            SymbolTable &symbols, IntegerAttr ranks, Value ps,
                            Value gs, ValueRange states) {
  SmallVector<RankedTensorType> types = memberTypes(group, symbols);
  Update like = updates.front();
  if (isa<MuonOp>(like.getOperation()))
    return muonOverShard(b, loc, updates, types, ranks, ps, gs, states);
  auto update = cast<Update>(like.cloneOver(b, loc, ps, gs, states));
  if (auto lamb = dyn_cast<LambOp>(update.getOperation()))
    return lambOverShard(b, loc, lamb, types, ps, gs, states);
  ShardUpdate out{update.getNewParam(), {}};
  for (Value v : update.getNewStates())
    out.newStates.push_back(v);
  return out;
}

void eraseUnusedLoads(func::FuncOp func) {
  for (Operation &op : llvm::make_early_inc_range(func.front()))
    if (isa<LoadOp>(op) && op.use_empty())
      op.erase();
}

} // namespace mlir::ds::zero
