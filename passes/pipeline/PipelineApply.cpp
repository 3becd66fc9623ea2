//===- PipelineApply.cpp - each stage's optimizer step --------------------===//
//
// @apply reads every gradient for the global norm, then updates every
// parameter. On a pipeline stage s, @apply_s:
//   1. sums each tied parameter's gradient over the stages that hold it
//      (dist.all_reduce marked dist.pipeline_group), so their copies take
//      the same update;
//   2. computes the norm's sum of squares from the terms it owns (a term
//      held by several stages is owned by the first) and sums the parts
//      over all stages: @apply's chain of adds over terms of different
//      stages becomes one all-reduce of the stage's part, plus the terms
//      every stage computes alike (under tensor parallelism, the all-
//      reduced sum of the cut gradients' terms, itself such a sum);
//   3. runs the rest where its variables are: the updates on the stages
//      holding the parameter, what follows from the norm alone (the
//      clipping factor, the returned norm) on every stage.
//
//===----------------------------------------------------------------------===//

#include "passes/pipeline/Pipeline.h"

#include "dialects/dist/DistOps.h"
#include "dialects/ds/DsOps.h"
#include "dialects/ds/DsUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"

#include <string>

using namespace mlir;
using namespace mlir::ds;
using pipeline::StageSet;

namespace {

/// Computed by every stage from the norm.
constexpr StageSet kEveryStage = StageSet(1) << 63;

struct ApplySplit {
  ApplySplit(func::FuncOp apply, int64_t stages, pipeline::Holders holders)
      : apply(apply), stages(stages), holders(std::move(holders)) {}

  func::FuncOp apply;
  int64_t stages;
  pipeline::Holders holders;
  llvm::DenseMap<Value, StageSet> setOf;
  /// The adds that sum terms of different stages, and the roots of their
  /// trees (read by something else).
  llvm::DenseSet<Operation *> sums, roots;

  StageSet all() const { return (StageSet(1) << stages) - 1; }

  LogicalResult analyze() {
    for (Operation &op : apply.front()) {
      if (isa<func::ReturnOp>(op))
        continue;
      StageSet set = 0;
      if (auto load = dyn_cast<LoadOp>(op)) {
        set = holders.lookup(load.getName());
      } else if (auto store = dyn_cast<StoreOp>(op)) {
        set = holders.lookup(store.getName());
        if (!set) { // optimizer state: where its parameter's update runs
          set = setOf.lookup(store.getValue());
          holders[store.getName()] = set;
        }
      } else if (failed(placeByOperands(op, set))) {
        return failure();
      }
      for (Value r : op.getResults())
        setOf[r] = set;
    }
    for (Operation *sum : sums)
      if (llvm::any_of(sum->getUsers(),
                       [&](Operation *u) { return !sums.contains(u); }))
        roots.insert(sum);
    return success();
  }

  /// An op's stages from its operands'. A scalar add over terms of
  /// different stages, or over such a sum, is a node of the norm's sum.
  LogicalResult placeByOperands(Operation &op, StageSet &set) {
    StageSet staged = 0;
    bool differ = false, global = false, readsSum = false;
    for (Value v : op.getOperands()) {
      StageSet s = setOf.lookup(v);
      if (Operation *def = v.getDefiningOp(); def && sums.contains(def))
        readsSum = true;
      if (s == kEveryStage)
        global = true;
      else if (s && staged && s != staged)
        differ = true;
      else if (s)
        staged = s;
    }
    auto t = op.getNumResults() == 1
                 ? dyn_cast<RankedTensorType>(op.getResult(0).getType())
                 : RankedTensorType();
    if (isa<AddOp>(op) && t && t.getRank() == 0 && (differ || readsSum)) {
      sums.insert(&op);
      set = kEveryStage;
      return success();
    }
    if (differ)
      return op.emitError("ds-pipeline: '")
             << op.getName()
             << "' in @apply reads values of different stages and is no "
                "sum of the gradient norm's terms";
    set = staged ? staged : global ? kEveryStage : 0;
    return success();
  }

  /// The terms under a sum tree, in order.
  void leaves(Operation *sum, SmallVectorImpl<Value> &out) {
    for (Value v : sum->getOperands()) {
      if (Operation *def = v.getDefiningOp(); def && sums.contains(def))
        leaves(def, out);
      else
        out.push_back(v);
    }
  }

  /// `v` in stage s's function: an unstaged value is copied on first use.
  void materialize(OpBuilder &b, Value v, IRMapping &map) {
    if (map.contains(v))
      return;
    Operation *def = v.getDefiningOp();
    if (!def)
      return; // an argument, mapped
    for (Value x : def->getOperands())
      materialize(b, x, map);
    b.clone(*def, map);
  }

  Value sumOver(OpBuilder &b, Location loc, Value x, StageSet group) {
    auto reduce = b.create<dist::AllReduceOp>(loc, x, b.getF64FloatAttr(1.0));
    reduce->setAttr(dist::kPipelineGroupAttr,
                    b.getI64IntegerAttr(int64_t(group)));
    return b.create<dist::WaitOp>(loc, reduce.getResult()).getResult();
  }

  func::FuncOp build(int64_t s, Operation *after) {
    OpBuilder b(after);
    b.setInsertionPointAfter(after);
    auto func = b.create<func::FuncOp>(
        apply.getLoc(), "apply_" + std::to_string(s), apply.getFunctionType());
    if (ArrayAttr attrs = apply.getAllArgAttrs())
      func.setAllArgAttrs(attrs);
    Block &entry = *func.addEntryBlock();
    b.setInsertionPointToStart(&entry);
    IRMapping map;
    for (auto [from, to] :
         llvm::zip(apply.front().getArguments(), entry.getArguments()))
      map.map(from, to);
    const StageSet mine = StageSet(1) << s;
    Location loc = apply.getLoc();
    // 1. Tied gradients summed over their holders.
    for (const auto &h : holders) {
      StringRef name = h.getKey();
      if (!name.ends_with(".grad") || llvm::popcount(h.getValue()) < 2 ||
          !(h.getValue() & mine))
        continue;
      auto var = SymbolTable::lookupNearestSymbolFrom<VariableOp>(
          apply, StringAttr::get(apply.getContext(), name));
      if (!var)
        continue;
      Value g = b.create<LoadOp>(loc, var.getTensorType(), name);
      b.create<StoreOp>(loc, sumOver(b, loc, g, h.getValue()), name);
    }
    for (Operation &op : apply.front()) {
      if (sums.contains(&op) && !roots.contains(&op))
        continue;
      if (roots.contains(&op)) { // 2. the stage's part, summed over all
        SmallVector<Value> terms, global;
        leaves(&op, terms);
        Value part;
        auto add = [&](Value x, Value y) {
          return x ? b.create<AddOp>(loc, x, y).getResult() : y;
        };
        for (Value t : terms) {
          StageSet set = setOf.lookup(t);
          if (set == kEveryStage)
            global.push_back(t);
          if (set == kEveryStage || llvm::countr_zero(set ? set : 1) != s)
            continue;
          materialize(b, t, map);
          part = add(part, map.lookup(t));
        }
        if (!part)
          part = splat(b, loc,
                       cast<RankedTensorType>(op.getResult(0).getType()), 0.0);
        // A term every stage holds alike (tensor parallelism's all-reduced
        // sum of its cut gradients' parts) joins the sum once, after it.
        Value total = sumOver(b, loc, part, all());
        for (Value t : global) {
          materialize(b, t, map);
          total = add(total, map.lookup(t));
        }
        map.map(op.getResult(0), total);
        continue;
      }
      StageSet set = isa<func::ReturnOp>(op) ? kEveryStage
                     : op.getNumResults()    ? setOf.lookup(op.getResult(0))
                     : isa<StoreOp>(op)
                         ? holders.lookup(cast<StoreOp>(op).getName())
                         : 0;
      if (set != kEveryStage && !(set & mine))
        continue; // unstaged (copied where read), or another stage's
      for (Value v : op.getOperands())
        materialize(b, v, map);
      b.clone(op, map);
    }
    return func;
  }
};

} // namespace

LogicalResult pipeline::splitApply(func::FuncOp apply, int64_t stages,
                                   Holders holders) {
  ApplySplit split(apply, stages, std::move(holders));
  if (failed(split.analyze()))
    return failure();
  Operation *after = apply;
  for (int64_t s = 0; s < stages; ++s)
    after = split.build(s, after);
  apply.erase();
  return success();
}
