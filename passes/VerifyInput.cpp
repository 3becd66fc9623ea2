//===- VerifyInput.cpp - the input contract of a forward graph -----------===//
//
// Everything later phases assume about their input is checked here once,
// with messages a model author can act on (the frontend's fault, not the
// compiler's).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "runtime/plan/ProgramNames.h"

#include "llvm/Support/CheckedArithmetic.h"

#include <optional>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSVERIFYINPUT
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;
namespace plan = dsc::plan;

namespace {

bool isStatic(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  return !shaped || shaped.hasStaticShape();
}

/// A tensor's bytes, or none when they overflow or pass dsc's bound: plans
/// place buffers with 64-bit offsets, and every size computed from a shape
/// (FLOPs, gradients, shards) must stay exact.
constexpr uint64_t kMaxTensorBytes = uint64_t(1) << 44; // 16 TiB
std::optional<uint64_t> boundedBytes(ShapedType type) {
  uint64_t n = (type.getElementTypeBitWidth() + 7) / 8;
  for (int64_t d : type.getShape()) {
    if (d < 0)
      return std::nullopt;
    std::optional<uint64_t> next = llvm::checkedMulUnsigned(n, uint64_t(d));
    if (!next || *next > kMaxTensorBytes)
      return std::nullopt;
    n = *next;
  }
  return n;
}

/// dsrun's side of a training step: it writes token ids and target ids,
/// [micro-batch, sequence] int32 each, into @forward's two arguments
/// (runtime/tooling/Trainer.cpp binds them by position).
LogicalResult verifyDsrunInputs(func::FuncOp forward) {
  auto args = forward.getArgumentTypes();
  auto isIds = [](Type t) {
    auto ranked = dyn_cast<RankedTensorType>(t);
    return ranked && ranked.getRank() == 2 &&
           ranked.getElementType().isSignlessInteger(32);
  };
  if (args.size() == 2 && isIds(args[0]) && args[0] == args[1])
    return success();
  std::string types;
  llvm::raw_string_ostream os(types);
  llvm::interleaveComma(args, os);
  return forward.emitError("input contract: dsrun feeds @")
         << forward.getSymName()
         << " token ids and target ids, two tensor<BxTxi32> of one shape; "
            "it takes ("
         << types << ")";
}

struct VerifyInputPass : ds::impl::DsVerifyInputBase<VerifyInputPass> {
  using DsVerifyInputBase::DsVerifyInputBase;
  void runOnOperation() override {
    if (failed(verifyModule(getOperation())))
      return signalPassFailure();
    if (!dsrunInputs)
      return;
    for (StringRef name : {plan::kForwardFunction, plan::kForwardEvalFunction})
      if (auto f = getOperation().lookupSymbol<func::FuncOp>(name);
          f && failed(verifyDsrunInputs(f)))
        return signalPassFailure();
  }

  LogicalResult verifyModule(ModuleOp module) {
    bool ok = true;
    for (auto var : module.getOps<VariableOp>())
      if (var.getKind() != VariableKind::param) {
        var.emitError("input contract: variable @")
            << var.getSymName() << " is a '"
            << stringifyVariableKind(var.getKind())
            << "'; the input declares parameters only (dsc adds gradients "
               "and optimizer state)";
        ok = false;
      }

    auto forward = module.lookupSymbol<func::FuncOp>(plan::kForwardFunction);
    if (!forward)
      return module.emitError(
          "input contract: no `func.func @forward` (the function that "
          "returns the loss) in the module");
    if (forward.getBody().getBlocks().size() != 1)
      return forward.emitError("input contract: @forward must be a single "
                               "block (no control flow)");
    auto results = forward.getFunctionType().getResults();
    auto loss = results.size() == 1 ? dyn_cast<RankedTensorType>(results[0])
                                    : RankedTensorType();
    if (!loss || loss.getRank() != 0 || !loss.getElementType().isF32())
      return forward.emitError("input contract: @forward must return one "
                               "scalar loss of type tensor<f32>, returns ")
             << forward.getFunctionType().getResults();
    for (auto [i, arg] : llvm::enumerate(forward.getArguments()))
      if (!isStatic(arg.getType()) || !isa<RankedTensorType>(arg.getType())) {
        forward.emitError("input contract: argument #")
            << i << " of @forward has type " << arg.getType()
            << "; inputs must be tensors with static shapes";
        ok = false;
      }

    llvm::DenseMap<int64_t, DropoutOp> dropoutIds;
    bool readsParam = false;
    bool oversized = false;
    forward.walk([&](Operation *op) {
      if (isa<func::FuncOp, func::ReturnOp>(op))
        return;
      if (!isa<DSDialect>(op->getDialect())) {
        op->emitError("input contract: '")
            << op->getName()
            << "' is not a ds op; dsc can only train through ds ops";
        ok = false;
        return;
      }
      if (isa<StoreOp>(op)) {
        op->emitError("input contract: @forward must not write variables");
        ok = false;
      }
      readsParam |= isa<LoadOp>(op);
      for (Type t : op->getResultTypes()) {
        if (!isStatic(t)) {
          op->emitError("input contract: result type ")
              << t
              << " has a dynamic shape; export the model with static "
                 "shapes";
          ok = false;
        } else if (auto shaped = dyn_cast<ShapedType>(t);
                   shaped && !boundedBytes(shaped) && !oversized) {
          // The first only: every op after it is as large.
          op->emitError("input contract: result type ")
              << t << " is larger than dsc's " << kMaxTensorBytes
              << "-byte bound on a tensor";
          ok = false;
          oversized = true;
        }
      }
      if (auto dropout = dyn_cast<DropoutOp>(op)) {
        auto [it, inserted] = dropoutIds.try_emplace(dropout.getId(), dropout);
        if (!inserted) {
          dropout.emitError("input contract: dropout id ")
              << dropout.getId()
              << " is used twice; each dropout site needs its own id";
          ok = false;
        }
      }
    });
    if (ok && !readsParam)
      return forward.emitError(
          "input contract: the loss reads no parameter; nothing to train");
    return success(ok);
  }
};

} // namespace
