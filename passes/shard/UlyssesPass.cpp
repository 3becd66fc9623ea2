//===- UlyssesPass.cpp - Ulysses sequence parallelism on @forward ---------===//
//
// DeepSpeed-Ulysses (Jacobs et al., 2023) cuts every sequence into S
// contiguous parts, one a rank of a sequence-parallel group. Everything but
// attention works token by token, so it runs on the rank's tokens as is;
// attention needs whole sequences, so around it the group trades tokens for
// heads with one all-to-all, and back.
//
// The rewrite is of the forward only, before autodiff: the all-to-all's
// gradient is the same all-to-all (a block transpose is its own inverse),
// so attention's backward, the weight gradients and the lookups' need no
// rule of their own. Every weight stays whole: a rank's gradient is its
// tokens' share of the mean loss, and averaging over all ranks (ds-zero,
// unchanged) gives the whole batch's.
//
// Values are whole (every rank holds the same: weights, the iota before
// it is cut) or cut along one dimension into the group's parts: token-cut
// (the sequence) or, between the exchanges, head-cut. The cut starts at
// the token and target arguments and goes op by op; ShardRules.h's split
// layouts serve the ops that reshape, transpose, multiply and add.
//
//===----------------------------------------------------------------------===//

#include "passes/Functions.h"
#include "passes/Passes.h"
#include "passes/shard/ShardRules.h"

#include "dialects/dist/DistOps.h"
#include "dialects/ds/DsOps.h"
#include "dialects/ds/DsUtils.h"
#include "runtime/plan/ProgramNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <string>

namespace mlir::ds {
#define GEN_PASS_DEF_DSULYSSES
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
namespace plan = dsc::plan;
using shard::Sharding;

namespace {

/// Where a value is cut: along `dim` (one rank's part along it), by its
/// tokens or, between the exchanges around attention, by its heads. With
/// `rows`, `dim` merges the batch with the tokens ([B, L/S, V] flattened to
/// [B L/S, V] before a loss): the rank's rows are its tokens of every
/// sequence in turn, not one contiguous part, so only ops that work row
/// by row may read them.
struct Cut {
  int64_t dim = -1;
  bool heads = false;
  bool rows = false;
};

struct UlyssesPass : ds::impl::DsUlyssesBase<UlyssesPass> {
  using Base::Base;

  llvm::DenseMap<Value, Cut> cuts;
  /// Whole values already cut along a dimension (an iota or a lookup
  /// read by several ops): the rank's part, made once.
  llvm::DenseMap<std::pair<Value, int64_t>, Value> parts;
  /// The function's values computed from a parameter (they have
  /// gradients); the others (constants, positions, rotary tables) may be
  /// computed whole and cut.
  llvm::DenseSet<Value> varied;

  void runOnOperation() override {
    if (sequenceParallel <= 1)
      return;
    ModuleOp module = getOperation();
    eraseSamplingFunctions(module);
    for (func::FuncOp func : forwardFunctions(module))
      if (failed(rewrite(func)))
        return signalPassFailure();
    OpBuilder b(module.getContext());
    module->setAttr(dist::kSequenceParallelAttr,
                    b.getI64IntegerAttr(sequenceParallel));
  }

  InFlightDiagnostic refuse(Operation *op, const Twine &why) {
    return op->emitError("ds-ulysses: '")
           << op->getName()
           << "' cannot run on a part of the sequence: " << why;
  }

  RankedTensorType local(RankedTensorType t, int64_t dim) {
    return shard::localType(t, Sharding::split(dim), sequenceParallel);
  }

  /// Sets `v`'s type to one rank's part along `dim`.
  void cutValue(Value v, int64_t dim, bool heads = false, bool rows = false) {
    v.setType(local(tensorOf(v), dim));
    cuts[v] = {dim, heads, rows};
  }

  std::optional<Cut> cutOf(Value v) {
    auto it = cuts.find(v);
    if (it == cuts.end())
      return std::nullopt;
    return it->second;
  }

  LogicalResult rewrite(func::FuncOp func) {
    cuts.clear();
    parts.clear();
    varied.clear();
    Block &body = func.front();
    for (Operation &op : body)
      if (isa<LoadOp>(op) || llvm::any_of(op.getOperands(), [&](Value x) {
            return varied.contains(x);
          }))
        varied.insert(op.result_begin(), op.result_end());
    // dsrun feeds each rank [B, L / S] of the tokens and the targets.
    for (BlockArgument arg : body.getArguments()) {
      auto t = tensorOf(arg);
      if (!t || t.getRank() != 2 || t.getDimSize(1) % sequenceParallel != 0)
        return func.emitError("ds-ulysses: argument #")
               << arg.getArgNumber() << " of @" << func.getSymName()
               << " is not [batch, sequence] with a sequence that "
               << sequenceParallel << " ranks divide: " << arg.getType();
      cutValue(arg, 1);
    }
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (isa<func::ReturnOp>(op))
        continue;
      if (failed(rewriteOp(&op)))
        return failure();
    }
    func.setType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                   body.getTerminator()->getOperandTypes()));
    return success();
  }

  /// The ops that work row by row, which may read merged rows.
  static bool isRowWise(Operation *op) {
    return shard::isElementwise(op) ||
           isa<CrossEntropyOp, MatmulOp, LayerNormOp, RmsNormOp, SoftmaxOp>(op);
  }

  LogicalResult rewriteOp(Operation *op) {
    bool anyCut = false, heads = false, tokens = false;
    for (Value v : op->getOperands()) {
      std::optional<Cut> c = cutOf(v);
      if (!c)
        continue;
      anyCut = true;
      (c->heads ? heads : tokens) = true;
      if (c->heads &&
          isa<EmbeddingOp, LayerNormOp, RmsNormOp, DropoutOp, CrossEntropyOp>(
              op))
        return refuse(op, "it reads a value cut by heads");
      if (c->rows && !isRowWise(op))
        return refuse(op, "it reads rows that merge the batch with the "
                          "rank's tokens (only row-wise ops and the loss "
                          "do)");
    }
    if (!anyCut)
      return success(); // whole operands, whole results
    if (heads && tokens && !isa<AttentionOp, RotaryOp>(op))
      return refuse(op, "it mixes values cut by heads and by tokens");
    if (isSeqMajor(op))
      return refuse(op, "seq_major attention is formed in phase fused, after "
                        "the sequence is cut");
    if (isa<AttentionOp, RotaryOp>(op))
      return acrossTokens(op);
    if (auto e = dyn_cast<EmbeddingOp>(op))
      return lookup(e);
    if (isa<LayerNormOp, RmsNormOp>(op))
      return rowWise(op, /*wholeFrom=*/1);
    if (auto d = dyn_cast<DropoutOp>(op))
      return dropout(d);
    if (auto ce = dyn_cast<CrossEntropyOp>(op))
      return loss(ce);
    return byRule(op);
  }

  /// An op over the last dimension of its first operand (a norm), the
  /// others (weights) whole.
  LogicalResult rowWise(Operation *op, unsigned wholeFrom) {
    Cut c = *cutOf(op->getOperand(0));
    if (c.dim >= tensorOf(op->getOperand(0)).getRank() - 1)
      return refuse(op, "it normalizes over the cut dimension");
    for (unsigned i = wholeFrom; i < op->getNumOperands(); ++i)
      if (cutOf(op->getOperand(i)))
        return refuse(op, "its operand " + std::to_string(i) + " is cut");
    cutValue(op->getResult(0), c.dim, false, c.rows);
    return success();
  }

  /// Dropout draws the whole sequence's mask at the rank's part of it.
  LogicalResult dropout(DropoutOp d) {
    Cut c = *cutOf(d.getX());
    OpBuilder b(d);
    d.setPartsAttr(b.getI64IntegerAttr(sequenceParallel));
    d.setPartDimAttr(b.getI64IntegerAttr(c.dim));
    cutValue(d.getResult(), c.dim);
    return success();
  }

  /// A lookup by cut indices gives rows cut alike; the table stays whole.
  LogicalResult lookup(EmbeddingOp e) {
    if (cutOf(e.getTable()))
      return refuse(e, "its table is cut");
    cutValue(e.getResult(), cutOf(e.getIndices())->dim);
    return success();
  }

  /// The loss over the rank's tokens: their mean, whole (each rank's own,
  /// as in data parallelism).
  LogicalResult loss(CrossEntropyOp ce) {
    std::optional<Cut> l = cutOf(ce.getLogits());
    const int64_t classes = tensorOf(ce.getLogits()).getRank() - 1;
    if (!l || l->dim >= classes)
      return refuse(ce, "its logits are not cut along their tokens");
    std::optional<Cut> t = cutOf(ce.getTargets());
    if (!t) {
      FailureOr<Value> part = wholeToPart(ce, ce.getTargets(), l->dim);
      if (failed(part))
        return failure();
      ce.getTargetsMutable().assign(*part);
    } else if (t->dim != l->dim || t->rows != l->rows) {
      return refuse(ce, "its logits and targets are cut differently");
    }
    return success();
  }

  /// Any other op by ShardRules' split layouts over the group: a whole
  /// operand it needs cut is cut at its source (wholeToPart); a result
  /// that would be a sum over the sequence, or an operand it needs whole,
  /// is refused.
  LogicalResult byRule(Operation *op) {
    if (auto r = dyn_cast<ReshapeOp>(op); r && mergesRows(r))
      return success();
    SmallVector<Sharding> in;
    bool rows = false, heads = false;
    for (Value v : op->getOperands()) {
      std::optional<Cut> c = cutOf(v);
      in.push_back(c ? Sharding::split(c->dim) : Sharding());
      rows |= c && c->rows;
      heads |= c && c->heads;
    }
    shard::RuleContext ctx;
    ctx.parts = sequenceParallel;
    std::string why = "its operands are cut along different dimensions";
    // The rules read whole types, as phase shard gives them.
    llvm::SmallDenseMap<Value, Type> localTypes;
    for (Value v : op->getOperands())
      if (std::optional<Cut> c = cutOf(v); c && !localTypes.count(v)) {
        localTypes[v] = v.getType();
        SmallVector<int64_t> shape(tensorOf(v).getShape());
        shape[c->dim] *= sequenceParallel;
        v.setType(tensorOf(v).clone(shape));
      }
    FailureOr<shard::OpLayout> l = shard::isElementwise(op)
                                       ? elementwiseCut(op, in)
                                       : shard::layoutOf(op, in, ctx, why);
    for (auto [v, t] : localTypes)
      v.setType(t);
    if (failed(l))
      return refuse(op, why);
    for (auto [i, want] : llvm::enumerate(l->operands)) {
      Value v = op->getOperand(i);
      if (want == in[i])
        continue;
      if (want.isSplit() && in[i].isReplicated() && want.blocks == 1) {
        if (rows || heads)
          return refuse(op, "operand " + std::to_string(i) +
                                " is whole, and the rank's " +
                                (rows ? "merged rows" : "heads") +
                                " are no part of it");
        FailureOr<Value> part = wholeToPart(op, v, want.dim);
        if (failed(part))
          return failure();
        op->setOperand(i, *part);
        continue;
      }
      return refuse(op, "operand " + std::to_string(i) + " is " + in[i].str() +
                            ", and it needs it " + want.str());
    }
    for (auto [r, s] : llvm::zip(op->getResults(), l->results)) {
      if (s.isPartial())
        return refuse(op, "it sums over the cut sequence");
      if (s.isSplit())
        cutValue(r, s.dim, heads, rows); // GQA's repeated key/value heads
    }
    // ds.split's sizes are along an uncut dimension: they stay.
    return success();
  }

  /// A reshape that merges the batch (B > 1) and the dimensions up to the
  /// cut one into its first, leaving the rest: nanoGPT's
  /// logits.view(-1, V) and targets.view(-1). The rank's rows are its
  /// tokens of each sequence in turn (Cut::rows). False for any other
  /// reshape.
  bool mergesRows(ReshapeOp r) {
    std::optional<Cut> c = cutOf(r.getX());
    if (!c || c->rows || c->heads || c->dim == 0)
      return false;
    ArrayRef<int64_t> from = tensorOf(r.getX()).getShape();    // local
    ArrayRef<int64_t> to = tensorOf(r.getResult()).getShape(); // whole
    int64_t merged = 1;
    for (int64_t i = 0; i <= c->dim; ++i)
      merged *= from[i];
    if (merged == from[c->dim] || to.empty() ||
        to[0] != merged * sequenceParallel ||
        to.drop_front() != from.drop_front(c->dim + 1))
      return false; // a contiguous part (B = 1), or another reshape
    cutValue(r.getResult(), 0, false, /*rows=*/true);
    return true;
  }

  /// Elementwise ops (numpy broadcasting): the cut operands agree on the
  /// result dimension they cut; a whole operand that spans it is cut too
  /// (a position embedding added to the token embeddings).
  FailureOr<shard::OpLayout> elementwiseCut(Operation *op,
                                            ArrayRef<Sharding> in) {
    auto result = tensorOf(op->getResult(0));
    const int64_t rank = result.getRank();
    int64_t dim = -1;
    for (auto [i, s] : llvm::enumerate(in)) {
      if (!s.isSplit())
        continue;
      int64_t d = s.dim + rank - tensorOf(op->getOperand(i)).getRank();
      if (dim >= 0 && d != dim)
        return failure();
      dim = d;
    }
    shard::OpLayout l{SmallVector<Sharding>(in.begin(), in.end()),
                      {Sharding::split(dim)}};
    for (auto [i, s] : llvm::enumerate(in)) {
      auto t = tensorOf(op->getOperand(i));
      const int64_t d = dim - (rank - t.getRank());
      if (s.isReplicated() && d >= 0 &&
          t.getDimSize(d) == result.getDimSize(dim))
        l.operands[i] = Sharding::split(d);
    }
    return l;
  }

  /// The rank's part along `dim` of a whole value `v` that `user` needs
  /// cut: a lookup by cut indices, or a value no gradient passes through
  /// cut by dist.shard. Other values with a gradient are not cut this way
  /// (a part of a whole value would need a gradient rule of its own):
  /// refused.
  FailureOr<Value> wholeToPart(Operation *user, Value v, int64_t dim) {
    auto key = std::make_pair(v, dim);
    if (Value p = parts.lookup(key))
      return p;
    auto t = tensorOf(v);
    if (t.getDimSize(dim) % sequenceParallel != 0)
      return refuse(user, "its operand's dimension " + std::to_string(dim) +
                              " (" + std::to_string(t.getDimSize(dim)) +
                              ") does not split over " +
                              std::to_string(sequenceParallel) + " ranks");
    Operation *def = v.getDefiningOp();
    OpBuilder b(user->getContext());
    Value part;
    if (auto e = dyn_cast_or_null<EmbeddingOp>(def);
        e && dim < t.getRank() - 1) {
      FailureOr<Value> idx = wholeToPart(user, e.getIndices(), dim);
      if (failed(idx))
        return failure();
      b.setInsertionPoint(user); // after the table and the cut indices
      part = b.create<EmbeddingOp>(e.getLoc(), local(t, dim), e.getTable(),
                                   *idx, e.getPartsAttr())
                 .getResult();
    } else if (def && !varied.contains(v) &&
               llvm::all_of(t.getShape().take_front(dim),
                            [](int64_t n) { return n == 1; })) {
      // No gradient passes (positions, a folded arange, rotary tables):
      // computed whole, the rank's contiguous part is the flat value's
      // slice r.
      b.setInsertionPointAfter(def);
      Location loc = def->getLoc();
      const int64_t n = t.getNumElements();
      auto flat = [&](int64_t k) {
        return RankedTensorType::get({k}, t.getElementType());
      };
      Value x = t.getRank() == 1 ? v : b.create<ReshapeOp>(loc, flat(n), v);
      auto shard =
          b.create<dist::ShardOp>(loc, flat(n / sequenceParallel), x,
                                  b.getI64IntegerAttr(sequenceParallel));
      shard->setAttr(dist::kTensorGroupAttr, b.getUnitAttr());
      part = t.getRank() == 1
                 ? shard.getResult()
                 : b.create<ReshapeOp>(loc, local(t, dim), shard.getResult())
                       .getResult();
    } else {
      return refuse(user, "it needs a part of a value every rank computes "
                          "whole (" +
                              (def ? def->getName().getStringRef().str()
                                   : std::string("an argument")) +
                              "), which only a lookup, or a value without "
                              "a gradient whose part is contiguous, can be "
                              "cut into");
    }
    cuts[part] = {dim, false};
    parts[key] = part;
    return part;
  }

  /// Attention and rotary embeddings need whole sequences: each token-cut
  /// operand [..., H, L/S, D] is exchanged for [..., H/S, L, D]; attention's
  /// result goes back to the token cut, rotary's stays cut by heads (it
  /// feeds attention, through the reshapes and the broadcast that repeat
  /// grouped-query attention's key heads: ShardRules keeps the cut).
  LogicalResult acrossTokens(Operation *op) {
    const int64_t rank = tensorOf(op->getOperand(0)).getRank();
    const int64_t seqDim = rank - 2, headDim = rank - 3;
    if (headDim < 0)
      return refuse(op, "it has no heads dimension to cut instead");
    for (OpOperand &operand : op->getOpOperands()) {
      std::optional<Cut> c = cutOf(operand.get());
      if (!c)
        return refuse(op, "operand " +
                              std::to_string(operand.getOperandNumber()) +
                              " is whole and the others are cut");
      if (c->heads && c->dim == headDim)
        continue;
      if (c->heads)
        return refuse(op, "it is cut by heads along dimension " +
                              std::to_string(c->dim));
      if (c->dim != seqDim)
        return refuse(op, "it is cut along dimension " +
                              std::to_string(c->dim) + ", not its tokens");
      auto t = tensorOf(operand.get());
      if (t.getDimSize(headDim) % sequenceParallel != 0)
        return refuse(op, std::to_string(t.getDimSize(headDim)) +
                              " heads do not split over " +
                              std::to_string(sequenceParallel) + " ranks");
      OpBuilder b(op);
      Value heads = exchange(b, op->getLoc(), operand.get(), seqDim, headDim);
      cuts[heads] = {headDim, true};
      operand.set(heads);
    }
    Value result = op->getResult(0);
    cutValue(result, headDim, /*heads=*/true);
    if (isa<RotaryOp>(op))
      return success();
    SmallVector<OpOperand *> users;
    for (OpOperand &use : result.getUses())
      users.push_back(&use);
    OpBuilder b(op->getContext());
    b.setInsertionPointAfter(op);
    Value tokens = exchange(b, op->getLoc(), result, headDim, seqDim);
    for (OpOperand *use : users)
      use->set(tokens);
    cuts[tokens] = {seqDim, false};
    return success();
  }

  /// `x`, cut along `from` (one rank's part) and whole along `to`, made
  /// whole along `from` and cut along `to`: `to` is split into the group's
  /// S blocks, block j goes to rank j (one dist.all_to_all, the blocks
  /// outermost), and the S parts of `from` that arrive, in rank order, are
  /// joined back in place.
  Value exchange(OpBuilder &b, Location loc, Value x, int64_t from,
                 int64_t to) {
    const int64_t S = sequenceParallel;
    auto t = tensorOf(x);
    Type elem = t.getElementType();
    ArrayRef<int64_t> s = t.getShape();
    const int64_t rank = t.getRank();
    // [..., S, n_to / S, ...]: block j of `to` at index j of a new axis,
    // moved outermost.
    SmallVector<int64_t> blocks(s);
    blocks[to] /= S;
    blocks.insert(blocks.begin() + to, S);
    Value v = b.create<ReshapeOp>(loc, RankedTensorType::get(blocks, elem), x);
    SmallVector<int64_t> outer{to};
    for (int64_t i = 0; i <= rank; ++i)
      if (i != to)
        outer.push_back(i);
    v = b.create<TransposeOp>(loc, v, outer);
    const int64_t n = t.getNumElements();
    auto flatType = RankedTensorType::get({n}, elem);
    auto swapped = b.create<dist::AllToAllOp>(
        loc, b.create<ReshapeOp>(loc, flatType, v), b.getI64IntegerAttr(S));
    swapped->setAttr(dist::kTensorGroupAttr, b.getUnitAttr());
    Value arrived = b.create<dist::WaitOp>(loc, swapped.getResult());
    // Axis 0 now numbers the ranks the parts of `from` came from: moved in
    // front of `from` and joined with it.
    auto transposedType = cast<RankedTensorType>(v.getType());
    v = b.create<ReshapeOp>(loc, transposedType, arrived);
    const int64_t fromAt = from + 1; // where `outer` put `from`
    SmallVector<int64_t> back;
    for (int64_t i = 1; i <= rank; ++i) {
      if (i == fromAt)
        back.push_back(0);
      back.push_back(i);
    }
    v = b.create<TransposeOp>(loc, v, back);
    SmallVector<int64_t> joined(s);
    joined[from] *= S;
    joined[to] /= S;
    return b.create<ReshapeOp>(loc, RankedTensorType::get(joined, elem), v);
  }
};

} // namespace
