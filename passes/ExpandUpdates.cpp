//===- ExpandUpdates.cpp - composite optimizer updates as kernels --------===//
//
// ds.muon is one update for every phase before this one (ZeRO, offload and
// checkpoints see an update with one state, like SGD's) but no kernel: its
// Newton-Schulz iteration is a handful of GEMMs per step, which the
// backends already run well. Here it becomes
//
//   ds.muon_momentum            buf' and the direction u
//   the iteration on u          ds.matmul, ds.mul, ds.add (MuonIteration.h)
//   ds.muon_apply               p' from p and the orthogonalized u
//
// Rows are the parameter's first dimension, columns the rest.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "passes/MuonIteration.h"

#include "dialects/dist/DistOps.h"
#include "dialects/ds/DsOps.h"
#include "dialects/ds/DsUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::ds {
#define GEN_PASS_DEF_DSEXPANDUPDATES
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

void expandMuon(MuonOp op) {
  OpBuilder b(op);
  const bool host = dist::isOnHost(op);
  auto type = cast<RankedTensorType>(op.getParam().getType());
  auto moved = b.create<MuonMomentumOp>(
      op.getLoc(), TypeRange{type, type}, op.getGrad(), op.getBuf(),
      op.getScale(), op.getMomentumAttr(), op.getNesterovAttr());
  if (host)
    moved->setAttr(dist::kHostAttr, b.getUnitAttr());
  // Each head's block of rows is a matrix of its own (per_head_muon).
  const int64_t heads = op.getHeads(), rows = type.getDimSize(0) / heads;
  const int64_t cols = type.getNumElements() / type.getDimSize(0);
  Value u = moved.getDirection();
  auto matrices =
      heads == 1
          ? RankedTensorType::get({rows, cols}, type.getElementType())
          : RankedTensorType::get({heads, rows, cols}, type.getElementType());
  if (matrices.getShape() != type.getShape())
    u = b.create<ReshapeOp>(op.getLoc(), matrices, u);
  Value ortho = buildNewtonSchulz(b, op.getLoc(), u, op.getNsSteps(), host);
  if (matrices.getShape() != type.getShape())
    ortho = b.create<ReshapeOp>(op.getLoc(), type, ortho);
  auto apply = b.create<MuonApplyOp>(
      op.getLoc(), type, op.getParam(), ortho, op.getLr(), op.getScale(),
      op.getWeightDecayAttr(), b.getF64FloatAttr(muonAspectFactor(rows, cols)));
  if (host)
    apply->setAttr(dist::kHostAttr, b.getUnitAttr());
  op.getNewParam().replaceAllUsesWith(apply.getResult());
  op.getNewBuf().replaceAllUsesWith(moved.getNewBuf());
  op.erase();
}

struct ExpandUpdatesPass : ds::impl::DsExpandUpdatesBase<ExpandUpdatesPass> {
  void runOnOperation() override {
    SmallVector<MuonOp> muons;
    getOperation().walk([&](MuonOp op) { muons.push_back(op); });
    for (MuonOp op : muons)
      expandMuon(op);
  }
};

} // namespace
