//===- ExpandUpdates.cpp - composite optimizer updates as kernels --------===//
//
// ds.muon is one update for every phase before this one (ZeRO, offload and
// checkpoints see an update with one state, like SGD's) but no kernel: its
// Newton-Schulz iteration is a handful of GEMMs per step, which the
// backends already run well. Here it becomes
//
//   ds.muon_momentum            buf' and the direction u
//   the iteration on u          ds.matmul, ds.mul, ds.add (RefMuon.cpp)
//   ds.muon_apply               p' from p and the orthogonalized u
//
// Rows are the parameter's first dimension, columns the rest. A tall
// matrix (rows > cols) iterates on A = X^T X, which is what the transposed
// iteration computes: for X^T, A' = X^T X and X^T' = a X^T + B X^T, whose
// transpose is a X + X B since B, a polynomial in the symmetric A, is
// symmetric.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/dist/DistOps.h"
#include "dialects/ds/DsOps.h"
#include "dialects/ds/DsUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <cmath>

namespace mlir::ds {
#define GEN_PASS_DEF_DSEXPANDUPDATES
#include "passes/Passes.h.inc"
} // namespace mlir::ds

using namespace mlir;
using namespace mlir::ds;

namespace {

/// The standard iteration's coefficients (DeepSpeed's
/// zeropower_via_newtonschulz5).
constexpr double kA = 3.4445, kB = -4.7750, kC = 2.0315;
/// Added to the Frobenius norm before dividing by it.
constexpr double kNormEps = 1e-7;

/// Builds ops at one place, each carrying `host` (dist.host) when set.
struct Emitter {
  OpBuilder &b;
  Location loc;
  bool host;

  template <typename Op, typename... Args> Value make(Args &&...args) {
    auto op = b.create<Op>(loc, std::forward<Args>(args)...);
    if (host)
      op->setAttr(dist::kHostAttr, b.getUnitAttr());
    return op->getResult(0);
  }
  Value scalar(double v) {
    return splat(b, loc, RankedTensorType::get({}, b.getF32Type()), v);
  }
  Value matmul(Value lhs, Value rhs, bool transposeLhs, bool transposeRhs) {
    auto op = b.create<MatmulOp>(loc, lhs, rhs, transposeLhs, transposeRhs);
    if (host)
      op->setAttr(dist::kHostAttr, b.getUnitAttr());
    return op.getResult();
  }
};

/// u / (|u|_F + 1e-7), then `steps` iterations; u is rows x cols.
Value newtonSchulz(Emitter &e, Value u, int64_t steps) {
  auto t = cast<RankedTensorType>(u.getType());
  const bool tall = t.getDimSize(0) > t.getDimSize(1);
  Value sq = e.make<MulOp>(u, u);
  Value sum = e.make<ReduceSumOp>(sq, ArrayRef<int64_t>{0, 1});
  Value norm = e.make<SqrtOp>(sum);
  Value denom = e.make<AddOp>(norm, e.scalar(kNormEps));
  Value x = e.make<DivOp>(u, denom);
  for (int64_t s = 0; s < steps; ++s) {
    // wide: A = X X^T, X' = a X + B X; tall: A = X^T X, X' = a X + X B.
    Value a = e.matmul(x, x, /*transposeLhs=*/tall, /*transposeRhs=*/!tall);
    Value aa = e.matmul(a, a, false, false);
    Value bMat = e.make<AddOp>(e.make<MulOp>(a, e.scalar(kB)),
                               e.make<MulOp>(aa, e.scalar(kC)));
    Value bx = tall ? e.matmul(x, bMat, false, false)
                    : e.matmul(bMat, x, false, false);
    x = e.make<AddOp>(e.make<MulOp>(x, e.scalar(kA)), bx);
  }
  return x;
}

void expandMuon(MuonOp op) {
  OpBuilder b(op);
  Emitter e{b, op.getLoc(), dist::isOnHost(op)};
  auto type = cast<RankedTensorType>(op.getParam().getType());
  auto moved = b.create<MuonMomentumOp>(
      op.getLoc(), TypeRange{type, type}, op.getGrad(), op.getBuf(),
      op.getScale(), op.getMomentumAttr(), op.getNesterovAttr());
  if (e.host)
    moved->setAttr(dist::kHostAttr, b.getUnitAttr());
  const int64_t rows = type.getDimSize(0);
  auto matrix = RankedTensorType::get({rows, type.getNumElements() / rows},
                                      type.getElementType());
  Value u = moved.getDirection();
  if (type.getRank() != 2)
    u = b.create<ReshapeOp>(op.getLoc(), matrix, u);
  Value ortho = newtonSchulz(e, u, op.getNsSteps());
  if (type.getRank() != 2)
    ortho = b.create<ReshapeOp>(op.getLoc(), type, ortho);
  // sqrt(max(1, rows / cols)), DeepSpeed's _aspect_ratio_scale.
  const double r = double(rows), c = double(matrix.getDimSize(1));
  auto apply =
      b.create<MuonApplyOp>(op.getLoc(), type, op.getParam(), ortho, op.getLr(),
                            op.getScale(), op.getWeightDecayAttr(),
                            b.getF64FloatAttr(r > c ? std::sqrt(r / c) : 1.0));
  if (e.host)
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
