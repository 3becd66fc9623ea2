//===- Liveness.cpp - plan-liveness: each transient's lifetime ------------===//
//
// A transient (what one program computes) lives from the first to the last
// call that touches it, an output to the end of its program, and what a
// collective or a copy on another stream touches until the compute call
// that waits for the event it records (after its dist.wait) or one a later
// call on its stream records, or to the end when none does. The lifetime goes
// on the storage as `live [first, last]`, in calls of its program; plan-place
// packs by it.
//
//===----------------------------------------------------------------------===//
#include "compiler/plan/PlanIR.h"
#include "compiler/plan/PlanPasses.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

#include <climits>

namespace dsc {

#define GEN_PASS_DEF_PLANLIVENESS
#include "compiler/plan/PlanPasses.h.inc"

using namespace mlir;

namespace {

/// One program's transients and their lifetimes.
class Lifetimes {
public:
  Lifetimes(func::FuncOp func, SymbolTable &symbols) : symbols(symbols) {
    for (auto call : func.front().getOps<plan::CallOp>())
      calls.push_back(call);
    const int64_t n = calls.size();
    for (auto [i, call] : llvm::enumerate(calls))
      for (ValueRange vs : {call.getIns(), call.getOuts()})
        for (Value v : vs)
          touch(v, i, /*add=*/true);
    for (auto outputs : func.front().getOps<plan::OutputsOp>())
      for (Value v : outputs.getBuffers())
        touch(v, n);
    for (auto [i, call] : llvm::enumerate(calls)) {
      if (call.getStream() == plan::Stream::compute)
        continue;
      int64_t until = waiter(call, i);
      for (ValueRange vs : {call.getIns(), call.getOuts()})
        for (Value v : vs)
          touch(v, until);
    }
  }

  /// [first, last] by storage, in the order calls first touch them.
  llvm::MapVector<Operation *, std::pair<int64_t, int64_t>> live;

private:
  SymbolTable &symbols;
  std::vector<plan::CallOp> calls;

  /// Extends `v`'s storage's lifetime to call `at` when it is transient;
  /// with `add`, a transient not touched yet starts one. (An output or an
  /// asynchronous call's operand extends lifetimes calls have started.)
  void touch(Value v, int64_t at, bool add = false) {
    plan::StorageOp s = storageOf(v, symbols);
    if (!s || !s.getTransient() || (!add && !live.count(s)))
      return;
    auto [it, inserted] = live.insert({s, {at, at}});
    it->second.first = std::min(it->second.first, at);
    it->second.second = std::max(it->second.second, at);
  }

  /// The first compute call after `calls[i]` that waits for an event
  /// recorded by it or by a later call on its stream (a stream runs its
  /// calls in order, so that one's end is this one's too), or the number
  /// of calls. A pipeline's send, which nothing awaits, is so free at the
  /// next wait for its comm stream.
  int64_t waiter(plan::CallOp async, size_t i) {
    llvm::SmallDenseSet<int32_t, 8> done;
    for (size_t j = i; j < calls.size(); ++j) {
      plan::CallOp call = calls[j];
      if (call.getStream() == async.getStream()) {
        if (std::optional<ArrayRef<int32_t>> records = call.getRecord())
          done.insert(records->begin(), records->end());
        continue;
      }
      std::optional<ArrayRef<int32_t>> waits = call.getWait();
      if (call.getStream() == plan::Stream::compute && waits &&
          llvm::any_of(*waits, [&](int32_t e) { return done.contains(e); }))
        return j;
    }
    return calls.size();
  }
};

struct LivenessPass : impl::PlanLivenessBase<LivenessPass> {
  void runOnOperation() override {
    ModuleOp module = requirePlanModule(getOperation(), "plan-liveness");
    if (!module)
      return signalPassFailure();
    SymbolTable symbols(module);
    Builder b(module.getContext());
    for (auto func : module.getOps<func::FuncOp>())
      for (auto [op, range] : Lifetimes(func, symbols).live)
        cast<plan::StorageOp>(op).setLiveAttr(
            b.getDenseI64ArrayAttr({range.first, range.second}));
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createPlanLivenessPass() {
  return std::make_unique<LivenessPass>();
}

} // namespace dsc
