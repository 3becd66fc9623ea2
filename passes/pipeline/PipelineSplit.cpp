//===- PipelineSplit.cpp - each pipeline stage as a module of its own -----===//
//
// After ds-pipeline the outer module holds every stage's functions side by
// side (@pipeline_step_s, @apply_s, @eval_s). Each stage becomes a nested
// module @stage_s shaped like any training module: its functions under the
// names every later phase and the plan know (@micro_step, @apply, @eval),
// the variables they touch, and the outer module's attributes, so ZeRO,
// precision, remat, fusion and plan lowering run on it unchanged and the
// plan of stage s is an ordinary plan (marked with its stage).
//
//===----------------------------------------------------------------------===//

#include "passes/Functions.h"
#include "passes/Passes.h"

#include "dialects/dist/DistOps.h"
#include "dialects/ds/DsOps.h"
#include "runtime/plan/ProgramNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringSet.h"

#include <string>

namespace mlir::ds {
#define GEN_PASS_DEF_DSPIPELINESPLIT
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
namespace plan = dsc::plan;

namespace {

struct PipelineSplitPass : ds::impl::DsPipelineSplitBase<PipelineSplitPass> {
  void runOnOperation() override {
    ModuleOp outer = getOperation();
    auto stagesAttr =
        outer->getAttrOfType<IntegerAttr>(dist::kPipelineStagesAttr);
    if (!stagesAttr || stagesAttr.getInt() < 2)
      return; // no pipeline
    const int64_t stages = stagesAttr.getInt();
    for (int64_t s = 0; s < stages; ++s)
      if (failed(split(outer, s, stages)))
        return signalPassFailure();
  }

  LogicalResult split(ModuleOp outer, int64_t s, int64_t stages) {
    const std::string n = std::to_string(s);
    func::FuncOp step = lookupFunction(outer, "pipeline_step_" + n);
    if (!step)
      return outer.emitError("ds-pipeline-split: no @pipeline_step_")
             << s << " (run ds-pipeline first)";
    OpBuilder b(outer.getContext());
    b.setInsertionPointToEnd(outer.getBody());
    auto stage = b.create<ModuleOp>(outer.getLoc(), "stage_" + n);
    for (NamedAttribute a : outer->getAttrs())
      if (a.getName() != SymbolTable::getSymbolAttrName())
        stage->setAttr(a.getName(), a.getValue());
    stage->setAttr(dist::kStageAttr, b.getI64IntegerAttr(s));
    // The functions, under the names of an unpipelined module.
    llvm::StringSet<> used;
    std::pair<std::string, StringRef> moves[] = {
        {"pipeline_step_" + n, plan::kMicroStepProgram},
        {"apply_" + n, plan::kApplyProgram},
        {"eval_" + n, plan::kEvalProgram}};
    SmallVector<func::FuncOp> funcs;
    for (auto &[from, to] : moves)
      if (func::FuncOp f = lookupFunction(outer, from)) {
        f.walk([&](LoadOp op) { used.insert(op.getName()); });
        f.walk([&](StoreOp op) { used.insert(op.getName()); });
        f->moveBefore(stage.getBody(), stage.getBody()->end());
        f.setSymName(to);
      }
    // The variables they touch, and the parameters those are `of`, in the
    // outer module's order (a plan's variables keep one rank's order).
    for (auto var : outer.getOps<VariableOp>())
      if (used.contains(var.getSymName()))
        if (auto of = var.getOfAttr())
          used.insert(of.getValue());
    b.setInsertionPointToStart(stage.getBody());
    for (auto var : outer.getOps<VariableOp>())
      if (used.contains(var.getSymName()))
        b.clone(*var);
    return success();
  }
};

} // namespace
