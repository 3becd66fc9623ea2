//===- FusedElementwise.cpp - ds.fused_elementwise: checks and program ---===//
//
// The verifier holds the body to what a backend can run per element, and
// getKernelAttributes writes the body as the program a plan carries
// (runtime/kernels/FusedProgram.h).
//
//===----------------------------------------------------------------------===//

#include "dialects/ds/FusedElementwise.h"
#include "dialects/ds/DsOps.h"
#include "dialects/ds/DsUtils.h"

#include "llvm/ADT/DenseMap.h"

using namespace mlir;
using namespace mlir::ds;
namespace fused = dsc::rt::fused;
using fused::Opcode;

std::optional<Opcode> mlir::ds::fusedOpcodeOf(Operation *op) {
  const fused::KernelOpcode *row =
      fused::kernelOpcodeOf(op->getName().getStringRef());
  if (!row)
    return std::nullopt;
  bool tanhForm = false;
  if (auto gelu = dyn_cast<GeluOp>(op))
    tanhForm = gelu.getApproximate() == GeluApproximation::tanh;
  else if (auto grad = dyn_cast<GeluGradOp>(op))
    tanhForm = grad.getApproximate() == GeluApproximation::tanh;
  return tanhForm ? row->tanhOp : row->op;
}

std::optional<fused::Rounding> mlir::ds::fusedRoundingOf(Type type) {
  fused::Rounding rounding;
  std::optional<dsc::DType> dtype =
      dtypeOfElement(cast<ShapedType>(type).getElementType());
  if (!dtype || !fused::roundingOf(*dtype, rounding))
    return std::nullopt;
  return rounding;
}

bool mlir::ds::isFusedInputShape(ArrayRef<int64_t> shape,
                                 ArrayRef<int64_t> groupShape) {
  return shape.size() <= groupShape.size() &&
         shape == groupShape.take_back(shape.size());
}

namespace {

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

} // namespace

bool mlir::ds::isFusedSum(Operation *op, ArrayRef<int64_t> groupShape) {
  auto sum = dyn_cast<ReduceSumOp>(op);
  if (!sum || sum.getKeepdim() || shapeOf(sum.getX()) != groupShape ||
      !fusedRoundingOf(sum.getResult().getType()))
    return false;
  ArrayRef<int64_t> axes = sum.getAxes();
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != int64_t(i))
      return false;
  return !axes.empty() &&
         shapeOf(sum.getResult()) == groupShape.drop_front(axes.size());
}

LogicalResult FusedElementwiseOp::verify() {
  Block &body = getBody().front();
  if (getNumResults() == 0 || getInputs().empty())
    return emitOpError("takes one input or more and gives one result or more");
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield || yield.getValues().getTypes() != getResultTypes())
    return emitOpError("body must yield values of the result types");
  for (Value v : yield.getValues())
    if (isa<BlockArgument>(v))
      return emitOpError("cannot yield an input");
  // The group's shape is its elementwise ops' (a sum's result is smaller).
  Operation *first = nullptr;
  for (Operation &op : body.without_terminator())
    if (!isa<ReduceSumOp>(op)) {
      first = &op;
      break;
    }
  if (!first || first->getNumResults() != 1)
    return emitOpError("body holds no elementwise op");
  ArrayRef<int64_t> group = shapeOf(first->getResult(0));
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("body takes ")
           << body.getNumArguments() << " arguments for " << getInputs().size()
           << " inputs";
  if (getInputs().size() + body.getOperations().size() - 1 >
      size_t(fused::kMaxValues))
    return emitOpError("holds more than ")
           << fused::kMaxValues << " values (inputs and body results)";
  for (auto [arg, in] : llvm::zip(body.getArguments(), getInputs())) {
    if (arg.getType() != in.getType())
      return emitOpError("body argument type ")
             << arg.getType() << " differs from its input's " << in.getType();
    if (!isFusedInputShape(shapeOf(in), group))
      return emitOpError("input of type ")
             << in.getType() << " is neither the group's shape nor its "
             << "trailing dims";
  }
  int sums = 0;
  for (Operation &op : body.without_terminator()) {
    if (isa<ReduceSumOp>(op)) {
      if (!isFusedSum(&op, group))
        return op.emitOpError("in a ds.fused_elementwise body must sum a "
                              "value of the group's shape over its leading "
                              "dims into an f32, f16 or bf16 tensor");
      if (++sums > 1)
        return op.emitOpError("is a ds.fused_elementwise body's second sum "
                              "(at most one)");
      if (llvm::any_of(op.getResult(0).getUsers(),
                       [&](Operation *u) { return u != yield; }))
        return op.emitOpError("in a ds.fused_elementwise body is read by "
                              "another op (only ds.yield may read a sum)");
      continue;
    }
    if (!fusedOpcodeOf(&op) || op.getNumResults() != 1)
      return op.emitOpError("cannot be in a ds.fused_elementwise body");
    if (shapeOf(op.getResult(0)) != group ||
        !fusedRoundingOf(op.getResult(0).getType()))
      return op.emitOpError("in a ds.fused_elementwise body must give an "
                            "f32, f16 or bf16 tensor of the group's shape");
  }
  return success();
}

void FusedElementwiseOp::getKernelAttributes(SmallVectorImpl<int64_t> &ints,
                                             SmallVectorImpl<double> &) {
  Block &body = getBody().front();
  llvm::DenseMap<Value, int> number;
  fused::Program program;
  program.numInputs = int(body.getNumArguments());
  for (BlockArgument arg : body.getArguments())
    number[arg] = int(arg.getArgNumber());
  for (Operation &op : body.without_terminator()) {
    fused::Instruction instr{isa<ReduceSumOp>(op) ? fused::Opcode::ReduceSum
                                                  : *fusedOpcodeOf(&op),
                             number.lookup(op.getOperand(0)), -1,
                             *fusedRoundingOf(op.getResult(0).getType())};
    if (fused::arityOf(instr.op) == 2)
      instr.b = number.lookup(op.getOperand(1));
    number[op.getResult(0)] = program.numInputs + int(program.code.size());
    program.code.push_back(instr);
  }
  for (Value v : body.getTerminator()->getOperands())
    program.outputs.push_back(number.lookup(v));
  std::vector<int64_t> encoded = fused::encode(program);
  ints.append(encoded.begin(), encoded.end());
}

double FusedElementwiseOp::getFlops() {
  double flops = 0;
  for (Operation &op : getBody().front().without_terminator())
    if (auto kernel = dyn_cast<KernelOpInterface>(op))
      flops += kernel.getFlops();
  return flops;
}
