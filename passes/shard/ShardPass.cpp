//===- ShardPass.cpp - phase `shard`: Megatron-style tensor parallelism ---===//
//
// Three steps over the module after phase `train`:
//   1. layouts of the variables: Megatron-LM's column- and row-parallel
//      linear layers by module name, the weight's output dimension read from
//      its matmul (a transposed rhs is [out, in]); gradients and optimizer
//      state as their parameter;
//   2. layouts of the values, op by op in each function (ShardRules.h),
//      from the variables' (ds.load) and whole function arguments;
//   3. the rewrite: every value's type becomes one rank's part, ds.split's
//      sizes likewise, and each partial value that an op needs whole is
//      all-reduced once, right after it is made.
// The layouts are worked out on the whole types before anything changes.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/shard/ShardRules.h"
#include "passes/shard/VocabParallel.h"

#include "dialects/dist/DistOps.h"
#include "dialects/ds/Contracts.h"
#include "dialects/ds/DsOps.h"
#include "passes/Functions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <functional>

namespace mlir::ds {
#define GEN_PASS_DEF_DSSHARD
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
using shard::OpLayout;
using shard::Sharding;

namespace {

/// Megatron's roles by the linear layer's module name (the parameter
/// name's second-to-last component); a token embedding's table and a
/// separate LM head are cut along the vocabulary (their rows) when the
/// group divides it, and left whole when it does not.
enum class Role { None, Column, Row, Vocabulary };
struct RoleOf {
  Role role = Role::None;
  int64_t blocks = 1;
};

RoleOf roleOf(StringRef name) {
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  if (parts.size() < 2)
    return {};
  StringRef leaf = parts[parts.size() - 2];
  if (leaf == "c_attn") // GPT-2's query, key and value in one weight
    return {Role::Column, 3};
  for (StringRef v : {"wte", "embed_tokens", "word_embeddings",
                      "tok_embeddings", "lm_head", "embed_out"})
    if (leaf == v)
      return {Role::Vocabulary, 1};
  for (StringRef c :
       {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "c_fc", "query",
        "key", "value", "wq", "wk", "wv", "w1", "w3", "fc1"})
    if (leaf == c)
      return {Role::Column, 1};
  for (StringRef r :
       {"o_proj", "c_proj", "down_proj", "out_proj", "wo", "w2", "fc2"})
    if (leaf == r)
      return {Role::Row, 1};
  return {};
}

struct ShardPass : ds::impl::DsShardBase<ShardPass> {
  using Base::Base;

  llvm::StringMap<Sharding> variables;
  DenseMap<Value, Sharding> values;
  /// Per op, the layouts it needs its operands in.
  DenseMap<Operation *, SmallVector<Sharding>> needs;
  /// Splat constants given the layout their user needs.
  DenseSet<Value> relaid;
  /// The rules' context in the function being laid out.
  shard::RuleContext rules;

  static bool isSplat(Value v) {
    auto c = v.getDefiningOp<ConstantOp>();
    auto dense = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : nullptr;
    return dense && dense.isSplat();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (tensorParallel < 1) {
      module.emitError("ds-shard: tensor-parallel must be >= 1");
      return signalPassFailure();
    }
    if (tensorParallel == 1)
      return;
    eraseSamplingFunctions(module);
    if (failed(checkHeads(module)) || failed(layoutVariables(module)))
      return signalPassFailure();
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(propagate(func)) ||
          (regroupNorm(func) && failed(propagate(func))))
        return signalPassFailure();
    rewrite(module);
  }

  /// Megatron cuts attention by heads, so the group must divide every
  /// ds.attention's heads. Checked first, so that the error names the
  /// heads rather than the reshape that makes them.
  LogicalResult checkHeads(ModuleOp module) {
    WalkResult r = module.walk([&](AttentionOp op) {
      int64_t heads = op.getQ().getType().getDimSize(1);
      if (heads % tensorParallel == 0)
        return WalkResult::advance();
      op.emitError("ds-shard: ")
          << heads << " attention heads do not split over "
          << int64_t(tensorParallel)
          << " tensor-parallel ranks (autotp_size must divide the heads)";
      return WalkResult::interrupt();
    });
    return failure(r.wasInterrupted());
  }

  /// The output dimension of weight `name`, from a matmul that reads it as
  /// its rhs; -1 when none does (an embedding table, say).
  int64_t outputDim(ModuleOp module, StringRef name) {
    int64_t dim = -1;
    module.walk([&](LoadOp load) {
      if (dim >= 0 || load.getName() != name)
        return;
      for (Operation *user : load->getUsers())
        if (auto m = dyn_cast<MatmulOp>(user))
          if (m.getRhs() == load.getResult() && dim < 0)
            dim = m.getTransposeRhs() ? 0 : 1;
    });
    return dim;
  }

  LogicalResult layoutVariables(ModuleOp module) {
    bool any = false;
    for (auto var : module.getOps<VariableOp>()) {
      if (var.getKind() != VariableKind::param)
        continue;
      RoleOf r = roleOf(var.getSymName());
      auto t = var.getTensorType();
      if (r.role == Role::None || t.getRank() > 2)
        continue;
      Sharding s;
      if (r.role == Role::Vocabulary) {
        if (t.getRank() != 2 || t.getDimSize(0) % tensorParallel != 0)
          continue; // HF GPT-2's 50257 rows: whole (Megatron pads instead)
        variables[var.getSymName()] = Sharding::split(0);
        continue;
      }
      if (t.getRank() == 2) {
        int64_t out = outputDim(module, var.getSymName());
        if (out < 0)
          continue;
        s = Sharding::split(r.role == Role::Column ? out : 1 - out,
                            r.role == Role::Column ? r.blocks : 1);
      } else if (r.role == Role::Column) {
        s = Sharding::split(0, r.blocks); // the bias of the cut outputs
      } else {
        continue; // a row-parallel bias is added after the all-reduce
      }
      // A projection whose heads the exporter recorded (ds.attention_heads:
      // grouped-query attention's fewer key and value heads too) is cut
      // by heads.
      if (auto heads = var->getAttrOfType<IntegerAttr>(kAttentionHeadsAttr);
          heads && s.dim == 0 && heads.getInt() % tensorParallel != 0)
        return var.emitError("ds-shard: ")
               << var.getSymName() << ": its " << heads.getInt()
               << " attention heads do not split over "
               << int64_t(tensorParallel)
               << " tensor-parallel ranks (autotp_size must divide the heads)";
      if (t.getDimSize(s.dim) % (s.blocks * tensorParallel) != 0)
        return var.emitError("ds-shard: ")
               << var.getSymName() << ": dimension " << s.dim << " ("
               << t.getDimSize(s.dim)
               << (s.blocks > 1 ? " in " + std::to_string(s.blocks) + " blocks"
                                : std::string())
               << ") does not split over " << int64_t(tensorParallel)
               << " ranks";
      variables[var.getSymName()] = s;
      any = true;
    }
    if (!any)
      return module.emitError(
          "ds-shard: no linear layer has a name tensor parallelism cuts "
          "(q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, "
          "GPT-2's c_attn, c_fc, c_proj, ...)");
    // Gradients and optimizer state are laid out as their parameter.
    for (auto var : module.getOps<VariableOp>())
      if (auto of = var.getOfAttr())
        if (auto it = variables.find(of.getValue()); it != variables.end())
          variables[var.getSymName()] = it->second;
    return success();
  }

  Sharding layoutOf(Value v) {
    auto it = values.find(v);
    return it == values.end() ? Sharding() : it->second;
  }

  Sharding variableLayout(StringRef name) {
    auto it = variables.find(name);
    return it == variables.end() ? Sharding() : it->second;
  }

  /// Sequence parallelism cuts a function's activations [B, S, ...] into
  /// contiguous parts: B must split over the group, or be 1 with S split.
  LogicalResult checkTokensSplit(func::FuncOp func) {
    if (!rules.sequenceParallel || rules.batch == 0)
      return success();
    auto tokens = RankedTensorType::get(
        {rules.batch, rules.seq}, IntegerType::get(func.getContext(), 32));
    if (shard::tokenDim(tokens, rules) >= 0)
      return success();
    return func.emitError("ds-shard: sequence parallelism: a micro-batch of ")
           << rules.batch << " x " << rules.seq
           << " tokens does not split over " << int64_t(tensorParallel)
           << " ranks (the micro-batch must be a multiple of "
           << int64_t(tensorParallel) << ", or 1 with the sequence a multiple)";
  }

  /// Whether an operand laid out as `have` can be given as `want`: as is,
  /// a partial sum all-reduced to the whole or reduce-scattered along its
  /// tokens, a token-cut value all-gathered, a whole one cut to its part.
  static bool reachable(const Sharding &have, const Sharding &want) {
    return have == want ||
           (have.isPartial() && (want.isReplicated() || want.isTokens())) ||
           (have.isTokens() && want.isReplicated()) ||
           (have.isReplicated() && want.isTokens());
  }

  /// The rules' context in `func`: with sequence parallelism, the batch
  /// and sequence of its tokens (the indices of its first embedding).
  shard::RuleContext contextOf(func::FuncOp func) {
    shard::RuleContext ctx;
    ctx.parts = tensorParallel;
    ctx.sequenceParallel = sequenceParallel;
    func.walk([&](EmbeddingOp e) {
      auto t = cast<RankedTensorType>(e.getIndices().getType());
      if (ctx.batch == 0 && t.getRank() == 2) {
        ctx.batch = t.getDimSize(0);
        ctx.seq = t.getDimSize(1);
      }
    });
    return ctx;
  }

  LogicalResult propagate(func::FuncOp func) {
    rules = contextOf(func);
    if (failed(checkTokensSplit(func)))
      return failure();
    for (Operation &op : func.front()) {
      SmallVector<Sharding> in;
      for (Value v : op.getOperands())
        in.push_back(layoutOf(v));
      FailureOr<OpLayout> l = layoutAt(&op, in);
      if (failed(l))
        return failure();
      for (auto [i, have, want] : llvm::enumerate(in, l->operands)) {
        Value v = op.getOperand(i);
        // A splat (the zeros that reset a gradient) takes the layout its
        // user asks for: a copy of its own when it has other users.
        if (have.isReplicated() && (want.isSplit() || want.isTokens()) &&
            isSplat(v)) {
          if (!v.hasOneUse()) {
            OpBuilder b(&op);
            v = b.clone(*v.getDefiningOp())->getResult(0);
            op.setOperand(i, v);
          }
          relaid.insert(v);
          values[v] = have = want;
        }
        if (!reachable(have, want))
          return op.emitError("ds-shard: an operand is ")
                 << have.str() << " where the op needs it " << want.str();
      }
      needs[&op] = l->operands;
      for (auto [r, s] : llvm::zip(op.getResults(), l->results))
        values[r] = s;
      if (auto e = dyn_cast<EmbeddingOp>(op);
          e && layoutOf(e.getResult()).isPartial())
        rules.vocabularyLookups.insert(e.getIndices());
    }
    return success();
  }

  /// The global gradient norm's sum of squares, a chain of adds, summed
  /// again as (the whole gradients' terms) + (the cut gradients' partial
  /// terms), so the cut ones take one all-reduce between them instead of
  /// one each. Whether it changed anything (the layouts are then redone).
  bool regroupNorm(func::FuncOp func) {
    SqrtOp sqrt;
    func.walk([&](SqrtOp s) {
      if (s->hasAttr(kGlobalGradNormAttr))
        sqrt = s;
    });
    if (!sqrt)
      return false;
    SmallVector<Value> leaves;
    SmallVector<Operation *> adds;
    std::function<void(Value)> collect = [&](Value v) {
      auto add = v.getDefiningOp<AddOp>();
      if (!add || !v.hasOneUse()) {
        leaves.push_back(v);
        return;
      }
      adds.push_back(add);
      collect(add.getLhs());
      collect(add.getRhs());
    };
    collect(sqrt.getX());
    SmallVector<Value> partial, whole;
    for (Value v : leaves)
      (layoutOf(v).isPartial() ? partial : whole).push_back(v);
    if (partial.size() < 2)
      return false;
    OpBuilder b(sqrt);
    auto sum = [&](ArrayRef<Value> terms) {
      Value total = terms.front();
      for (Value t : terms.drop_front())
        total = b.create<AddOp>(sqrt.getLoc(), total, t);
      return total;
    };
    Value total = sum(partial);
    if (!whole.empty())
      total = b.create<AddOp>(sqrt.getLoc(), sum(whole), total);
    sqrt.getXMutable().assign(total);
    for (Operation *add : adds)
      add->dropAllUses(), add->erase();
    return true;
  }

  /// A function returns whole values, but for logits cut along the
  /// vocabulary (eval's, cut along their last dimension): those stay cut,
  /// so that eval never holds B x S x V (the sampler gathers the one row
  /// it draws from).
  static SmallVector<Sharding> returnedAs(func::ReturnOp ret,
                                          ArrayRef<Sharding> in) {
    SmallVector<Sharding> want(in.size());
    for (auto [i, s] : llvm::enumerate(in)) {
      auto t = dyn_cast<RankedTensorType>(ret.getOperand(i).getType());
      if (t && s.isSplit() && s.blocks == 1 && s.dim == t.getRank() - 1)
        want[i] = s;
    }
    return want;
  }

  /// The rule for `op`, with the variables' layouts for loads and stores
  /// and whole results for returns (returnedAs).
  FailureOr<OpLayout> layoutAt(Operation *op, ArrayRef<Sharding> in) {
    if (auto load = dyn_cast<LoadOp>(op))
      return OpLayout{{}, {variableLayout(load.getName())}};
    if (auto store = dyn_cast<StoreOp>(op))
      return OpLayout{{variableLayout(store.getName())}, {}};
    if (auto ret = dyn_cast<func::ReturnOp>(op))
      return OpLayout{returnedAs(ret, in), {}};
    std::string why;
    FailureOr<OpLayout> l = shard::layoutOf(op, in, rules, why);
    if (failed(l))
      return op->emitError("ds-shard: ")
             << op->getName() << " cannot run tensor-parallel: " << why;
    return l;
  }

  /// `v` (laid out as `have`, its type already one rank's) made `want` for
  /// `user`, its first user that needs it so: a partial sum all-reduced
  /// (whole) or reduce-scattered (token-cut), a token-cut value
  /// all-gathered, a whole one cut to this rank's part. The token layouts
  /// are contiguous parts, so each is a flat collective between two
  /// reshapes. The collective starts right after `v` is computed and is
  /// waited for right before `user`: the ops between (a column-parallel
  /// layer's weight gradient after its input gradient) run under it.
  Value convert(OpBuilder &b, Value v, const Sharding &have,
                const Sharding &want, Operation *user) {
    b.setInsertionPointAfterValue(v);
    Location loc = v.getLoc();
    auto type = cast<RankedTensorType>(v.getType());
    auto tensorGroup = [&](Operation *c) {
      c->setAttr(dist::kTensorGroupAttr, b.getUnitAttr());
      return c->getResult(0);
    };
    auto waitBeforeUser = [&](Value started) {
      b.setInsertionPoint(user);
      return b.create<dist::WaitOp>(loc, started).getResult();
    };
    if (have.isPartial() && want.isReplicated())
      return waitBeforeUser(tensorGroup(
          b.create<dist::AllReduceOp>(loc, v, b.getF64FloatAttr(1.0))));
    const int64_t parts = tensorParallel;
    auto flat = [&](int64_t n) {
      return RankedTensorType::get({n}, type.getElementType());
    };
    const int64_t n = type.getNumElements();
    Value x = b.create<ReshapeOp>(loc, flat(n), v);
    RankedTensorType to = type;
    if (want.isTokens()) { // from partial or whole: this rank's part
      to = shard::localType(type, want, parts);
      if (have.isPartial())
        x = waitBeforeUser(tensorGroup(b.create<dist::ReduceScatterOp>(
            loc, flat(n / parts), x, b.getF64FloatAttr(1.0),
            b.getI64IntegerAttr(parts))));
      else
        x = tensorGroup(b.create<dist::ShardOp>(loc, flat(n / parts), x,
                                                b.getI64IntegerAttr(parts)));
    } else { // token-cut to whole
      SmallVector<int64_t> shape(type.getShape());
      shape[have.dim] *= parts;
      to = RankedTensorType::get(shape, type.getElementType());
      x = waitBeforeUser(tensorGroup(b.create<dist::AllGatherOp>(
          loc, flat(n * parts), x, b.getI64IntegerAttr(parts))));
    }
    return b.create<ReshapeOp>(loc, to, x);
  }

  /// A dropout on a token-cut activation draws the mask of its part of the
  /// whole (ds.dropout's parts): the one rank would.
  void markDropoutPart(Operation &op) {
    auto d = dyn_cast<DropoutOp>(op);
    Sharding s = d ? layoutOf(d.getResult()) : Sharding();
    if (!s.isTokens())
      return;
    OpBuilder b(d);
    d.setPartsAttr(b.getI64IntegerAttr(tensorParallel));
    d.setPartDimAttr(b.getI64IntegerAttr(s.dim));
  }

  void rewrite(ModuleOp module) {
    OpBuilder b(module.getContext());
    for (auto var : module.getOps<VariableOp>()) {
      Sharding s = variableLayout(var.getSymName());
      if (!s.isSplit())
        continue;
      var.setTypeAttr(TypeAttr::get(
          shard::localType(var.getTensorType(), s, tensorParallel)));
      var->setAttr(dist::kTensorSplitAttr,
                   b.getDenseI64ArrayAttr({s.dim, s.blocks}));
      // A projection's rows cut by heads hold their share of the heads.
      if (auto heads = var->getAttrOfType<IntegerAttr>(kAttentionHeadsAttr)) {
        if (s.dim == 0 && heads.getInt() % tensorParallel == 0)
          var->setAttr(kAttentionHeadsAttr,
                       b.getI64IntegerAttr(heads.getInt() / tensorParallel));
        else
          var->removeAttr(kAttentionHeadsAttr);
      }
    }
    // Each value converted once per layout it is needed in.
    DenseMap<std::pair<Value, unsigned>, Value> converted;
    // Ops replaced, erased once nothing refers to their values: an erased
    // value's storage may be reused by a new one that the maps would
    // mistake for it.
    SmallVector<Operation *> replaced;
    for (auto func : module.getOps<func::FuncOp>()) {
      shard::VocabParallelLoss vocabLoss(tensorParallel);
      for (Operation &op : llvm::make_early_inc_range(func.front())) {
        for (auto [i, want] : llvm::enumerate(needs.lookup(&op))) {
          Value v = op.getOperand(i);
          Sharding have = layoutOf(v);
          if (have == want || relaid.contains(v))
            continue;
          unsigned key = want.isTokens() ? 1 + unsigned(want.dim) : 0;
          Value &done = converted[{v, key}];
          if (!done)
            done = convert(b, v, have, want, &op);
          op.setOperand(i, done);
        }
        markDropoutPart(op);
        markVocabularyPart(op);
        localizeResults(b, op);
        if (isa<CrossEntropyOp, CrossEntropyGradOp>(op) &&
            layoutOf(op.getOperand(0)).isSplit()) {
          values[vocabLoss.rewrite(&op)] = layoutOf(op.getResult(0));
          replaced.push_back(&op);
        }
      }
    }
    for (Operation *op : replaced)
      op->erase();
    // A function returning a cut value returns the rank's part.
    for (auto func : module.getOps<func::FuncOp>()) {
      Operation *ret = func.front().getTerminator();
      func.setType(FunctionType::get(module.getContext(),
                                     func.getArgumentTypes(),
                                     ret->getOperandTypes()));
    }
    module->setAttr(dist::kTensorParallelAttr,
                    b.getI64IntegerAttr(tensorParallel));
  }

  /// A lookup in (or the cotangent of) a table cut along its rows works on
  /// the rank's rows of the whole (ds.embedding's and embedding_grad's
  /// parts).
  void markVocabularyPart(Operation &op) {
    OpBuilder b(&op);
    if (auto e = dyn_cast<EmbeddingOp>(op);
        e && layoutOf(e.getTable()).isSplit())
      e.setPartsAttr(b.getI64IntegerAttr(tensorParallel));
    if (auto g = dyn_cast<EmbeddingGradOp>(op);
        g && layoutOf(g.getResult()).isSplit()) {
      g.setPartsAttr(b.getI64IntegerAttr(tensorParallel));
      g.setVocabSizeAttr(
          b.getI64IntegerAttr(g.getVocabSize() / tensorParallel));
    }
  }

  /// Each result's type (and ds.split's sizes) made one rank's part.
  void localizeResults(OpBuilder &b, Operation &op) {
    for (Value r : op.getResults()) {
      Sharding s = layoutOf(r);
      if (auto t = dyn_cast<RankedTensorType>(r.getType()))
        r.setType(shard::localType(t, s, tensorParallel));
    }
    if (auto c = dyn_cast<ConstantOp>(op); c && relaid.contains(c)) {
      auto dense = cast<DenseElementsAttr>(c.getValue());
      c.setValueAttr(
          dense.resizeSplat(cast<ShapedType>(c.getResult().getType())));
    }
    if (auto split = dyn_cast<SplitOp>(op)) {
      Sharding s = layoutOf(split.getResult(0));
      if (s.isSplit() && s.dim == int64_t(split.getAxis())) {
        SmallVector<int64_t> sizes;
        for (int64_t n : split.getSizes())
          sizes.push_back(n / tensorParallel);
        split.setSizes(sizes);
      }
    }
  }
};

} // namespace
