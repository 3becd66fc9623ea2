//===- Eval.cpp - the forward-only program @eval -------------------------===//
//
// @eval(tokens, targets) -> (loss, logits): @forward (or @forward_eval, the
// model built at another batch by dsc) with dropout off (each
// ds.dropout replaced by its input), for held-out loss and sampling (the
// logits when the loss is a ds.cross_entropy). Each @forward_sample_<T>
// (dsc's one-row copies of a built-in model) becomes
// @sample_<T>(tokens, position) -> logits [1, 1, V] the same way, its loss
// dropped and its LM head run on the row at `position` alone. Later
// phases treat them as they treat @micro_step's forward half: ds-precision
// computes them in 16 bits, ZeRO-3 gathers their parameters per window, the
// plan lowers them to the programs `eval` and `sample_<T>`.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "runtime/plan/ProgramNames.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSEVAL
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
namespace plan = dsc::plan;

namespace {

struct EvalPass : ds::impl::DsEvalBase<EvalPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(plan::kForwardFunction);
    if (!forward) {
      module.emitError("ds-eval: no @forward");
      return signalPassFailure();
    }
    if (module.lookupSymbol(plan::kEvalProgram)) {
      module.emitError("ds-eval: @eval already exists");
      return signalPassFailure();
    }
    // dsc --eval-micro-batch-size builds the model again at that batch as
    // @forward_eval: that graph becomes @eval.
    func::FuncOp eval;
    if (auto other =
            module.lookupSymbol<func::FuncOp>(plan::kForwardEvalFunction)) {
      eval = other;
      SymbolTable(module).setSymbolName(eval, plan::kEvalProgram);
    } else {
      eval = forward.clone();
      eval.setSymName(plan::kEvalProgram);
      SymbolTable(module).insert(eval, std::next(forward->getIterator()));
    }
    withoutDropout(eval);
    // A loss from ds.cross_entropy also returns its logits, for sampling.
    auto ret = cast<func::ReturnOp>(eval.front().getTerminator());
    if (auto ce = ret.getNumOperands() == 1
                      ? ret.getOperand(0).getDefiningOp<CrossEntropyOp>()
                      : CrossEntropyOp()) {
      ret->insertOperands(1, ce.getLogits());
      eval.setType(FunctionType::get(
          module.getContext(), eval.getFunctionType().getInputs(),
          {ret.getOperand(0).getType(), ce.getLogits().getType()}));
    }
    SmallVector<func::FuncOp> sampling;
    for (auto f : module.getOps<func::FuncOp>())
      if (plan::isSampleForward(f.getSymName()))
        sampling.push_back(f);
    for (func::FuncOp f : sampling)
      if (failed(makeSampleProgram(module, f)))
        return signalPassFailure();
  }

  static void withoutDropout(func::FuncOp f) {
    f.walk([](DropoutOp d) {
      d.getResult().replaceAllUsesWith(d.getX());
      d.erase();
    });
  }

  /// @forward_sample_<T>(tokens, targets) -> loss becomes
  /// @sample_<T>(tokens) -> logits (headAtOnePosition then adds the
  /// position); a forward whose loss is not a
  /// cross-entropy has no logits to sample from and is dropped.
  static LogicalResult makeSampleProgram(ModuleOp module, func::FuncOp f) {
    std::string name = std::string(plan::kSampleProgramPrefix) +
                       std::to_string(plan::sampleLength(f.getSymName()));
    auto ret = cast<func::ReturnOp>(f.front().getTerminator());
    auto ce = ret.getNumOperands() == 1
                  ? ret.getOperand(0).getDefiningOp<CrossEntropyOp>()
                  : CrossEntropyOp();
    if (!ce || !ce->hasOneUse()) {
      f.erase();
      return success();
    }
    if (module.lookupSymbol(name))
      return f.emitError("ds-eval: @") << name << " already exists";
    SymbolTable(module).setSymbolName(f, name);
    withoutDropout(f);
    Value logits = ce.getLogits();
    ret->setOperands(logits);
    ce.erase();
    if (f.getNumArguments() != 2 || !f.getArgument(1).use_empty())
      return f.emitError("ds-eval: @")
             << name << " reads its targets beyond the loss";
    f.eraseArgument(1);
    if (Value row = headAtOnePosition(f, logits)) {
      ret->setOperands(row);
      eraseIfUnused(logits.getDefiningOp());
      logits = row;
    }
    f.setType(FunctionType::get(module.getContext(),
                                f.getFunctionType().getInputs(),
                                {logits.getType()}));
    return success();
  }

  /// The sampler reads one position's logits, so a head `matmul(h, W)`
  /// (+ a bias) over h [1, T, C] runs on that row alone: h's row at a new
  /// argument, the position [1] (i32), gathered by a ds.embedding of h as
  /// a [T, C] table, gives logits [1, 1, V]. At GPT-2's vocabulary the head
  /// is a third of a position's FLOPs. Null when the logits are not such a
  /// head (the program then returns every position's).
  static Value headAtOnePosition(func::FuncOp f, Value logits) {
    Operation *def = logits.getDefiningOp();
    auto add = dyn_cast_or_null<AddOp>(def);
    auto matmul = add ? add.getLhs().getDefiningOp<MatmulOp>()
                      : dyn_cast_or_null<MatmulOp>(def);
    if (!matmul || matmul.getTransposeLhs() || !matmul->hasOneUse())
      return {};
    auto h = cast<RankedTensorType>(matmul.getLhs().getType());
    auto w = cast<RankedTensorType>(matmul.getRhs().getType());
    if (h.getRank() != 3 || h.getDimSize(0) != 1 || w.getRank() != 2 ||
        (add && cast<RankedTensorType>(add.getRhs().getType()).getRank() != 1))
      return {};
    const int64_t t = h.getDimSize(1), c = h.getDimSize(2);
    Location loc = matmul.getLoc();
    OpBuilder b(matmul);
    auto i32 = b.getI32Type();
    const unsigned index = f.getNumArguments();
    f.insertArgument(index, RankedTensorType::get({1}, i32), DictionaryAttr(),
                     loc);
    Value pos = f.getArgument(index);
    Value table = b.create<ReshapeOp>(
        loc, RankedTensorType::get({t, c}, h.getElementType()),
        matmul.getLhs());
    Value row = b.create<EmbeddingOp>(loc, table, pos);
    row = b.create<ReshapeOp>(
        loc, RankedTensorType::get({1, 1, c}, h.getElementType()), row);
    Value head =
        b.create<MatmulOp>(loc, row, matmul.getRhs(),
                           /*transpose_lhs=*/false, matmul.getTransposeRhs());
    if (add) {
      b.setInsertionPoint(add);
      head = b.create<AddOp>(add.getLoc(), head, add.getRhs());
    }
    return head;
  }

  static void eraseIfUnused(Operation *op) {
    while (op && op->use_empty()) {
      Operation *next = nullptr;
      if (auto add = dyn_cast<AddOp>(op))
        next = add.getLhs().getDefiningOp();
      op->erase();
      op = next;
    }
  }
};

} // namespace
