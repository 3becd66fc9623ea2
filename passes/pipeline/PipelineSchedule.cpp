//===- PipelineSchedule.cpp - each stage's step, in schedule order --------===//
//
// Phase `pipeline` (docs/pipeline.md), after autodiff: @micro_step holds
// one micro-batch's forward and backward for every stage, the forward's
// ops marked with their stage (ds-pipeline-cut) and dist.transfer where a
// value crosses. For each stage s this writes @pipeline_step_s: the step's
// `micro-batches` micro-batches through the stage, unrolled in the order
// the schedule gives (GPipe: every forward, then every backward; 1F1B:
// P - s - 1 forwards to fill the pipeline, then one forward and one
// backward in turn, then the rest of the backwards). Micro-batch m reads
// its rows of the step's tokens and targets; each transfer becomes a
// dist.send on the stage that makes the value and a dist.recv on the one
// that reads it, numbered by the transfer and the micro-batch.
//
// An op's stage: the forward's as marked; any other op (the backward, the
// gradients' accumulation) runs where its operands are. Ops with no staged
// operand (loads, constants, the gradient's seed, reshapes of the
// arguments) are copied into each stage that reads them, once per
// micro-batch when they read the arguments. The backward's seed is
// autodiff's 1 / accumulation steps, so the stage accumulates the step's
// gradients as gradient accumulation does, in micro-batch order.
//
//===----------------------------------------------------------------------===//

#include "passes/Functions.h"
#include "passes/Passes.h"
#include "passes/pipeline/Pipeline.h"

#include "dialects/dist/DistOps.h"
#include "dialects/ds/Contracts.h"
#include "dialects/ds/DsOps.h"
#include "dialects/ds/DsUtils.h"
#include "runtime/plan/ProgramNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringSet.h"

#include <string>

namespace mlir::ds {
#define GEN_PASS_DEF_DSPIPELINE
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
namespace plan = dsc::plan;

namespace {

/// A micro-batch's forward, its backward, and under ZB-H1 the backward's
/// weight-gradient half (Weight), split from the half the previous stage
/// waits for (Backward: the gradient of the stage's input).
enum class Part { Forward, Backward, Weight };

/// One action of a stage's schedule: a micro-batch's forward or backward
/// of one of the stage's model chunks (its virtual stage; 0 but for the
/// interleaved schedule).
struct Action {
  Part part;
  int64_t microBatch;
  int64_t chunk = 0;
};

struct PipelinePass : ds::impl::DsPipelineBase<PipelinePass> {
  using Base::Base;

  /// Where each staged op runs: a set of stages (a bit each) and its
  /// part. An op runs on several stages below a tied parameter's gradient
  /// sum (GPT-2's embedding, read on the first stage and by the head on
  /// the last): autodiff adds the two stages' contributions, and each stage
  /// accumulates its own into its copy instead (`tiedSums`: the add, on
  /// each stage, is the operand that stage made).
  struct Placement {
    uint64_t stages = 0;
    Part part = Part::Backward;
  };
  llvm::DenseMap<Operation *, Placement> placed;
  llvm::DenseSet<Operation *> tiedSums;
  SmallVector<dist::TransferOp> transfers;
  /// Each transfer's number (its index in `transfers`): the messages' id.
  llvm::DenseMap<Operation *, int64_t> transferId;
  llvm::DenseMap<Value, uint64_t> stagesOfValue;
  /// The model chunk (ds-pipeline-cut's stage: chunk c runs on stage
  /// c % stages) of each staged value but a tied gradient sum's.
  llvm::DenseMap<Value, int64_t> chunkOfValue;
  /// Variables @micro_step stores (the gradient accumulators): a load of
  /// one is read again by each micro-batch, after the previous one's store.
  llvm::StringSet<> stored;

  void runOnOperation() override {
    if (stages <= 1)
      return;
    if (failed(checkOptions()))
      return signalPassFailure();
    func::FuncOp micro =
        lookupFunction(getOperation(), plan::kMicroStepProgram);
    if (!micro) {
      getOperation().emitError("ds-pipeline: no @micro_step");
      return signalPassFailure();
    }
    if (failed(place(micro)))
      return signalPassFailure();
    if (schedule == "zbh1")
      splitWeightGradients();
    Operation *after = micro;
    pipeline::Holders holders;
    for (int64_t s = 0; s < stages; ++s) {
      FailureOr<func::FuncOp> stage =
          buildStage(micro, s, after, "pipeline_step_" + std::to_string(s),
                     microBatches, actions(s), /*eval=*/false);
      if (failed(stage))
        return signalPassFailure();
      stage->walk([&](Operation *op) {
        if (auto load = dyn_cast<LoadOp>(op))
          holders[load.getName()] |= pipeline::StageSet(1) << s;
        if (auto store = dyn_cast<StoreOp>(op))
          holders[store.getName()] |= pipeline::StageSet(1) << s;
      });
      after = *stage;
    }
    micro.erase();
    if (func::FuncOp apply =
            lookupFunction(getOperation(), plan::kApplyProgram))
      if (failed(pipeline::splitApply(apply, stages, std::move(holders))))
        return signalPassFailure();
    // @eval: a forward-only pipeline of one micro-batch.
    if (func::FuncOp eval =
            lookupFunction(getOperation(), plan::kEvalProgram)) {
      if (failed(place(eval)))
        return signalPassFailure();
      after = eval;
      for (int64_t s = 0; s < stages; ++s) {
        SmallVector<Action> forward;
        for (int64_t v = 0; v < virtualStages; ++v)
          forward.push_back({Part::Forward, 0, v});
        FailureOr<func::FuncOp> stage =
            buildStage(eval, s, after, "eval_" + std::to_string(s), 1, forward,
                       /*eval=*/true);
        if (failed(stage))
          return signalPassFailure();
        after = *stage;
      }
      eval.erase();
    }
    // From here on a stage is a rank's: its chunks are one program.
    auto i64 = IntegerType::get(&getContext(), 64);
    getOperation()->setAttr(dist::kPipelineStagesAttr,
                            IntegerAttr::get(i64, stages));
    if (virtualStages > 1)
      getOperation()->setAttr(dist::kVirtualStagesAttr,
                              IntegerAttr::get(i64, virtualStages));
  }

  LogicalResult checkOptions() {
    ModuleOp module = getOperation();
    const bool interleaved = schedule == "interleaved";
    if (schedule != "gpipe" && schedule != "1f1b" && schedule != "zbh1" &&
        !interleaved)
      return module.emitError("ds-pipeline: unknown schedule '")
             << schedule << "' (gpipe, 1f1b, interleaved or zbh1)";
    if (interleaved != (virtualStages > 1))
      return module.emitError("ds-pipeline: virtual-stages ")
             << int64_t(virtualStages) << " with schedule " << schedule
             << ": the interleaved schedule runs 2 or more chunks a stage, "
                "the others one";
    if (interleaved && microBatches % stages != 0)
      return module.emitError("ds-pipeline: the interleaved schedule runs "
                              "micro-batches in groups of the stages: ")
             << int64_t(microBatches) << " micro-batches are not a multiple "
             << "of " << int64_t(stages);
    auto cut = module->getAttrOfType<IntegerAttr>(dist::kPipelineStagesAttr);
    if (cut && cut.getInt() != stages * virtualStages)
      return module.emitError("ds-pipeline: the forward was cut into ")
             << cut.getInt() << " stages, not stages x virtual-stages = "
             << stages * virtualStages;
    return success();
  }

  /// The stages (and part) of every op that has them.
  LogicalResult place(func::FuncOp micro) {
    placed.clear();
    tiedSums.clear();
    transfers.clear();
    transferId.clear();
    stagesOfValue.clear();
    chunkOfValue.clear();
    stored.clear();
    micro.walk([&](StoreOp st) { stored.insert(st.getName()); });
    for (Operation &op : micro.front()) {
      if (isa<func::ReturnOp>(op))
        continue;
      if (auto t = dyn_cast<dist::TransferOp>(op)) {
        transferId[t] = int64_t(transfers.size());
        transfers.push_back(t);
        stagesOfValue[t.getResult()] = uint64_t(1) << t.getTo() % stages;
        chunkOfValue[t.getResult()] = t.getTo();
        continue;
      }
      Placement p;
      int64_t chunk = -1;
      if (auto mark = op.getAttrOfType<IntegerAttr>(dist::kStageAttr)) {
        chunk = mark.getInt();
        if (chunk < 0 || chunk >= stages * virtualStages)
          return op.emitError("ds-pipeline: stage ")
                 << chunk << " of " << stages * virtualStages;
        // ds-remat's clones of forward ops run in the backward.
        p = {uint64_t(1) << chunk % stages,
             isRecompute(&op) ? Part::Backward : Part::Forward};
      } else if (failed(placeByOperands(op, p))) {
        return failure();
      } else if (!tiedSums.contains(&op)) {
        for (Value v : op.getOperands())
          if (auto it = chunkOfValue.find(v); it != chunkOfValue.end())
            chunk = std::max(chunk, it->second);
      }
      if (!p.stages)
        continue; // unstaged: copied where it is read
      placed[&op] = p;
      for (Value r : op.getResults()) {
        stagesOfValue[r] = p.stages;
        if (chunk >= 0)
          chunkOfValue[r] = chunk;
      }
    }
    return success();
  }

  /// ZB-H1: the backward ops that compute the gradients a stage sends back
  /// (and what they read) stay the Backward; the others, the weight
  /// gradients and their accumulation, become the Weight, which the
  /// schedule may run later: nothing another stage waits for comes of it.
  void splitWeightGradients() {
    llvm::DenseSet<Operation *> inputGradient;
    SmallVector<Operation *> work;
    for (dist::TransferOp t : transfers)
      if (t.getFrom() > t.getTo())
        if (Operation *def = t.getX().getDefiningOp())
          work.push_back(def);
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      auto it = placed.find(op);
      if (it == placed.end() || it->second.part != Part::Backward ||
          !inputGradient.insert(op).second)
        continue;
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp())
          work.push_back(def);
    }
    for (auto &[op, p] : placed)
      if (p.part == Part::Backward && !inputGradient.contains(op))
        p.part = Part::Weight;
  }

  /// The chunk whose action on stage s computes `v` there: a tied
  /// gradient sum stands for the contribution stage s made.
  int64_t chunkOn(Value v, int64_t s) const {
    Operation *def = v.getDefiningOp();
    if (def && tiedSums.contains(def)) {
      for (Value x : def->getOperands())
        if (stagesOfValue.lookup(x) >> s & 1)
          return chunkOn(x, s);
      return -1;
    }
    auto it = chunkOfValue.find(v);
    if (it != chunkOfValue.end())
      return it->second;
    // An op that reads a tied sum only (its accumulation): the sum's.
    int64_t chunk = -1;
    if (def && placed.count(def))
      for (Value x : def->getOperands())
        if (stagesOfValue.lookup(x) >> s & 1)
          chunk = std::max(chunk, chunkOn(x, s));
    return chunk;
  }

  /// An op of the backward runs where its operands are; a sum of
  /// operands from different stages is a tied parameter's gradient.
  LogicalResult placeByOperands(Operation &op, Placement &p) {
    SmallVector<uint64_t> sets;
    for (Value v : op.getOperands())
      if (uint64_t set = stagesOfValue.lookup(v))
        sets.push_back(set);
    if (sets.empty())
      return success();
    p.stages = sets.front();
    if (llvm::all_equal(sets))
      return success();
    uint64_t seen = 0;
    for (uint64_t set : sets) {
      if ((seen & set) || !isa<AddOp>(op))
        return op.emitError("ds-pipeline: '")
               << op.getName()
               << "' reads values of different stages and is no tied "
                  "parameter's gradient sum";
      seen |= set;
    }
    p.stages = seen;
    tiedSums.insert(&op);
    return success();
  }

  /// The order of stage s's actions.
  SmallVector<Action> actions(int64_t s) const {
    if (schedule == "interleaved")
      return interleavedActions(s);
    if (schedule == "zbh1")
      return zeroBubbleActions(s);
    const int64_t m = microBatches;
    SmallVector<Action> out;
    int64_t warmup = schedule == "gpipe" ? m : std::min(stages - s - 1, m);
    for (int64_t i = 0; i < warmup; ++i)
      out.push_back({Part::Forward, i});
    for (int64_t i = 0; warmup + i < m; ++i) {
      out.push_back({Part::Forward, warmup + i});
      out.push_back({Part::Backward, i});
    }
    for (int64_t i = std::max<int64_t>(m - warmup, 0); i < m; ++i)
      out.push_back({Part::Backward, i});
    return out;
  }

  /// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism"): 1F1B's order
  /// of forwards and backwards, each backward followed by a weight half,
  /// but for the first s backwards of stage s, whose weight halves wait to
  /// the end, where they fill the time 1F1B's stage s spends waiting for
  /// the last gradients. Stage 0 runs each backward whole. The forwards and
  /// backwards keep 1F1B's order, so its messages match as 1F1B's do.
  SmallVector<Action> zeroBubbleActions(int64_t s) const {
    const int64_t m = microBatches;
    int64_t f = 0, b = 0, w = 0;
    SmallVector<Action> out;
    auto forward = [&] { out.push_back({Part::Forward, f++}); };
    auto backward = [&] { out.push_back({Part::Backward, b++}); };
    auto weight = [&] { out.push_back({Part::Weight, w++}); };
    for (int64_t i = 0; i < stages - s - 1 && f < m; ++i)
      forward();
    for (int64_t i = 0; i < s && f < m; ++i) {
      forward();
      backward(); // its weight half deferred
    }
    while (f < m) {
      forward();
      backward();
      weight();
    }
    while (b < m) {
      backward();
      weight();
    }
    while (w < m)
      weight();
    return out;
  }

  /// Megatron's interleaved 1F1B: the stage's forwards go through its
  /// chunks in groups of `stages` micro-batches (chunk 0 for micro-batches
  /// 0..P-1, chunk 1 for the same, ..., then the next group), its
  /// backwards likewise from the last chunk; (P - s - 1) x 2 + (V - 1) x P
  /// forwards warm the pipeline up, then one forward and one backward in
  /// turn, then the remaining backwards. With M = P every forward comes
  /// first.
  SmallVector<Action> interleavedActions(int64_t s) const {
    const int64_t p = stages, v = virtualStages, m = microBatches;
    const int64_t total = m * v;
    auto nth = [&](int64_t k, Part part) {
      const int64_t inGroup = k % (p * v);
      int64_t chunk = inGroup / p;
      if (part == Part::Backward)
        chunk = v - 1 - chunk;
      return Action{part, k / (p * v) * p + k % p, chunk};
    };
    const int64_t warmup =
        m == p ? total : std::min(total, (p - s - 1) * 2 + (v - 1) * p);
    SmallVector<Action> out;
    for (int64_t k = 0; k < warmup; ++k)
      out.push_back(nth(k, Part::Forward));
    for (int64_t k = 0; warmup + k < total; ++k) {
      out.push_back(nth(warmup + k, Part::Forward));
      out.push_back(nth(k, Part::Backward));
    }
    for (int64_t k = std::max<int64_t>(total - warmup, 0); k < total; ++k)
      out.push_back(nth(k, Part::Backward));
    return out;
  }

  /// Builds `name` for stage s after `after` from `src` (@micro_step, or
  /// @eval with one forward): its arguments `m` micro-batches of rows, its
  /// body the actions in order. A step returns the mean of the micro-
  /// batches' losses on the last stage; eval returns what @eval does
  /// there. Other stages return a zero loss.
  FailureOr<func::FuncOp> buildStage(func::FuncOp src, int64_t s,
                                     Operation *after, StringRef name,
                                     int64_t m, ArrayRef<Action> actions,
                                     bool eval) {
    Block &body = src.front();
    SmallVector<Type> argTypes;
    for (BlockArgument arg : body.getArguments()) {
      auto t = tensorOf(arg);
      if (!t || t.getRank() < 1) {
        src.emitError("ds-pipeline: argument #")
            << arg.getArgNumber() << " has no batch dimension";
        return failure();
      }
      SmallVector<int64_t> shape(t.getShape());
      shape[0] *= m;
      argTypes.push_back(t.clone(shape));
    }
    OpBuilder b(src);
    b.setInsertionPointAfter(after);
    const bool last = s == stages - 1;
    auto lossType = RankedTensorType::get({}, b.getF32Type());
    SmallVector<Type> results{lossType};
    if (last && eval)
      results.assign(body.getTerminator()->getOperandTypes().begin(),
                     body.getTerminator()->getOperandTypes().end());
    auto func = b.create<func::FuncOp>(src.getLoc(), name,
                                       b.getFunctionType(argTypes, results));
    Block *entry = func.addEntryBlock();
    b.setInsertionPointToStart(entry);
    SmallVector<IRMapping> maps(m);
    for (auto [arg, whole] :
         llvm::zip(body.getArguments(), entry->getArguments())) {
      if (m == 1) {
        maps[0].map(arg, whole);
        continue;
      }
      SmallVector<int64_t> sizes(m, tensorOf(arg).getDimSize(0));
      auto split = b.create<SplitOp>(arg.getLoc(), whole, 0, sizes);
      for (int64_t i = 0; i < m; ++i)
        maps[i].map(arg, split.getResult(i));
    }
    IRMapping shared; // unstaged values that read no argument
    for (const Action &a : actions) {
      Operation *before = entry->empty() ? nullptr : &entry->back();
      emitAction(b, body, s, a, maps[a.microBatch], shared);
      // Every op the action emitted carries its place in the schedule
      // (dsrun --trace draws the timeline from it).
      const char part = a.part == Part::Forward    ? 'F'
                        : a.part == Part::Backward ? 'B'
                                                   : 'W';
      Operation *first = before           ? before->getNextNode()
                         : entry->empty() ? nullptr
                                          : &entry->front();
      for (Operation *op = first; op; op = op->getNextNode())
        op->setLoc(dist::withScheduleTag(op->getLoc(), {a.microBatch, part}));
    }
    SmallVector<Value> returned;
    Location loc = src.getLoc();
    if (last) {
      Operation *ret = body.getTerminator();
      for (Value v : ret->getOperands())
        for (int64_t i = 0; i < m; ++i)
          materialize(b, v, maps[i], shared);
      if (eval) {
        for (Value v : ret->getOperands())
          returned.push_back(maps[0].lookup(v));
      } else {
        // The mean of the micro-batches' losses, with no constant in it:
        // phase precision keeps it fp32, as a step's loss is.
        SmallVector<Value> losses;
        auto one = RankedTensorType::get({1}, b.getF32Type());
        for (int64_t i = 0; i < m; ++i)
          losses.push_back(b.create<ReshapeOp>(
              loc, one, maps[i].lookup(ret->getOperand(0))));
        Value all = m == 1 ? losses.front()
                           : b.create<ConcatOp>(loc, losses, 0).getResult();
        returned.push_back(
            b.create<ReduceMeanOp>(loc, all, ArrayRef<int64_t>{0}));
      }
    } else {
      returned.push_back(splat(b, loc, lossType, 0.0));
    }
    b.create<func::ReturnOp>(loc, returned);
    return func;
  }

  /// One micro-batch's forward or backward of one chunk on stage s.
  void emitAction(OpBuilder &b, Block &body, int64_t s, const Action &a,
                  IRMapping &map, IRMapping &shared) {
    const int64_t chunk = a.chunk * stages + s;
    for (Operation &op : body) {
      if (auto t = dyn_cast<dist::TransferOp>(op)) {
        const Part part =
            t.getFrom() < t.getTo() ? Part::Forward : Part::Backward;
        if (part == a.part)
          transfer(b, t, chunk, a.microBatch, map, shared);
        continue;
      }
      auto it = placed.find(&op);
      if (it == placed.end() || !(it->second.stages >> s & 1) ||
          it->second.part != a.part ||
          (op.getNumResults() ? chunkOn(op.getResult(0), s) : opChunk(op, s)) !=
              chunk)
        continue;
      if (tiedSums.contains(&op)) { // this stage's contribution
        for (Value v : op.getOperands())
          if (stagesOfValue.lookup(v) >> s & 1)
            map.map(op.getResult(0), map.lookup(v));
        continue;
      }
      for (Value v : op.getOperands())
        materialize(b, v, map, shared);
      Operation *clone = b.clone(op, map);
      // Micro-batch m's samples are data-parallel micro-step m's: (m x W +
      // r) x B on, the replica's r x B added by the runtime.
      if (auto d = dyn_cast<DropoutOp>(clone))
        d.setSampleOffset(d.getSampleOffset() +
                          a.microBatch * replicas *
                              tensorOf(body.getArgument(0)).getDimSize(0));
    }
  }

  /// The chunk of an op with no results (a store) on stage s: its
  /// operands'.
  int64_t opChunk(Operation &op, int64_t s) const {
    int64_t chunk = -1;
    for (Value v : op.getOperands())
      if (stagesOfValue.lookup(v) >> s & 1)
        chunk = std::max(chunk, chunkOn(v, s));
    return chunk;
  }

  /// A transfer's half on `chunk` (of stage chunk % stages), if it has
  /// one; the peers are the chunks' stages.
  void transfer(OpBuilder &b, dist::TransferOp t, int64_t chunk, int64_t m,
                IRMapping &map, IRMapping &shared) {
    const int64_t id = transferId.lookup(t);
    if (t.getFrom() == chunk) {
      materialize(b, t.getX(), map, shared);
      b.create<dist::SendOp>(t.getLoc(), map.lookup(t.getX()),
                             t.getTo() % stages, id, m);
    } else if (t.getTo() == chunk) {
      // Received on the comm stream; compute waits for it here.
      auto recv = b.create<dist::RecvOp>(t.getLoc(), t.getType(),
                                         t.getFrom() % stages, id, m);
      auto wait = b.create<dist::WaitOp>(t.getLoc(), recv.getResult());
      map.map(t.getResult(), wait.getResult());
    }
  }

  /// Makes `v` available in micro-batch `map`: a staged value is there
  /// already; an unstaged one is copied here with what it reads, once per
  /// micro-batch if it reads the arguments or a variable the step stores,
  /// else once. Returns whether it is the micro-batch's own.
  bool materialize(OpBuilder &b, Value v, IRMapping &map, IRMapping &shared) {
    if (shared.contains(v)) {
      map.map(v, shared.lookup(v));
      return false;
    }
    if (map.contains(v))
      return true;
    Operation *def = v.getDefiningOp();
    if (!def)
      return true; // an argument: mapped per micro-batch
    auto load = dyn_cast<LoadOp>(def);
    bool readsArguments = load && stored.contains(load.getName());
    for (Value x : def->getOperands())
      readsArguments |= materialize(b, x, map, shared);
    Operation *copy = b.clone(*def, map);
    if (!readsArguments)
      for (auto [r, c] : llvm::zip(def->getResults(), copy->getResults()))
        shared.map(r, c);
    return readsArguments;
  }
};

} // namespace
