//===- StoreGradients.cpp - one micro-step a step stores its gradients ----===//
//
// With gradient accumulation each micro-step adds its gradient into an
// accumulator (`store(add(load @g, %d))`, the ds.grad_accumulation
// contract) and @apply zeroes the accumulators after the update. When a
// step is one micro-step, the sum is always 0 + %d: the add reads and
// writes the whole accumulator for nothing, and the zeroing writes it once
// more. PyTorch's first backward assigns .grad rather than adding to it for
// the same reason. This pass stores %d itself (plan lowering then points
// the gradient's producer at the accumulator, so the product is written
// there directly) and drops @apply's zeroing of those accumulators.
//
// Only the first access of an accumulator in @micro_step is rewritten: a
// tied weight's second gradient still adds to the first, which it now
// reads as just stored. An accumulator whose first access is anything else
// keeps its add and its zeroing.
//
//===----------------------------------------------------------------------===//
#include "dialects/ds/Contracts.h"
#include "passes/Passes.h"
#include "runtime/plan/ProgramNames.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSSTOREGRADIENTS
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// The variable `op` reads or writes, if it is a load or a store.
StringRef variableOf(Operation *op) {
  if (auto load = dyn_cast<LoadOp>(op))
    return load.getName();
  if (auto store = dyn_cast<StoreOp>(op))
    return store.getName();
  return {};
}

/// Whether `v` is a constant whose every element is +0.0 or 0.
bool isZeroSplat(Value v) {
  auto c = v.getDefiningOp<ConstantOp>();
  auto dense = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : nullptr;
  if (!dense || !dense.isSplat())
    return false;
  if (isa<FloatType>(dense.getElementType()))
    return dense.getSplatValue<APFloat>().isPosZero();
  return dense.getSplatValue<APInt>().isZero();
}

struct StoreGradientsPass : ds::impl::DsStoreGradientsBase<StoreGradientsPass> {
  using DsStoreGradientsBase::DsStoreGradientsBase;

  void runOnOperation() override {
    if (accumulationSteps != 1)
      return;
    ModuleOp module = getOperation();
    auto micro =
        module.lookupSymbol<func::FuncOp>(dsc::plan::kMicroStepProgram);
    auto apply = module.lookupSymbol<func::FuncOp>(dsc::plan::kApplyProgram);
    // A micro_step_sync program means several micro-steps a step.
    if (!micro || !apply ||
        module.lookupSymbol<func::FuncOp>(dsc::plan::kMicroStepSyncProgram))
      return;
    llvm::StringSet<> stored = storeFirstGradients(micro);
    dropZeroing(apply, stored);
  }

  /// Rewrites each accumulator's first access, when it is the load of an
  /// accumulation of the contract's form, into a store of the gradient;
  /// returns their names. (Phase `fused` may have folded an accumulation
  /// into a ds.fused_elementwise, a tied weight's two gradients and the
  /// accumulator summed at once: that one keeps its form.)
  llvm::StringSet<> storeFirstGradients(func::FuncOp micro) {
    llvm::StringMap<Operation *> firstAccess;
    SmallVector<StoreOp> marked;
    for (Operation &op : micro.front()) {
      if (StringRef name = variableOf(&op); !name.empty())
        firstAccess.try_emplace(name, &op);
      if (auto store = dyn_cast<StoreOp>(op);
          store && store->hasAttr(kGradAccumulationAttr))
        marked.push_back(store);
    }
    llvm::StringSet<> stored;
    for (StoreOp store : marked) {
      auto add = store.getValue().getDefiningOp<AddOp>();
      auto load = add ? add.getLhs().getDefiningOp<LoadOp>() : LoadOp();
      StringRef name = store.getName();
      if (!load || load.getName() != name || !add->hasOneUse() ||
          !load->hasOneUse() || firstAccess.lookup(name) != load)
        continue;
      store.getValueMutable().assign(add.getRhs());
      // The store no longer has the contract's form.
      store->removeAttr(kGradAccumulationAttr);
      add->erase();
      load->erase();
      stored.insert(name);
    }
    return stored;
  }

  /// Erases @apply's stores of zeros into the accumulators in `stored`.
  void dropZeroing(func::FuncOp apply, const llvm::StringSet<> &stored) {
    SmallVector<StoreOp> zeroing;
    apply.walk([&](StoreOp s) {
      if (stored.contains(s.getName()) && isZeroSplat(s.getValue()))
        zeroing.push_back(s);
    });
    for (StoreOp s : zeroing) {
      Operation *zeros = s.getValue().getDefiningOp();
      s->erase();
      if (zeros->use_empty())
        zeros->erase();
    }
  }
};

} // namespace
