//===- ZeroUtils.cpp - accumulations, buckets and wait points -------------===//

#include "passes/zero/ZeroUtils.h"

#include "runtime/plan/VariableNames.h"

namespace mlir::ds::zero {

FailureOr<SmallVector<Accumulation>> findAccumulations(func::FuncOp func) {
  FailureOr<SmallVector<GradAccumulation>> marked =
      findGradAccumulations(func, "ds-zero");
  if (failed(marked))
    return failure();
  DenseMap<Operation *, int64_t> position;
  for (auto [i, op] : llvm::enumerate(func.front()))
    position[&op] = i;
  SmallVector<Accumulation> accs;
  for (const GradAccumulation &g : *marked) {
    Accumulation a;
    static_cast<GradAccumulation &>(a) = g;
    Operation *def = g.grad.getDefiningOp();
    a.position = def ? position.lookup(def) : -1;
    accs.push_back(a);
  }
  llvm::stable_sort(accs, [](const Accumulation &a, const Accumulation &b) {
    return a.position < b.position;
  });
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

Value newParamShard(OpBuilder &b, Location loc, Update update,
                    VariableOp master, RankedTensorType paramShard) {
  if (!master)
    return update.getNewParam();
  b.create<StoreOp>(loc, update.getNewParam(), master.getSymName());
  return b.create<CastOp>(loc, paramShard, update.getNewParam());
}

Update updateOverShard(OpBuilder &b, Location loc, Update like,
                       dist::GroupOp group, SymbolTable &symbols, Value ps,
                       Value gs, ValueRange states) {
  auto update = cast<Update>(like.cloneOver(b, loc, ps, gs, states));
  auto lamb = dyn_cast<LambOp>(update.getOperation());
  if (!lamb)
    return update;
  SmallVector<int64_t> members;
  for (Attribute member : group.getMembers())
    members.push_back(
        symbols.lookup<VariableOp>(cast<FlatSymbolRefAttr>(member).getValue())
            .getTensorType()
            .getNumElements());
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
  return update;
}

llvm::StringSet<> wholeParameters(ModuleOp module) {
  llvm::StringSet<> names;
  SymbolTable symbols(module);
  module.walk([&](MuonOp op) {
    FailureOr<UpdateTarget> target = updateTarget(op, symbols);
    if (succeeded(target))
      names.insert(target->param.getSymName());
  });
  return names;
}

void eraseUnusedLoads(func::FuncOp func) {
  for (Operation &op : llvm::make_early_inc_range(func.front()))
    if (isa<LoadOp>(op) && op.use_empty())
      op.erase();
}

} // namespace mlir::ds::zero
