//===- ShardRules.cpp - how each ds op runs on tensor-parallel shards -----===//
//
// The rules follow Megatron-LM's tensor parallelism: a matmul whose weight
// is cut along its output features gives outputs cut the same way; one
// whose contraction dimension is cut on both sides gives partial sums
// (summed by an all-reduce where a whole value is needed); elementwise ops,
// reshapes that keep the cut dimension outermost, transposes, attention
// over cut heads, rotary embeddings and softmax over uncut dimensions keep
// the layout; reductions over the cut dimension give partial sums.
//
//===----------------------------------------------------------------------===//

#include "passes/shard/ShardRules.h"

#include "dialects/ds/DsOps.h"
#include "dialects/ds/DsUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>

namespace mlir::ds::shard {

std::string Sharding::str() const {
  switch (kind) {
  case Replicated:
    return "replicated";
  case Partial:
    return "partial";
  case Split:
    return "split(" + std::to_string(dim) +
           (blocks > 1 ? ", " + std::to_string(blocks) + " blocks)" : ")");
  case Tokens:
    return "tokens(" + std::to_string(dim) + ")";
  }
  return "?";
}

RankedTensorType localType(RankedTensorType t, const Sharding &s,
                           int64_t parts) {
  if (!s.isSplit() && !s.isTokens())
    return t;
  SmallVector<int64_t> shape(t.getShape());
  shape[s.dim] /= parts;
  return RankedTensorType::get(shape, t.getElementType());
}

namespace {

using Layouts = ArrayRef<Sharding>;

RankedTensorType typeOf(Value v) {
  return dyn_cast<RankedTensorType>(v.getType());
}

/// Every operand whole, every result whole.
OpLayout allReplicated(Operation *op) {
  return {SmallVector<Sharding>(op->getNumOperands()),
          SmallVector<Sharding>(op->getNumResults())};
}

/// Whether `d` of a `t` value splits into `parts` (each of `blocks`).
bool divides(RankedTensorType t, int64_t d, int64_t blocks, int64_t parts) {
  return t.getDimSize(d) % (blocks * parts) == 0;
}

/// Elementwise with numpy broadcasting: the split operands must agree on
/// the (result) dimension they cut; a whole operand must not span it. All
/// partial operands of an add or sub stay partial.
FailureOr<OpLayout> elementwise(Operation *op, Layouts in, std::string &why) {
  auto result = typeOf(op->getResult(0));
  if (!result)
    return allReplicated(op);
  const int64_t rank = result.getRank();
  const bool linear = isa<AddOp, SubOp>(op);
  OpLayout l = allReplicated(op);
  if (linear &&
      llvm::all_of(in, [](const Sharding &s) { return s.isPartial(); })) {
    l.operands.assign(in.begin(), in.end());
    l.results.assign(op->getNumResults(), Sharding::partial());
    return l;
  }
  std::optional<Sharding> cut; // in result dimensions
  for (auto [i, s] : llvm::enumerate(in)) {
    if (!s.isSplit())
      continue;
    const int64_t offset = rank - typeOf(op->getOperand(i)).getRank();
    Sharding mapped = Sharding::split(s.dim + offset, s.blocks);
    if (cut && *cut != mapped) {
      why = "operands cut as " + cut->str() + " and " + mapped.str();
      return failure();
    }
    cut = mapped;
  }
  if (!cut)
    return l; // partial operands are summed first
  for (auto [i, s] : llvm::enumerate(in)) {
    auto t = typeOf(op->getOperand(i));
    const int64_t d = cut->dim - (rank - t.getRank());
    if (s.isSplit()) {
      l.operands[i] = s;
      continue;
    }
    if (d >= 0 && t.getDimSize(d) != 1) {
      why = "operand " + std::to_string(i) + " is whole along dimension " +
            std::to_string(cut->dim) + ", which another operand cuts";
      return failure();
    }
  }
  l.results.assign(op->getNumResults(), *cut);
  return l;
}

/// lhs [..., M, K] x rhs [..., K, N] (either transposed): a cut M or N
/// cuts the result, a cut K on both sides makes it partial, a cut batch
/// dimension (on both, or on lhs over a 2-D rhs) cuts the result's.
FailureOr<OpLayout> matmul(MatmulOp op, Layouts in, std::string &why) {
  const Sharding &a = in[0], &b = in[1];
  auto lt = typeOf(op.getLhs()), rt = typeOf(op.getRhs());
  const int64_t lr = lt.getRank(), rr = rt.getRank();
  const int64_t rank = typeOf(op.getResult()).getRank();
  const int64_t lhsM = op.getTransposeLhs() ? lr - 1 : lr - 2;
  const int64_t lhsK = op.getTransposeLhs() ? lr - 2 : lr - 1;
  const int64_t rhsK = op.getTransposeRhs() ? rr - 1 : rr - 2;
  const int64_t rhsN = op.getTransposeRhs() ? rr - 2 : rr - 1;
  OpLayout l{{a, b}, {Sharding::replicated()}};
  if (a.isPartial() || b.isPartial()) {
    l.operands = {Sharding::replicated(), Sharding::replicated()};
    if (a.isSplit() || b.isSplit()) {
      why = "one operand is partial and the other cut";
      return failure();
    }
    return l;
  }
  if (a.isReplicated() && b.isReplicated())
    return l;
  if (a.isSplit() && b.isSplit() && a.dim == lhsK && b.dim == rhsK &&
      a.blocks == b.blocks) {
    l.results[0] = Sharding::partial();
    return l;
  }
  if (a.isSplit() && b.isReplicated() && a.dim == lhsM) {
    l.results[0] = Sharding::split(rank - 2, a.blocks);
    return l;
  }
  if (a.isReplicated() && b.isSplit() && b.dim == rhsN) {
    l.results[0] = Sharding::split(rank - 1, b.blocks);
    return l;
  }
  // A batch dimension: cut on lhs over a 2-D rhs, or on both alike.
  if (a.isSplit() && a.dim < lr - 2 &&
      ((b.isReplicated() && rr == 2) ||
       (b.isSplit() && b.dim == a.dim - lr + rr && b.blocks == a.blocks))) {
    l.results[0] = Sharding::split(a.dim + rank - lr, a.blocks);
    return l;
  }
  why = "lhs " + a.str() + " and rhs " + b.str() +
        " match no tensor-parallel matmul";
  return failure();
}

/// A reshape keeps a cut dimension that it leaves alone, that it divides
/// into several (the cut going to the outermost, which must divide), or
/// that it merges as the outermost of several.
FailureOr<OpLayout> reshape(ReshapeOp op, Layouts in, int64_t parts,
                            std::string &why) {
  OpLayout l{{in[0]}, {in[0]}};
  if (!in[0].isSplit())
    return l;
  ArrayRef<int64_t> from = typeOf(op.getX()).getShape();
  ArrayRef<int64_t> to = typeOf(op.getResult()).getShape();
  const int64_t d = in[0].dim;
  int64_t before = 1; // elements of the dimensions before d
  for (int64_t i = 0; i < d; ++i)
    before *= from[i];
  // The result dimension whose outer boundary is the same.
  int64_t outer = 1, j = 0;
  while (j < int64_t(to.size()) && outer < before)
    outer *= to[j++];
  if (outer != before || j == int64_t(to.size())) {
    why = "the reshape " + std::to_string(from.size()) + "-D to " +
          std::to_string(to.size()) + "-D moves the cut dimension " +
          std::to_string(d);
    return failure();
  }
  // Dimensions of size 1 inserted before the cut one move it, and nothing
  // else (Llama's repeated key/value heads: [B, Hkv, L, D] reshaped to
  // [B, Hkv, 1, L, D] keeps L cut).
  while (j + 1 < int64_t(to.size()) && to[j] == 1 && from[d] != 1)
    ++j;
  const int64_t blocks = in[0].blocks;
  if (to[j] != from[d] && blocks > 1) {
    why = "a dimension cut in blocks is reshaped";
    return failure();
  }
  if (to[j] == from[d] ||
      (to[j] % parts == 0 &&
       (to[j] < from[d] ? from[d] % to[j] == 0 : to[j] % from[d] == 0))) {
    l.results[0] = Sharding::split(j, blocks);
    return l;
  }
  why = "dimension " + std::to_string(j) + " of the reshape (" +
        std::to_string(to[j]) + ") does not split over " +
        std::to_string(parts) + " ranks";
  return failure();
}

/// numpy broadcasting keeps a cut dimension that it does not expand (the
/// key and value heads of grouped-query attention, repeated for the query
/// heads of each group).
FailureOr<OpLayout> broadcast(BroadcastOp op, Layouts in, std::string &why) {
  OpLayout l{{in[0]}, {in[0]}}; // a partial sum broadcasts as one
  if (!in[0].isSplit())
    return l;
  auto from = typeOf(op.getX()), to = typeOf(op.getResult());
  const int64_t d = in[0].dim + to.getRank() - from.getRank();
  if (from.getDimSize(in[0].dim) != to.getDimSize(d)) {
    why = "it expands the cut dimension " + std::to_string(in[0].dim);
    return failure();
  }
  l.results[0] = Sharding::split(d, in[0].blocks);
  return l;
}

/// ds.split along the cut dimension into exactly its blocks, or along
/// another dimension.
FailureOr<OpLayout> splitOp(SplitOp op, Layouts in, std::string &why) {
  OpLayout l{{in[0]}, SmallVector<Sharding>(op.getNumResults(), in[0])};
  if (!in[0].isSplit() || in[0].dim != int64_t(op.getAxis()))
    return l;
  ArrayRef<int64_t> sizes = op.getSizes();
  if (int64_t(sizes.size()) != in[0].blocks || !llvm::all_equal(sizes)) {
    why = "it cuts a dimension of " + std::to_string(in[0].blocks) +
          " blocks into " + std::to_string(sizes.size()) + " pieces";
    return failure();
  }
  for (Sharding &r : l.results)
    r = Sharding::split(in[0].dim);
  return l;
}

/// ds.concat of pieces cut alike; along the cut dimension, equal pieces
/// become the blocks of the result.
FailureOr<OpLayout> concat(ConcatOp op, Layouts in, std::string &why) {
  OpLayout l{SmallVector<Sharding>(in.begin(), in.end()), {in[0]}};
  if (!llvm::all_equal(in)) {
    why = "its pieces are laid out differently";
    return failure();
  }
  if (!in[0].isSplit() || in[0].dim != int64_t(op.getAxis()))
    return l;
  auto first = typeOf(op.getInputs()[0]);
  for (Value v : op.getInputs())
    if (typeOf(v) != first || in[0].blocks != 1) {
      why = "it joins unequal pieces along the cut dimension";
      return failure();
    }
  l.results[0] = Sharding::split(in[0].dim, int64_t(in.size()));
  return l;
}

FailureOr<OpLayout> reduceSum(ReduceSumOp op, Layouts in) {
  OpLayout l{{in[0]}, {in[0]}};
  if (!in[0].isSplit())
    return l;
  ArrayRef<int64_t> axes = op.getAxes();
  if (llvm::is_contained(axes, in[0].dim)) {
    l.results[0] = Sharding::partial();
    return l;
  }
  int64_t d = in[0].dim;
  if (!op.getKeepdim())
    d -= llvm::count_if(axes, [&](int64_t a) { return a < in[0].dim; });
  l.results[0] = Sharding::split(d, in[0].blocks);
  return l;
}

/// Ops whose operands and results share one layout that may cut any
/// dimension before `lastFree` (attention's heads, rotary's and softmax's
/// leading dimensions).
FailureOr<OpLayout> sameCut(Operation *op, Layouts in, int64_t lastFree,
                            std::string &why) {
  OpLayout l{SmallVector<Sharding>(in.begin(), in.end()),
             SmallVector<Sharding>(op->getNumResults(), in[0])};
  if (!llvm::all_equal(in) || in[0].isPartial()) {
    if (llvm::all_of(in, [](const Sharding &s) { return !s.isSplit(); }))
      return allReplicated(op);
    why = "its operands are laid out differently";
    return failure();
  }
  if (in[0].isSplit() && in[0].dim >= lastFree) {
    why = "it needs dimension " + std::to_string(in[0].dim) + " whole";
    return failure();
  }
  return l;
}

/// An optimizer update: every tensor operand laid out as the parameter
/// (the elementwise updates), the scalars whole.
FailureOr<OpLayout> update(Operation *op, Layouts in, std::string &why) {
  OpLayout l = allReplicated(op);
  auto param = typeOf(op->getOperand(0));
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    auto t = typeOf(v);
    if (t && t.getRank() > 0 && t.getShape() == param.getShape())
      l.operands[i] = in[0];
  }
  if (in[0].isSplit() && isa<LambOp, MuonOp>(op)) {
    why = "its update needs each parameter whole (tensor parallelism with " +
          op->getName().stripDialect().str() + ": not supported yet)";
    return failure();
  }
  l.results.assign(op->getNumResults(), in[0]);
  return l;
}

/// Sequence parallelism's ops: elementwise ops, dropout and the norms (and
/// their gradients) on activations cut along their tokens, and sums over
/// the tokens. Applies when an operand is token-cut, or is a partial
/// activation that the op can take token-cut instead of whole (a
/// reduce-scatter, not an all-reduce); whole operands that span the
/// tokens are cut to match, those that do not (a bias, a norm's weight)
/// stay whole. None when it does not apply, or the operands do not fit
/// (then the op's own rule runs on them whole).
std::optional<OpLayout> tokenWise(Operation *op, Layouts in,
                                  const RuleContext &ctx) {
  const bool gradOfNorm = isa<LayerNormGradOp, RmsNormGradOp>(op);
  const bool sum = isa<ReduceSumOp>(op);
  if (!gradOfNorm && !sum && !isElementwise(op) &&
      !isa<DropoutOp, LayerNormOp, RmsNormOp>(op))
    return std::nullopt;
  if (llvm::any_of(in, [](const Sharding &s) { return s.isSplit(); }))
    return std::nullopt;
  if (isa<AddOp, SubOp>(op) &&
      llvm::all_of(in, [](const Sharding &s) { return s.isPartial(); }))
    return std::nullopt; // stays partial
  // The frame: the first operand's type (the result's for elementwise ops,
  // x for the norms and their gradients).
  auto frame = typeOf(sum ? op->getOperand(0) : op->getResult(0));
  if (gradOfNorm)
    frame = typeOf(op->getOperand(0));
  if (!frame)
    return std::nullopt;
  const int64_t rank = frame.getRank();
  int64_t d = -1;
  bool partialActivation = false;
  for (auto [i, s] : llvm::enumerate(in)) {
    auto t = typeOf(op->getOperand(i));
    if (!t)
      continue;
    if (s.isTokens()) {
      int64_t mapped = s.dim + rank - t.getRank();
      if (d >= 0 && d != mapped)
        return std::nullopt;
      d = mapped;
    }
    partialActivation |=
        s.isPartial() && t.getRank() == rank && tokenDim(t, ctx) >= 0;
  }
  if (d < 0 && (sum || !partialActivation))
    return std::nullopt;
  if (d < 0)
    d = tokenDim(frame, ctx);
  if (d < 0)
    return std::nullopt;
  OpLayout l = allReplicated(op);
  for (auto [i, s] : llvm::enumerate(in)) {
    auto t = typeOf(op->getOperand(i));
    if (!t)
      continue;
    const int64_t od = d - (rank - t.getRank());
    const bool spans = od >= 0 && t.getDimSize(od) == frame.getDimSize(d);
    const bool contiguous =
        llvm::all_of(t.getShape().take_front(std::max<int64_t>(od, 0)),
                     [](int64_t n) { return n == 1; }) ||
        od == 0;
    if (s.isTokens() || (spans && contiguous))
      l.operands[i] = spans ? Sharding::tokens(od) : s;
    else if (spans)
      return std::nullopt; // a part that is not contiguous
    // Anything else is taken whole: a partial one all-reduced.
  }
  if (sum) {
    ArrayRef<int64_t> axes = cast<ReduceSumOp>(op).getAxes();
    if (llvm::is_contained(axes, d)) {
      l.results[0] = Sharding::partial();
      return l;
    }
    int64_t rd = d;
    if (!cast<ReduceSumOp>(op).getKeepdim())
      rd -= llvm::count_if(axes, [&](int64_t a) { return a < d; });
    l.results[0] = Sharding::tokens(rd);
    return l;
  }
  l.results[0] = Sharding::tokens(d);
  // A norm's weight and bias gradients sum over every token: partial.
  for (unsigned r = 1; gradOfNorm && r < op->getNumResults(); ++r)
    l.results[r] = Sharding::partial();
  return l;
}

/// Vocabulary parallelism (Megatron's VocabParallelEmbedding and its
/// cross-entropy): a lookup in a table cut along its rows gives partial
/// sums (each rank's rows, zeros for the others'); the cotangent of such a
/// table is cut as the table; a loss on logits cut along the vocabulary is
/// whole (phase shard writes it with the rows' statistics summed over the
/// group: VocabParallel.h), its gradient cut as the logits.
std::optional<OpLayout> vocabulary(Operation *op, Layouts in,
                                   const RuleContext &ctx) {
  auto cutRows = [](const Sharding &s, int64_t d) {
    return s.isSplit() && s.dim == d && s.blocks == 1;
  };
  auto whole = [](const Sharding &s) { return s.isReplicated(); };
  if (auto e = dyn_cast<EmbeddingOp>(op)) {
    if (!cutRows(in[0], 0) || !whole(in[1]))
      return std::nullopt;
    return OpLayout{{in[0], in[1]}, {Sharding::partial()}};
  }
  if (auto g = dyn_cast<EmbeddingGradOp>(op)) {
    if (!ctx.vocabularyLookups.contains(g.getIndices()) ||
        llvm::any_of(in, [](const Sharding &s) { return s.isSplit(); }))
      return std::nullopt;
    return OpLayout{{Sharding(), Sharding()}, {Sharding::split(0)}};
  }
  if (!isa<CrossEntropyOp, CrossEntropyGradOp>(op))
    return std::nullopt;
  const int64_t classes = typeOf(op->getOperand(0)).getRank() - 1;
  if (!cutRows(in[0], classes))
    return std::nullopt;
  OpLayout l = allReplicated(op);
  l.operands[0] = in[0];
  if (isa<CrossEntropyGradOp>(op))
    l.results[0] = in[0];
  return l;
}

/// The default: whole operands give whole results.
FailureOr<OpLayout> replicatedOnly(Operation *op, Layouts in,
                                   std::string &why) {
  for (auto [i, s] : llvm::enumerate(in))
    if (s.isSplit()) {
      why = "operand " + std::to_string(i) + " is " + s.str() +
            " and the op has no tensor-parallel rule";
      return failure();
    }
  return allReplicated(op);
}

} // namespace

bool isElementwise(Operation *op) {
  return isa<AddOp, SubOp, MulOp, DivOp, MinimumOp, MaximumOp, NegOp, ExpOp,
             LogOp, TanhOp, SqrtOp, RsqrtOp, ReluOp, SiluOp, GeluOp, ReluGradOp,
             SiluGradOp, GeluGradOp, SwigluOp, CastOp>(op);
}

int64_t tokenDim(RankedTensorType t, const RuleContext &ctx) {
  if (!ctx.sequenceParallel || !t || t.getRank() < 2 ||
      t.getDimSize(0) != ctx.batch || t.getDimSize(1) != ctx.seq)
    return -1;
  if (ctx.batch % ctx.parts == 0)
    return 0;
  if (ctx.batch == 1 && ctx.seq % ctx.parts == 0)
    return 1;
  return -1;
}

FailureOr<OpLayout> layoutOf(Operation *op, Layouts given,
                             const RuleContext &ctx, std::string &why) {
  if (ctx.sequenceParallel)
    if (std::optional<OpLayout> l = tokenWise(op, given, ctx))
      return *l;
  // Every other rule takes token-cut operands whole (all-gathered).
  SmallVector<Sharding> whole(given.begin(), given.end());
  for (Sharding &s : whole)
    if (s.isTokens())
      s = Sharding::replicated();
  Layouts in = whole;
  const int64_t parts = ctx.parts;
  if (isElementwise(op))
    return elementwise(op, in, why);
  if (auto m = dyn_cast<MatmulOp>(op))
    return matmul(m, in, why);
  if (auto r = dyn_cast<ReshapeOp>(op))
    return reshape(r, in, parts, why);
  if (auto t = dyn_cast<TransposeOp>(op)) {
    OpLayout l{{in[0]}, {in[0]}};
    if (in[0].isSplit()) {
      ArrayRef<int64_t> perm = t.getPermutation();
      l.results[0].dim = llvm::find(perm, in[0].dim) - perm.begin();
    }
    return l;
  }
  if (auto b = dyn_cast<BroadcastOp>(op))
    return broadcast(b, in, why);
  if (auto s = dyn_cast<SplitOp>(op))
    return splitOp(s, in, why);
  if (auto c = dyn_cast<ConcatOp>(op))
    return concat(c, in, why);
  if (auto r = dyn_cast<ReduceSumOp>(op))
    return reduceSum(r, in);
  // [B, H, T, D]: batch and heads may be cut; [B, T, H, D]: the batch.
  if (isa<AttentionOp, AttentionGradOp>(op))
    return sameCut(op, in, isSeqMajor(op) ? 1 : 2, why);
  if (auto r = dyn_cast<RotaryOp>(op)) // [.., T, D]; seq_major [B, T, H, D]
    return sameCut(op, in, r.getSeqMajor() ? 1 : typeOf(r.getX()).getRank() - 2,
                   why);
  if (isa<SoftmaxOp, SoftmaxGradOp>(op))
    return sameCut(op, in, typeOf(op->getOperand(0)).getRank() - 1, why);
  if (isa<OptimizerUpdateOpInterface>(op))
    return update(op, in, why);
  if (std::optional<OpLayout> l = vocabulary(op, in, ctx))
    return *l;
  return replicatedOnly(op, in, why);
}

} // namespace mlir::ds::shard
