//===- EventInsertion.cpp - plan-insert-events ----------------------------===//
//
// Turns tokens and plan.await into events. An asynchronous call (one with a
// token) starts after the compute call before it, which records an event it
// waits for, and after the awaited calls on other streams since that
// compute call (a copy of a collective's result); it records an event of
// its own. A plan.await hands that event to the next compute call, which
// waits for everything awaited since the compute call before it. Events
// are numbered per program in the order they are made; the tokens and the
// awaits are gone afterwards.
//
//===----------------------------------------------------------------------===//
#include "compiler/plan/PlanPasses.h"

#include "dialects/plan/PlanOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

namespace dsc {

#define GEN_PASS_DEF_PLANINSERTEVENTS
#include "compiler/plan/PlanPasses.h.inc"

using namespace mlir;

namespace {

struct Events {
  SmallVector<int32_t> wait, record;
};

/// One program's events, decided in program order.
class ProgramEvents {
public:
  explicit ProgramEvents(func::FuncOp func) {
    for (Operation &op : func.front()) {
      if (auto await = dyn_cast<plan::AwaitOp>(op))
        awaitCall(await);
      else if (auto call = dyn_cast<plan::CallOp>(op))
        call.getToken() ? issueAsync(call) : issueCompute(call);
    }
  }

  llvm::DenseMap<Operation *, Events> of;
  int32_t count = 0;

private:
  plan::CallOp lastCompute;
  /// The calls awaited since the last compute call, and their events.
  SmallVector<plan::CallOp> awaited;
  SmallVector<int32_t> awaitedEvents;
  llvm::DenseMap<Value, std::pair<plan::CallOp, int32_t>> doneOf; ///< token

  void awaitCall(plan::AwaitOp await) {
    auto [call, done] = doneOf.lookup(await.getToken());
    awaited.push_back(call);
    awaitedEvents.push_back(done);
  }

  void issueAsync(plan::CallOp call) {
    Events &e = of[call];
    if (lastCompute) {
      int32_t ready = count++;
      of[lastCompute].record.push_back(ready);
      e.wait.push_back(ready);
    }
    for (auto [other, event] : llvm::zip(awaited, awaitedEvents))
      if (other.getStream() != call.getStream())
        e.wait.push_back(event);
    int32_t done = count++;
    e.record.push_back(done);
    doneOf[call.getToken()] = {call, done};
  }

  void issueCompute(plan::CallOp call) {
    of[call].wait = std::move(awaitedEvents);
    awaitedEvents.clear();
    awaited.clear();
    lastCompute = call;
  }
};

struct InsertEventsPass : impl::PlanInsertEventsBase<InsertEventsPass> {
  void runOnOperation() override;
};

void InsertEventsPass::runOnOperation() {
  ModuleOp module = requirePlanModule(getOperation(), "plan-insert-events");
  if (!module)
    return signalPassFailure();
  OpBuilder b(module.getContext());
  auto attr = [&](ArrayRef<int32_t> events) {
    return events.empty() ? DenseI32ArrayAttr()
                          : b.getDenseI32ArrayAttr(events);
  };
  for (auto func : module.getOps<func::FuncOp>()) {
    ProgramEvents events(func);
    func->setAttr("plan.events", b.getI64IntegerAttr(events.count));
    for (auto await :
         llvm::make_early_inc_range(func.front().getOps<plan::AwaitOp>()))
      await.erase();
    for (auto call :
         llvm::make_early_inc_range(func.front().getOps<plan::CallOp>())) {
      const Events &e = events.of.lookup(call);
      if (!call.getToken()) {
        call.setWaitAttr(attr(e.wait));
        call.setRecordAttr(attr(e.record));
        continue;
      }
      // The same call without its token.
      b.setInsertionPoint(call);
      auto replaced = b.create<plan::CallOp>(
          call.getLoc(), Type(), call.getKernelAttr(), call.getIns(),
          call.getOuts(), call.getIntsAttr(), call.getFloatsAttr(),
          call.getStreamAttr(), call.getPlaceAttr(), attr(e.wait),
          attr(e.record), call.getFlopsAttr(), call.getTensorGroupAttr());
      // Marks of other passes (a pipeline group) go with it.
      replaced->setDiscardableAttrs(call->getDiscardableAttrDictionary());
      call.erase();
    }
  }
}

} // namespace

std::unique_ptr<mlir::Pass> createPlanInsertEventsPass() {
  return std::make_unique<InsertEventsPass>();
}

} // namespace dsc
