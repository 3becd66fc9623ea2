//===- ZeroPass.cpp - phase `dist`: data parallelism and ZeRO -------------===//
//
// The ds-zero pass: checks its options, records the world size on the
// module and runs the stages (ZeroUtils.h lists their files). With
// gradient accumulation at stages 0-1, @micro_step only accumulates and a
// copy of it, @micro_step_sync, which dsrun runs for a step's last
// micro-batch, reduces the accumulated sums (DeepSpeed's accumulation
// boundary).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/zero/ZeroUtils.h"
#include "runtime/plan/ProgramNames.h"

#include "llvm/ADT/StringSet.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSZERO
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
namespace plan = dsc::plan;

namespace {

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
        dist::kWorldSizeAttr,
        IntegerAttr::get(IntegerType::get(&getContext(), 64), worldSize));
    if (worldSize == 1)
      return;
    auto micro = module.lookupSymbol<func::FuncOp>(plan::kMicroStepProgram);
    if (!micro) {
      module.emitError("ds-zero: no @micro_step; run ds-autodiff first");
      return signalPassFailure();
    }
    if (failed(run(module, micro)))
      return signalPassFailure();
    if (wideCollectives)
      for (auto func : module.getOps<func::FuncOp>())
        widenCollectives(func);
  }

  /// communication_data_type "fp32": each collective on 16-bit data runs
  /// on an fp32 copy, and its wait's result is rounded back, so the
  /// reduction sums in fp32 (DeepSpeed's option for accuracy over bytes).
  static void widenCollectives(func::FuncOp func) {
    SmallVector<Operation *> collectives;
    func.walk([&](Operation *op) {
      if (isa<dist::AllReduceOp, dist::ReduceScatterOp, dist::AllGatherOp>(op))
        collectives.push_back(op);
    });
    for (Operation *op : collectives) {
      auto in = cast<RankedTensorType>(op->getOperand(0).getType());
      Type elt = in.getElementType();
      if (!elt.isF16() && !elt.isBF16())
        continue;
      Type f32 = Float32Type::get(op->getContext());
      OpBuilder b(op);
      op->setOperand(
          0, b.create<CastOp>(op->getLoc(), in.clone(f32), op->getOperand(0)));
      Value result = op->getResult(0);
      auto out = cast<RankedTensorType>(result.getType());
      result.setType(out.clone(f32));
      for (Operation *user : llvm::make_early_inc_range(result.getUsers())) {
        auto wait = dyn_cast<dist::WaitOp>(user);
        if (!wait)
          continue;
        wait.getResult().setType(out.clone(f32));
        OpBuilder a(wait->getBlock(), ++Block::iterator(wait));
        auto back = a.create<CastOp>(wait.getLoc(), out, wait.getResult());
        wait.getResult().replaceAllUsesExcept(back, back);
      }
    }
  }

  LogicalResult run(ModuleOp module, func::FuncOp micro) {
    DsZeroOptions opts;
    opts.worldSize = worldSize;
    opts.stage = stage;
    opts.bucketSize = bucketSize;
    opts.accumulationSteps = accumulationSteps;
    opts.prefetchBucketSize = prefetchBucketSize;
    opts.maxLiveParameters = maxLiveParameters;
    opts.persistenceThreshold = persistenceThreshold;
    if (failed(checkContract(module, micro)))
      return failure();
    if (stage >= 2)
      return zero::shardGradients(module, micro, opts);
    if (accumulationSteps > 1) {
      // Accumulate locally; reduce the sums once, in the micro-step that
      // ends the window.
      func::FuncOp sync = micro.clone();
      sync.setSymName(plan::kMicroStepSyncProgram);
      SymbolTable(module).insert(sync, std::next(micro->getIterator()));
      if (failed(zero::allReduceGradients(sync, opts, /*accumulated=*/true)))
        return failure();
    } else if (failed(zero::allReduceGradients(micro, opts, false))) {
      return failure();
    }
    return stage >= 1 ? zero::shardOptimizer(module, opts) : success();
  }

  /// A store into a gradient accumulator that is not marked would go
  /// unreduced, silently: refuse it by name.
  static LogicalResult checkContract(ModuleOp module, func::FuncOp micro) {
    llvm::StringSet<> grads;
    for (VariableOp var : module.getOps<VariableOp>())
      if (var.getKind() == VariableKind::grad)
        grads.insert(var.getSymName());
    WalkResult r = micro.walk([&](StoreOp store) {
      if (!grads.contains(store.getName()) ||
          store->hasAttr(kGradAccumulationAttr))
        return WalkResult::advance();
      store.emitError("ds-zero: this store into gradient @")
          << store.getName() << " is not marked " << kGradAccumulationAttr
          << ", so no ZeRO stage would reduce it; gradients come from "
             "ds-autodiff";
      return WalkResult::interrupt();
    });
    return failure(r.wasInterrupted());
  }
};

} // namespace
