//===- Widen.cpp - a ds module in float64, for exact gradient checks ------===//

#include "compiler/interpreter/Widen.h"

#include "dialects/ds/DsOps.h"
#include "runtime/plan/ProgramNames.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Verifier.h"

using namespace mlir;
using namespace mlir::ds;

namespace dsc {

/// `type` with f32 elements replaced by f64; anything else unchanged.
static Type widen(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.getElementType().isF32())
    return type;
  return RankedTensorType::get(tensor.getShape(),
                               Float64Type::get(type.getContext()));
}

/// Rewrites every f32 tensor of `module` to f64: variables, function
/// signatures and block arguments, op results and constant values. @forward
/// then casts its loss back to f32, as the input contract requires.
LogicalResult widenToF64(ModuleOp module) {
  for (auto var : module.getOps<VariableOp>())
    var.setTypeAttr(TypeAttr::get(widen(var.getType())));
  for (auto func : module.getOps<func::FuncOp>()) {
    SmallVector<Type> inputs, results;
    for (Type t : func.getFunctionType().getInputs())
      inputs.push_back(widen(t));
    for (Type t : func.getFunctionType().getResults())
      results.push_back(widen(t));
    func.setFunctionType(
        FunctionType::get(module.getContext(), inputs, results));
    for (BlockArgument arg : func.getArguments())
      arg.setType(widen(arg.getType()));
  }
  module.walk([](Operation *op) {
    for (OpResult r : op->getResults())
      r.setType(widen(r.getType()));
    auto constant = dyn_cast<ConstantOp>(op);
    if (!constant)
      return;
    auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
    if (!dense || !dense.getElementType().isF32())
      return;
    SmallVector<double> values;
    for (const APFloat &v : dense.getValues<APFloat>())
      values.push_back(v.convertToDouble());
    constant.setValueAttr(DenseElementsAttr::get(
        cast<ShapedType>(widen(dense.getType())), ArrayRef<double>(values)));
  });

  auto forward = module.lookupSymbol<func::FuncOp>(plan::kForwardFunction);
  if (!forward)
    return failure();
  auto ret = cast<func::ReturnOp>(forward.front().getTerminator());
  OpBuilder b(ret);
  auto f32Scalar = RankedTensorType::get({}, b.getF32Type());
  Value loss = b.create<CastOp>(ret.getLoc(), f32Scalar, ret.getOperand(0));
  ret->setOperand(0, loss);
  forward.setFunctionType(FunctionType::get(
      module.getContext(), forward.getFunctionType().getInputs(), {f32Scalar}));
  return verify(module);
}

} // namespace dsc
