//===- GatherParameters.cpp - ZeRO stage 3: parameters gathered per window
//---===//
//===----------------------------------------------------------------------===//

#include "passes/zero/ZeroUtils.h"

#include "dialects/ds/DsUtils.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::ds::zero {

/// Stage 3: in @micro_step the members of a sharded group are read from
/// an all-gathered copy of the group. A window is a stretch of the
/// group's uses with no other sharded group's use in between (a layer's
/// forward, and again its backward); each gets its own all-gather, whose
/// result dies after the window's last use. The gather of window k is
/// issued where window k-1 starts (prefetch) if the group has at most
/// `prefetch-bucket-size` elements and the gathered elements live there
/// stay within `max-live-parameters`; otherwise where it is needed.
void gatherParameters(ModuleOp module, func::FuncOp micro,
                      MutableArrayRef<ShardedGroup> groups,
                      const Options &opts) {
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
    if (size <= opts.prefetchBucketSize && live <= opts.maxLiveParameters)
      w.issue = at;
  }

  OpBuilder b(module.getContext());
  auto ranks = b.getI64IntegerAttr(opts.worldSize);
  for (Window &w : windows) {
    ShardedGroup &g = groups[w.group];
    Location loc = NameLoc::get(g.op.getSymNameAttr(), ops[w.first]->getLoc());
    b.setInsertionPoint(ops[w.issue]);
    Value shard = b.create<LoadOp>(loc, g.shard, g.param.getSymName());
    Value gathered = b.create<dist::AllGatherOp>(loc, g.flat, shard, ranks);
    b.setInsertionPoint(ops[w.first]);
    Value full = b.create<dist::WaitOp>(loc, gathered);
    // A member's elements (offset -> 1-D view), and its shaped views.
    DenseMap<int64_t, Value> member;
    DenseMap<std::pair<int64_t, Type>, Value> shaped;
    for (const Use &u : w.uses) {
      auto type = cast<RankedTensorType>(u.op->getOperand(u.operand).getType());
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
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(micro.front())))
    if (isOpTriviallyDead(&op))
      op.erase();
}

} // namespace mlir::ds::zero
