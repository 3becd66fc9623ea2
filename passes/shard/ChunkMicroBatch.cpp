//===- ChunkMicroBatch.cpp - a micro-batch's chunks, interleaved ---------===//
//
// Under tensor parallelism the forward's all-reduce after a row-parallel
// layer feeds the very next op (the residual add), so nothing runs under
// it. Cut the micro-batch into C chunks of samples and run the chunks'
// forwards op by op in turn, and chunk 0's all-reduce is started before
// chunk 1's GEMM and waited for after it (ds-overlap-collectives places
// both): one chunk's collective runs under another's compute
// (DeepSpeed-Domino's idea, decided here at compile time). Autodiff then
// differentiates the interleaved forward, so the backward interleaves the
// chunks too.
//
// The rewrite is of @forward only, before autodiff. A value computed from
// the token or target arguments is "batched": its dimension 0 runs over
// the micro-batch's samples (checked op by op: ShardRules' split layouts
// along dimension 0, plus lookups, norms and the loss), and each chunk
// holds a contiguous part of it. Every other value (weights, positions)
// is computed once and shared. The loss is the mean of the chunks'
// losses: the micro-batch's mean, as with gradient accumulation over
// chunks (with an ignore_index, the mean of each chunk's mean). A dropout
// in chunk c draws the rows of the micro-batch's mask it holds
// (sample_offset: c times the chunk's rows).
//
//===----------------------------------------------------------------------===//

#include "passes/Functions.h"
#include "passes/Passes.h"
#include "passes/shard/ShardRules.h"

#include "dialects/ds/DsOps.h"
#include "dialects/ds/DsUtils.h"
#include "runtime/plan/ProgramNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <string>

namespace mlir::ds {
#define GEN_PASS_DEF_DSCHUNKMICROBATCH
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
namespace plan = dsc::plan;
using shard::Sharding;

namespace {

struct ChunkMicroBatchPass
    : ds::impl::DsChunkMicroBatchBase<ChunkMicroBatchPass> {
  using Base::Base;

  /// Values whose dimension 0 runs over the samples.
  llvm::DenseSet<Value> batched;
  /// Each chunk's loss: a scalar only the function's return may read.
  llvm::DenseSet<Value> losses;

  void runOnOperation() override {
    if (chunks <= 1)
      return;
    func::FuncOp func = lookupFunction(getOperation(), plan::kForwardFunction);
    if (!func)
      return;
    if (failed(analyze(func)))
      return signalPassFailure();
    // @eval (ds-eval) stays the forward unchunked: it returns the logits
    // (sampling reads them), which the chunks would have to join again.
    ModuleOp module = getOperation();
    std::string_view evalName = plan::kForwardEvalFunction;
    if (!lookupFunction(module, evalName)) {
      func::FuncOp eval = func.clone();
      eval.setSymName(StringRef(evalName.data(), evalName.size()));
      SymbolTable(module).insert(eval, std::next(func->getIterator()));
    }
    rewrite(func);
  }

  InFlightDiagnostic refuse(Operation *op, const Twine &why) {
    return op->emitError("ds-chunk-micro-batch: '")
           << op->getName() << "' cannot run on " << int64_t(chunks)
           << " chunks of the micro-batch: " << why;
  }

  bool divides(Value v) {
    auto t = tensorOf(v);
    return t && t.getRank() >= 1 && t.getDimSize(0) % chunks == 0;
  }

  LogicalResult analyze(func::FuncOp func) {
    batched.clear();
    losses.clear();
    Block &body = func.front();
    for (BlockArgument arg : body.getArguments()) {
      if (!divides(arg))
        return func.emitError("ds-chunk-micro-batch: argument #")
               << arg.getArgNumber() << " of @" << func.getSymName()
               << " has no batch dimension that " << int64_t(chunks)
               << " chunks divide: " << arg.getType();
      batched.insert(arg);
    }
    for (Operation &op : body) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        if (ret.getNumOperands() != 1 || !losses.contains(ret.getOperand(0)))
          return refuse(&op, "it returns something other than the loss");
        continue;
      }
      for (Value v : op.getOperands())
        if (losses.contains(v))
          return refuse(&op, "it reads a chunk's loss (only the return may: "
                             "the chunks' losses are averaged there)");
      if (!isBatchedOp(op))
        continue; // shared: computed once
      if (failed(ruleFor(&op)))
        return failure();
    }
    return success();
  }

  /// Whether `op`, given its batched operands cut along dimension 0 into
  /// the chunks, computes its batched results the same way.
  LogicalResult ruleFor(Operation *op) {
    if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
      if (!batched.contains(ce.getLogits()) ||
          !batched.contains(ce.getTargets()))
        return refuse(op, "its logits and targets are not both the "
                          "micro-batch's");
      losses.insert(ce.getResult());
      return success();
    }
    if (auto e = dyn_cast<EmbeddingOp>(op)) {
      if (batched.contains(e.getTable()) || !batched.contains(e.getIndices()))
        return refuse(op, "its table is the micro-batch's");
      return markResults(op);
    }
    if (isa<LayerNormOp, RmsNormOp, DropoutOp>(op)) {
      for (unsigned i = 1; i < op->getNumOperands(); ++i)
        if (batched.contains(op->getOperand(i)))
          return refuse(op, "its operand " + std::to_string(i) +
                                " is the micro-batch's");
      if (tensorOf(op->getOperand(0)).getRank() < 2)
        return refuse(op, "it normalizes over the batch dimension");
      return markResults(op);
    }
    SmallVector<Sharding> in;
    for (Value v : op->getOperands())
      in.push_back(batched.contains(v) ? Sharding::split(0)
                                       : Sharding::replicated());
    shard::RuleContext ctx;
    ctx.parts = chunks;
    std::string why = "its operands are cut along different dimensions";
    FailureOr<shard::OpLayout> l = shard::layoutOf(op, in, ctx, why);
    if (failed(l))
      return refuse(op, why);
    for (auto [i, want] : llvm::enumerate(l->operands))
      if (want != in[i])
        return refuse(op, "operand " + std::to_string(i) + " is " +
                              in[i].str() + ", and it needs it " + want.str());
    for (auto [r, s] : llvm::zip(op->getResults(), l->results))
      if (s != Sharding::split(0))
        return refuse(op, "its result would be " + s.str() +
                              " rather than cut along the samples");
    return markResults(op);
  }

  LogicalResult markResults(Operation *op) {
    for (Value r : op->getResults()) {
      if (!divides(r))
        return refuse(op, "its result's dimension 0 does not split into " +
                              std::to_string(chunks) + " chunks");
      batched.insert(r);
    }
    return success();
  }

  /// Each batched op cloned once per chunk, the clones side by side where
  /// the op stood; the arguments split into the chunks up front; the
  /// return the mean of the chunks' losses.
  void rewrite(func::FuncOp func) {
    Block &body = func.front();
    SmallVector<Operation *> ops;
    for (Operation &op : body)
      ops.push_back(&op);
    OpBuilder b(func.getContext());
    b.setInsertionPointToStart(&body);
    SmallVector<IRMapping> maps(chunks);
    for (BlockArgument arg : body.getArguments()) {
      SmallVector<int64_t> sizes(chunks, tensorOf(arg).getDimSize(0) / chunks);
      auto split = b.create<SplitOp>(arg.getLoc(), arg, 0, sizes);
      for (int64_t c = 0; c < chunks; ++c)
        maps[c].map(arg, split.getResult(c));
    }
    SmallVector<Operation *> done;
    for (Operation *opPtr : ops) {
      Operation &op = *opPtr;
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        b.setInsertionPoint(ret);
        Value loss = ret.getOperand(0);
        Value sum = maps[0].lookup(loss);
        for (int64_t c = 1; c < chunks; ++c)
          sum = b.create<AddOp>(ret.getLoc(), sum, maps[c].lookup(loss));
        auto type = cast<RankedTensorType>(loss.getType());
        ret.setOperand(0, b.create<MulOp>(ret.getLoc(), sum,
                                          splat(b, ret.getLoc(), type,
                                                1.0 / double(chunks))));
        continue;
      }
      if (!isBatchedOp(op))
        continue;
      b.setInsertionPoint(&op);
      for (int64_t c = 0; c < chunks; ++c) {
        Operation *clone = b.clone(op, maps[c]);
        // A chunk's dropout draws its rows of the micro-batch's mask.
        if (auto d = dyn_cast<DropoutOp>(clone))
          d.setSampleOffset(
              d.getSampleOffset() +
              c * (tensorOf(op.getOperand(0)).getDimSize(0) / chunks));
        for (auto [r, whole] : llvm::zip(clone->getResults(), op.getResults()))
          if (batched.contains(whole))
            r.setType(
                shard::localType(tensorOf(r), Sharding::split(0), chunks));
      }
      done.push_back(&op);
    }
    for (Operation *op : llvm::reverse(done))
      op->erase();
  }

  bool isBatchedOp(Operation &op) {
    return llvm::any_of(op.getOperands(),
                        [&](Value v) { return batched.contains(v); });
  }
};

} // namespace
