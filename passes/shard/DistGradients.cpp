//===- DistGradients.cpp - reverse-mode rules of the forward's collectives ===//
//
// ds-ulysses puts dist.all_to_all (and its dist.wait), ds-pipeline-cut
// dist.transfer, into @forward before ds-autodiff runs, so autodiff needs
// their rules. The dist dialect does
// not depend on ds; the rules attach to its ops from here, as external
// models of ds's VJPOpInterface.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;

namespace {

/// rank r's block j becomes rank j's block r: a permutation that is its
/// own inverse, so its transpose (the gradient) is the same exchange.
struct AllToAllVJP
    : ds::VJPOpInterface::ExternalModel<AllToAllVJP, dist::AllToAllOp> {
  LogicalResult buildVJP(Operation *op, OpBuilder &b,
                         ArrayRef<Value> resultGrads, ArrayRef<bool> needed,
                         SmallVectorImpl<Value> &operandGrads) const {
    auto exchange = cast<dist::AllToAllOp>(op);
    if (!needed[0] || !resultGrads[0])
      return success();
    auto back = b.create<dist::AllToAllOp>(op->getLoc(), resultGrads[0],
                                           exchange.getWorldSizeAttr());
    back->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    operandGrads[0] = b.create<dist::WaitOp>(op->getLoc(), back.getResult());
    return success();
  }
};

/// The cotangent of a value read on another stage goes back to the stage
/// that made it.
struct TransferVJP
    : ds::VJPOpInterface::ExternalModel<TransferVJP, dist::TransferOp> {
  LogicalResult buildVJP(Operation *op, OpBuilder &b,
                         ArrayRef<Value> resultGrads, ArrayRef<bool> needed,
                         SmallVectorImpl<Value> &operandGrads) const {
    auto t = cast<dist::TransferOp>(op);
    if (needed[0] && resultGrads[0])
      operandGrads[0] = b.create<dist::TransferOp>(
          op->getLoc(), resultGrads[0], t.getToAttr(), t.getFromAttr());
    return success();
  }
};

/// The identity on values.
struct WaitVJP : ds::VJPOpInterface::ExternalModel<WaitVJP, dist::WaitOp> {
  LogicalResult buildVJP(Operation *, OpBuilder &, ArrayRef<Value> resultGrads,
                         ArrayRef<bool> needed,
                         SmallVectorImpl<Value> &operandGrads) const {
    if (needed[0])
      operandGrads[0] = resultGrads[0];
    return success();
  }
};

} // namespace

void mlir::ds::registerDistGradients(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, dist::DistDialect *) {
    dist::AllToAllOp::attachInterface<AllToAllVJP>(*ctx);
    dist::WaitOp::attachInterface<WaitVJP>(*ctx);
    dist::TransferOp::attachInterface<TransferVJP>(*ctx);
  });
}
