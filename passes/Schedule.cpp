//===- Schedule.cpp - phase `scheduled`: a lifetime-aware total order -----===//
#include "passes/Passes.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSSCHEDULE
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// Whether any op strictly between `from` and `to` reads or writes `name`.
bool touchesBetween(Operation *from, Operation *to, StringRef name) {
  for (Operation *op = from->getNextNode(); op && op != to;
       op = op->getNextNode()) {
    if (auto load = dyn_cast<LoadOp>(op); load && load.getName() == name)
      return true;
    if (auto store = dyn_cast<StoreOp>(op); store && store.getName() == name)
      return true;
  }
  return false;
}

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
    for (StoreOp store : stores) {
      auto add = store.getValue().getDefiningOp<AddOp>();
      if (!add || !add->hasOneUse())
        continue;
      auto load = add.getLhs().getDefiningOp<LoadOp>();
      Value grad = add.getRhs();
      if (!load || load.getName() != store.getName() || !load->hasOneUse())
        continue;
      Operation *def = grad.getDefiningOp();
      Block *block = store->getBlock();
      Operation *anchor = def ? def : nullptr;
      if (anchor && anchor->getBlock() != block)
        continue;
      Operation *first = anchor ? anchor->getNextNode() : &block->front();
      if (first == load.getOperation() ||
          touchesBetween(anchor ? anchor : first, load, store.getName()))
        continue;
      load->moveBefore(first);
      add->moveAfter(load);
      store->moveAfter(add);
    }
  }
};

} // namespace
