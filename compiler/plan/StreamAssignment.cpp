//===- StreamAssignment.cpp - plan-assign-streams -------------------------===//
//
// Lowering marks what runs beside the compute stream with a token: the
// collectives and the copies between memory spaces. Each gets its stream
// here: collectives the comm stream, copies to the host d2h, copies to the
// device h2d. Everything else stays on the compute stream, in order.
//
//===----------------------------------------------------------------------===//
#include "compiler/plan/PlanIR.h"
#include "compiler/plan/PlanPasses.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace dsc {

#define GEN_PASS_DEF_PLANASSIGNSTREAMS
#include "compiler/plan/PlanPasses.h.inc"

using namespace mlir;

namespace {

/// The memory space of the storage `buffer` views.
plan::Space spaceOf(Value buffer, SymbolTable &symbols) {
  plan::StorageOp storage = storageOf(buffer, symbols);
  return storage ? storage.getSpace() : plan::Space::device;
}

struct AssignStreamsPass : impl::PlanAssignStreamsBase<AssignStreamsPass> {
  void runOnOperation() override {
    ModuleOp module = requirePlanModule(getOperation(), "plan-assign-streams");
    if (!module)
      return signalPassFailure();
    SymbolTable symbols(module);
    MLIRContext *ctx = module.getContext();
    WalkResult walk = module.walk([&](plan::CallOp call) {
      if (!call.getToken())
        return WalkResult::advance();
      plan::Stream stream;
      if (call.getKernel().starts_with("comm."))
        stream = plan::Stream::comm;
      else if (call.getKernel() == "ds.copy" && call.getOuts().size() == 1)
        stream = spaceOf(call.getOuts()[0], symbols) == plan::Space::host
                     ? plan::Stream::d2h
                     : plan::Stream::h2d;
      else
        return call.emitError("plan-assign-streams: no stream runs '")
                   << call.getKernel() << "' beside the compute stream",
               WalkResult::interrupt();
      call.setStreamAttr(plan::StreamAttr::get(ctx, stream));
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace

std::unique_ptr<mlir::Pass> createPlanAssignStreamsPass() {
  return std::make_unique<AssignStreamsPass>();
}

} // namespace dsc
