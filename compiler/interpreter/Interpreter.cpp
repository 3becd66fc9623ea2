//===- Interpreter.cpp - runs ds functions on float64 tensors ------------===//
//
// The driver: variables, function arguments, the op-by-op walk of a function
// body, rounding to element types and the shape check of every result
// against its IR type (a mismatch is a bug in the IR or in a kernel, and is
// reported rather than carried on). The per-op kernel calls are in
// InterpreterOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "compiler/interpreter/Interpreter.h"

#include "dialects/ds/DsOps.h"
#include "runtime/rng/Philox.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/ErrorHandling.h"

#include <cmath>

using namespace mlir;
using namespace mlir::ds;

namespace dsc {
namespace {

ref::Shape shapeOf(Type type) {
  auto shape = cast<ShapedType>(type).getShape();
  return ref::Shape(shape.begin(), shape.end());
}

ref::InitKind initKindOf(InitKind kind) {
  switch (kind) {
  case InitKind::zeros:
    return ref::InitKind::Zeros;
  case InitKind::ones:
    return ref::InitKind::Ones;
  case InitKind::normal:
    return ref::InitKind::Normal;
  }
  llvm_unreachable("unknown InitKind");
}

/// Rounds `t` in place to the element type of `type` (a no-op for f64 and
/// integer types).
void roundTo(ref::Tensor &t, Type type) {
  std::optional<ref::DType> dtype =
      dtypeOf(cast<ShapedType>(type).getElementType());
  if (!dtype || *dtype == ref::DType::f64)
    return;
  for (double &v : t.data)
    v = ref::roundToDType(v, *dtype);
}

} // namespace

ref::Result<std::vector<ref::Tensor>>
evaluateFusedBody(Operation *op, llvm::ArrayRef<const ref::Tensor *> operands,
                  const EvalContext &context) {
  Block &body = op->getRegion(0).front();
  llvm::DenseMap<Value, const ref::Tensor *> values;
  for (auto [arg, t] : llvm::zip(body.getArguments(), operands))
    values[arg] = t;
  std::vector<ref::Tensor> computed;
  computed.reserve(body.getOperations().size());
  for (Operation &inner : body.without_terminator()) {
    SmallVector<const ref::Tensor *> in;
    for (Value v : inner.getOperands())
      in.push_back(values.lookup(v));
    auto out = evaluateOp(&inner, in, context);
    if (!out)
      return out;
    computed.push_back(std::move(out.value.front()));
    if (context.round)
      roundTo(computed.back(), inner.getResult(0).getType());
    values[inner.getResult(0)] = &computed.back();
  }
  std::vector<ref::Tensor> results;
  for (Value v : body.getTerminator()->getOperands())
    results.push_back(*values.lookup(v));
  return results;
}

namespace {

/// Checks a tensor handed to the interpreter from outside (an argument, a
/// variable) against the IR type it is read as; "" when it fits.
std::string checkFits(const ref::Tensor &t, Type type) {
  if (std::string problem = t.validate(); !problem.empty())
    return problem;
  ref::Shape expected = shapeOf(type);
  if (t.shape != expected)
    return "has shape " + ref::shapeToString(t.shape) + ", the IR expects " +
           ref::shapeToString(expected);
  if (cast<ShapedType>(type).getElementType().isIntOrIndex())
    for (double v : t.data)
      if (v != std::floor(v) || !std::isfinite(v))
        return "holds " + std::to_string(v) +
               " but its element type is an integer";
  return "";
}

} // namespace

Interpreter::Interpreter(ModuleOp module, uint64_t seed) : module(module) {
  context.seed = seed;
}

LogicalResult Interpreter::initVariables() {
  for (auto var : module.getOps<VariableOp>()) {
    StringRef name = var.getSymName();
    double stddev = var.getStd() ? var.getStd()->convertToDouble() : 0.0;
    uint32_t stream =
        rng::streamForName(std::string_view(name.data(), name.size()));
    ref::Result<ref::Tensor> value =
        ref::init(initKindOf(var.getInit()), shapeOf(var.getType()),
                  context.seed, stream, /*mean=*/0.0, stddev);
    if (!value)
      return var.emitError("interpreter: ") << value.error;
    if (context.round)
      roundTo(value.value, var.getType());
    state[name] = std::move(value.value);
  }
  return success();
}

bool Interpreter::hasVariable(StringRef name) const {
  return state.count(name) != 0;
}

ref::Tensor &Interpreter::variable(StringRef name) {
  auto it = state.find(name);
  if (it == state.end())
    llvm::report_fatal_error(llvm::Twine("interpreter: variable @") + name +
                             " has no value (not declared, or "
                             "initVariables() was not called)");
  return it->second;
}

LogicalResult Interpreter::run(StringRef name, ArrayRef<ref::Tensor> args,
                               std::vector<ref::Tensor> &results) {
  auto func = module.lookupSymbol<func::FuncOp>(name);
  if (!func)
    return module.emitError("interpreter: no func.func @") << name;
  if (func.isExternal() || !llvm::hasSingleElement(func.getBody()))
    return func.emitError("interpreter: @")
           << name << " must have a body of exactly one block";
  Block &body = func.front();
  if (args.size() != body.getNumArguments())
    return func.emitError("interpreter: @")
           << name << " takes " << body.getNumArguments() << " arguments, got "
           << args.size();

  llvm::DenseMap<Value, ref::Tensor> values;
  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    if (std::string problem = checkFits(args[i], arg.getType());
        !problem.empty())
      return func.emitError("interpreter: argument #")
             << i << " of @" << name << " " << problem;
    ref::Tensor t = args[i];
    if (context.round)
      roundTo(t, arg.getType());
    values[arg] = std::move(t);
  }

  for (Operation &op : body) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      results.clear();
      for (Value v : ret.getOperands())
        results.push_back(values.lookup(v));
      return success();
    }
    if (auto load = dyn_cast<LoadOp>(op)) {
      auto it = state.find(load.getName());
      if (it == state.end())
        return op.emitError("interpreter: variable @")
               << load.getName() << " has no value; call initVariables() first";
      if (std::string problem = checkFits(it->second, load.getType());
          !problem.empty())
        return op.emitError("interpreter: variable @")
               << load.getName() << " " << problem;
      ref::Tensor t = it->second;
      if (context.round)
        roundTo(t, load.getType());
      values[load.getResult()] = std::move(t);
      continue;
    }
    if (auto store = dyn_cast<StoreOp>(op)) {
      state[store.getName()] = values.lookup(store.getValue());
      continue;
    }

    SmallVector<const ref::Tensor *> operands;
    for (Value v : op.getOperands()) {
      auto it = values.find(v);
      if (it == values.end())
        return op.emitError("interpreter: an operand of '")
               << op.getName() << "' has no value (defined outside @" << name
               << "?)";
      operands.push_back(&it->second);
    }
    ref::Result<std::vector<ref::Tensor>> out =
        evaluateOp(&op, operands, context);
    if (!out) {
      StringRef message = out.error;
      if (message.starts_with("interpreter: "))
        return op.emitError(message);
      return op.emitError("interpreter: '")
             << op.getName() << "' failed: " << message;
    }
    if (out.value.size() != op.getNumResults())
      return op.emitError("interpreter: '")
             << op.getName() << "' produced " << out.value.size()
             << " values for " << op.getNumResults() << " results";
    for (auto [result, t] : llvm::zip(op.getResults(), out.value)) {
      ref::Shape expected = shapeOf(result.getType());
      if (t.shape != expected)
        return op.emitError("interpreter: '")
               << op.getName() << "' computed a result of shape "
               << ref::shapeToString(t.shape) << " for type "
               << result.getType();
      if (context.round)
        roundTo(t, result.getType());
      values[result] = std::move(t);
    }
  }
  return func.emitError("interpreter: @") << name << " has no func.return";
}

} // namespace dsc
