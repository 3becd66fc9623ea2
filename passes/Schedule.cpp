//===- Schedule.cpp - phase `scheduled`: a lifetime-aware total order -----===//
#include "passes/Passes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <memory>
#include <vector>

namespace mlir::ds {
#define GEN_PASS_DEF_DSSCHEDULE
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// Where ops stand in one block and where each variable is read or written,
/// computed once: asking "does anything between these two ops touch @g?" by
/// walking the ops in between made the pass quadratic in depth. Moved ops
/// get a position between their new neighbours' (the gaps are halved, so
/// positions stay exact for ~50 moves into one gap).
class AccessIndex {
public:
  explicit AccessIndex(Block &block) {
    double p = 0;
    for (Operation &op : block) {
      pos[&op] = p;
      if (StringRef name = variableOf(&op); !name.empty())
        accesses[name].push_back(p);
      p += 1;
    }
  }

  double position(Operation *op) const { return pos.lookup(op); }

  /// Whether an access to `name` lies strictly between positions lo and hi.
  bool touchedBetween(StringRef name, double lo, double hi) const {
    auto it = accesses.find(name);
    if (it == accesses.end())
      return false;
    const std::vector<double> &v = it->second;
    auto first = std::upper_bound(v.begin(), v.end(), lo);
    return first != v.end() && *first < hi;
  }

  /// Records that `op` now stands at position p.
  void move(Operation *op, double p) {
    if (StringRef name = variableOf(op); !name.empty()) {
      std::vector<double> &v = accesses[name];
      v.erase(std::find(v.begin(), v.end(), pos[op]));
      v.insert(std::upper_bound(v.begin(), v.end(), p), p);
    }
    pos[op] = p;
  }

private:
  static StringRef variableOf(Operation *op) {
    if (auto load = dyn_cast<LoadOp>(op))
      return load.getName();
    if (auto store = dyn_cast<StoreOp>(op))
      return store.getName();
    return {};
  }

  llvm::DenseMap<Operation *, double> pos;
  llvm::StringMap<std::vector<double>> accesses;
};

struct SchedulePass : ds::impl::DsScheduleBase<SchedulePass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      hoistAccumulations(func);
  }

  /// `%a = load @g; %s = add %a, %d; store %s, @g` moves to just after the
  /// definition of %d.
  void hoistAccumulations(func::FuncOp func) {
    SmallVector<StoreOp> stores;
    func.walk([&](StoreOp s) { stores.push_back(s); });
    llvm::DenseMap<Block *, std::unique_ptr<AccessIndex>> indexes;
    for (StoreOp store : stores) {
      auto add = store.getValue().getDefiningOp<AddOp>();
      if (!add || !add->hasOneUse())
        continue;
      auto load = add.getLhs().getDefiningOp<LoadOp>();
      Value grad = add.getRhs();
      if (!load || load.getName() != store.getName() || !load->hasOneUse())
        continue;
      Operation *def = grad.getDefiningOp();
      // ds-offload's host accumulation reads the gradient's host copy: the
      // copy sits right after the gradient, and its wait moves with the
      // accumulation.
      dist::WaitOp hostWait = grad.getDefiningOp<dist::WaitOp>();
      if (hostWait && hostWait->hasOneUse() &&
          hostWait.getX().getDefiningOp<dist::CopyToHostOp>())
        def = hostWait.getX().getDefiningOp();
      else
        hostWait = nullptr;
      Block *block = store->getBlock();
      Operation *anchor = def ? def : nullptr;
      if (anchor && anchor->getBlock() != block)
        continue;
      Operation *first = anchor ? anchor->getNextNode() : &block->front();
      if (hostWait && first == hostWait.getOperation())
        first = first->getNextNode();
      if (first == load.getOperation() || load->getBlock() != block ||
          add->getBlock() != block)
        continue;
      std::unique_ptr<AccessIndex> &index = indexes[block];
      if (!index)
        index = std::make_unique<AccessIndex>(*block);
      // Accesses strictly after the anchor (from the front: at or after
      // `first`) and before the load block the move.
      double from =
          anchor ? index->position(anchor) : index->position(first) - 1;
      if (index->touchedBetween(store.getName(), from, index->position(load)))
        continue;
      double gap = index->position(first) - from;
      if (hostWait)
        hostWait->moveBefore(first);
      load->moveBefore(first);
      add->moveAfter(load);
      store->moveAfter(add);
      index->move(load, from + gap / 4);
      index->move(add, from + gap / 2);
      index->move(store, from + 3 * gap / 4);
    }
  }
};

} // namespace
