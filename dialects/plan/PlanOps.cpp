//===- PlanOps.cpp - the plan dialect and its verifiers -------------------===//
#include "dialects/plan/PlanOps.h"

#include "dialects/ds/DsUtils.h"

#include "runtime/kernels/KernelContract.h"
#include "runtime/kernels/KernelSignature.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <optional>
#include <vector>

using namespace mlir;
using namespace mlir::plan;

#include "dialects/plan/PlanDialect.cpp.inc"
#include "dialects/plan/PlanEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/plan/PlanAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/plan/PlanTypes.cpp.inc"

void PlanDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/plan/PlanAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/plan/PlanTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/plan/PlanOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "dialects/plan/PlanOps.cpp.inc"

namespace {

std::vector<dsc::DType> dtypesOf(ValueRange buffers) {
  std::vector<dsc::DType> out;
  for (Value b : buffers)
    // Plan_Buffer admits only element types dsc has a dtype for.
    out.push_back(*mlir::ds::dtypeOfElement(
        cast<MemRefType>(b.getType()).getElementType()));
  return out;
}

/// "one input" / "3 inputs".
std::string count(int n, StringRef what) {
  return (Twine(n) + " " + what + (n == 1 ? "" : "s")).str();
}

} // namespace

namespace {

/// The plan.storage `op` names, or an error on `op`.
LogicalResult checkStorage(Operation *op, FlatSymbolRefAttr storage,
                           SymbolTableCollection &symbols) {
  if (!symbols.lookupNearestSymbolFrom<StorageOp>(op, storage))
    return op->emitOpError("no plan.storage ") << storage;
  return success();
}

} // namespace

LogicalResult StorageOp::verify() {
  // I64Attr reads back unsigned: the signed values are the attributes'.
  if (int64_t size = getSizeAttr().getInt(); size < 0)
    return emitOpError("size must be >= 0, got ") << size;
  if (IntegerAttr offset = getOffsetAttr(); offset && offset.getInt() < 0)
    return emitOpError("offset must be >= 0, got ") << offset.getInt();
  if (std::optional<ArrayRef<int64_t>> live = getLive();
      live && (live->size() != 2 || (*live)[0] < 0 || (*live)[0] > (*live)[1]))
    return emitOpError("live must be [first, last] with 0 <= first <= last");
  // Lowering lays out what persists; only a transient waits for plan-place.
  if (!getTransient() && !getOffsetAttr())
    return emitOpError("persistent storage needs an offset (`at N`); only "
                       "transient storage is placed by plan-place");
  return success();
}

LogicalResult BufferOp::verify() {
  MemRefType type = getBuffer().getType();
  if (!type.hasStaticShape() || !type.getLayout().isIdentity())
    return emitOpError("needs a static shape and the identity layout, got ")
           << type;
  if (IntegerAttr offset = getViewOffsetAttr(); offset && offset.getInt() < 0)
    return emitOpError("view offset must be >= 0, got ") << offset.getInt();
  return success();
}

LogicalResult BufferOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return checkStorage(*this, getStorageAttr(), symbols);
}

LogicalResult ConstantOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return checkStorage(*this, getStorageAttr(), symbols);
}

LogicalResult VariableOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return checkStorage(*this, getStorageAttr(), symbols);
}

LogicalResult CallOp::verify() {
  const dsc::rt::KernelContract *contract =
      dsc::rt::findKernelContract(getKernel());
  if (!contract)
    return emitOpError("no kernel '") << getKernel() << "' is declared";
  struct Arity {
    int declared;
    size_t given;
    StringRef what;
  } arities[] = {
      {contract->numInputs, getIns().size(), "input"},
      {contract->numOutputs, getOuts().size(), "output"},
      {contract->numIntAttrs, getInts().size(), "int attribute"},
      {contract->numFloatAttrs, getFloats().size(), "float attribute"}};
  for (const Arity &a : arities)
    if (a.declared >= 0 && size_t(a.declared) != a.given)
      return emitOpError() << getKernel() << " takes "
                           << count(a.declared, a.what) << ", got " << a.given;
  std::vector<dsc::DType> in = dtypesOf(getIns()), out = dtypesOf(getOuts());
  const dsc::rt::DTypeList ins{in.data(), in.size()},
      outs{out.data(), out.size()};
  std::string variants;
  for (const dsc::rt::SignatureList &column : contract->columns)
    for (std::string_view sig : column) {
      if (dsc::rt::signatureMatches(sig, ins, outs))
        return success();
      variants += (variants.empty() ? "" : ", ") + std::string(sig);
    }
  return emitOpError() << getKernel() << " has no variant for "
                       << dsc::rt::dtypeSignature(ins, outs) << " (it has "
                       << variants << ")";
}
