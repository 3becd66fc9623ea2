//===- PipelineCut.cpp - the forward cut into pipeline stages -------------===//
//
// Pipeline parallelism's first step (docs/pipeline.md), before autodiff:
// every op of @forward (and @forward_eval) is given the stage that runs it
// (dist.stage), and every value one stage makes and a later stage reads
// goes through a dist.transfer. Autodiff then gives each transfer its
// gradient, the transfer of the cotangent back, so the backward's
// crossings need no rule of their own; a later phase splits the stages
// into their programs.
//
// The stages are contiguous runs of the model's transformer blocks, found
// by the parameters the forward reads (BlockNames.h): an op belongs to the
// latest block whose parameters it reads or whose values it takes, so the
// ops before the first block (the embeddings) run on stage 0 and those
// after the last (the final norm, the head, the loss) on the last stage,
// wherever the function's loads stand.
// `partition` chooses the runs (PipelinePartition.h): equal numbers of
// blocks, equal parameters, or equal predicted time, from each block's
// ops as this pass walks them. Values every stage can have without
// a transfer are not staged: the function's arguments (the runtime feeds
// the tokens to the first stage and the targets to the last), parameters'
// loads (a parameter read on two stages, as GPT-2's tied embedding, is
// held by both), and what is computed from constants alone.
//
//===----------------------------------------------------------------------===//

#include "passes/BlockNames.h"
#include "passes/Functions.h"
#include "passes/Passes.h"
#include "passes/pipeline/PipelinePartition.h"

#include "dialects/dist/DistOps.h"
#include "dialects/ds/DsOps.h"
#include "runtime/plan/ProgramNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <set>
#include <string>

namespace mlir::ds {
#define GEN_PASS_DEF_DSPIPELINECUT
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
namespace plan = dsc::plan;

namespace {

struct PipelineCutPass : ds::impl::DsPipelineCutBase<PipelineCutPass> {
  using Base::Base;

  void runOnOperation() override {
    if (stages <= 1)
      return;
    ModuleOp module = getOperation();
    if (partition != "uniform" && partition != "parameters" &&
        partition != "balanced") {
      module.emitError("ds-pipeline-cut: partition '")
          << partition << "': expected uniform, parameters or balanced";
      return signalPassFailure();
    }
    eraseSamplingFunctions(module);
    for (func::FuncOp func : forwardFunctions(module))
      if (failed(cut(func)))
        return signalPassFailure();
    OpBuilder b(module.getContext());
    module->setAttr(dist::kPipelineStagesAttr, b.getI64IntegerAttr(stages));
  }

  /// Ops every stage may compute for itself: loads, and ops whose
  /// operands are all such (or none), but for a parameter's value itself
  /// (a load feeds ops that are staged).
  static bool isShared(Operation *op, const llvm::DenseSet<Value> &unstaged) {
    if (isa<LoadOp>(op))
      return true;
    return llvm::all_of(op->getOperands(),
                        [&](Value v) { return unstaged.contains(v); });
  }

  static int64_t bytesOf(Type t) {
    auto type = dyn_cast<RankedTensorType>(t);
    if (!type || !type.hasStaticShape())
      return 0;
    return (type.getElementTypeBitWidth() + 7) / 8 * type.getNumElements();
  }

  /// Where each op of the forward belongs: the values every stage has
  /// (isShared), and for every other op its piece (PipelinePartition.h):
  /// 0 before the blocks, 1 + b in block b. An op is in the latest block
  /// whose parameters it reads or whose values it takes, so the final
  /// norm, the head and the loss fall in the last block's piece (they read
  /// its output) and the embeddings in piece 0; where the loads stand in
  /// the function does not matter (the PyTorch frontend puts them all
  /// first, the C++ builders next to their readers).
  struct Placement {
    llvm::DenseSet<Value> unstaged;
    llvm::DenseMap<Operation *, int64_t> piece;
  };

  static Placement place(Block &body,
                         const llvm::StringMap<int64_t> &blockIndex,
                         StringRef prefix) {
    Placement p;
    p.unstaged.insert(body.args_begin(), body.args_end());
    for (Operation &op : body) {
      // A load is every stage's, but not the ops that read it.
      if (isa<func::ReturnOp, LoadOp>(op))
        continue;
      if (isShared(&op, p.unstaged)) {
        p.unstaged.insert(op.result_begin(), op.result_end());
        continue;
      }
      int64_t piece = 0;
      for (Value v : op.getOperands()) {
        if (auto load = v.getDefiningOp<LoadOp>()) {
          auto block = blockOf(load.getName());
          if (block && block->first == prefix)
            piece = std::max(
                piece, 1 + blockIndex.lookup(block->first +
                                             std::to_string(block->second)));
        } else if (Operation *def = v.getDefiningOp()) {
          piece = std::max(piece, p.piece.lookup(def));
        }
      }
      p.piece[&op] = piece;
    }
    return p;
  }

  /// The pieces' parameters, activations and predicted time.
  SmallVector<pipeline::PartitionUnit>
  unitsOf(Block &body, const Placement &placement, int64_t blocks) const {
    SmallVector<pipeline::PartitionUnit> units(size_t(blocks + 2));
    llvm::DenseSet<std::pair<Operation *, int64_t>> counted;
    for (Operation &op : body) {
      auto it = placement.piece.find(&op);
      if (it == placement.piece.end())
        continue;
      const int64_t unit = it->second;
      pipeline::PartitionUnit &u = units[size_t(unit)];
      int64_t bytes = 0;
      for (Value v : op.getOperands()) {
        bytes += bytesOf(v.getType());
        // A parameter counts once on each piece that reads it.
        if (auto load = v.getDefiningOp<LoadOp>();
            load && counted.insert({load, unit}).second)
          u.params += cast<RankedTensorType>(v.getType()).getNumElements();
      }
      for (Value r : op.getResults()) {
        bytes += bytesOf(r.getType());
        u.activations += bytesOf(r.getType());
      }
      const double flops = isa<KernelOpInterface>(op)
                               ? cast<KernelOpInterface>(op).getFlops()
                               : 0.0;
      u.time += std::max(flops, double(bytes) * flopsPerByte);
    }
    return units;
  }

  LogicalResult cut(func::FuncOp func) {
    Block &body = func.front();
    // The blocks under the first prefix read, by their numbers.
    std::string prefix;
    std::set<int64_t> numbers;
    for (auto load : body.getOps<LoadOp>())
      if (auto block = blockOf(load.getName())) {
        if (prefix.empty())
          prefix = block->first;
        if (block->first == prefix)
          numbers.insert(block->second);
      }
    llvm::StringMap<int64_t> blockIndex;
    for (int64_t n : numbers)
      blockIndex[prefix + std::to_string(n)] = int64_t(blockIndex.size());
    const int64_t blocks = int64_t(blockIndex.size());
    if (blocks == 0)
      return func.emitError("ds-pipeline-cut: @")
             << func.getSymName()
             << " has no transformer blocks to cut into stages (parameters "
                "named PREFIX.N.*, as transformer.h.0.attn.c_attn.weight)";
    if (blocks < stages)
      return func.emitError("ds-pipeline-cut: ")
             << blocks << " transformer blocks do not fill " << int64_t(stages)
             << " pipeline stages";

    const Placement placement = place(body, blockIndex, prefix);
    std::string error;
    const SmallVector<int64_t> stageOfBlock = pipeline::partitionBlocks(
        unitsOf(body, placement, blocks), stages, partition,
        {microBatches, schedule == "gpipe", uint64_t(stageMemory)}, error);
    if (stageOfBlock.empty())
      return func.emitError("ds-pipeline-cut: ") << error;

    llvm::DenseMap<Value, int64_t> stageOf;
    OpBuilder b(func.getContext());
    llvm::DenseMap<std::pair<Value, int64_t>, Value> transferred;
    for (Operation &op : llvm::make_early_inc_range(body)) {
      auto piece = placement.piece.find(&op);
      if (piece == placement.piece.end())
        continue; // shared, or the return
      const int64_t current =
          piece->second == 0 ? 0 : stageOfBlock[size_t(piece->second - 1)];
      op.setAttr(dist::kStageAttr, b.getI64IntegerAttr(current));
      for (OpOperand &use : op.getOpOperands()) {
        auto it = stageOf.find(use.get());
        if (it == stageOf.end() || it->second == current)
          continue;
        if (it->second > current)
          return op.emitError("ds-pipeline-cut: '")
                 << op.getName() << "' on stage " << current
                 << " reads a value of stage " << it->second
                 << " (a later stage): the forward is not a sequence of "
                    "blocks";
        Value &t = transferred[{use.get(), current}];
        if (!t) {
          b.setInsertionPoint(&op);
          t = b.create<dist::TransferOp>(op.getLoc(), use.get(),
                                         b.getI64IntegerAttr(it->second),
                                         b.getI64IntegerAttr(current))
                  .getResult();
          stageOf[t] = current;
        }
        use.set(t);
      }
      for (Value r : op.getResults())
        stageOf[r] = current;
    }
    return success();
  }
};

} // namespace
