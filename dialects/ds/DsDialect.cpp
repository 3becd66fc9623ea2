//===- DsDialect.cpp - ds dialect registration ----------------------------===//
#include "dialects/ds/DsOps.h"

using namespace mlir;
using namespace mlir::ds;

#include "dialects/ds/DsDialect.cpp.inc"
#include "dialects/ds/DsEnums.cpp.inc"
#include "dialects/ds/DsInterfaces.cpp.inc"

void DSDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/ds/DsOps.cpp.inc"
      >();
}

Operation *DSDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                          Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return builder.create<ConstantOp>(loc, elements);
}
