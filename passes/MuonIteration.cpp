//===- MuonIteration.cpp - Muon's Newton-Schulz iteration as ds ops -------===//
//
// A tall matrix (rows > cols) iterates on A = X^T X, which is what the
// transposed iteration computes: for X^T, A' = X^T X and X^T' = a X^T +
// B X^T, whose transpose is a X + X B since B, a polynomial in the
// symmetric A, is symmetric. So no transposes are needed.
//
//===----------------------------------------------------------------------===//

#include "passes/MuonIteration.h"

#include "dialects/dist/DistOps.h"
#include "dialects/ds/DsOps.h"
#include "dialects/ds/DsUtils.h"

#include <cmath>

namespace mlir::ds {
namespace {

/// The standard iteration's coefficients.
constexpr double kA = 3.4445, kB = -4.7750, kC = 2.0315;
/// Added to the Frobenius norm before dividing by it.
constexpr double kNormEps = 1e-7;

/// Builds ops at one place, each marked dist.host when `host`.
struct Emitter {
  OpBuilder &b;
  Location loc;
  bool host;

  Value mark(Operation *op) {
    if (host)
      op->setAttr(dist::kHostAttr, b.getUnitAttr());
    return op->getResult(0);
  }
  template <typename Op, typename... Args> Value make(Args &&...args) {
    return mark(b.create<Op>(loc, std::forward<Args>(args)...));
  }
  Value scalar(double v) {
    // Constants stay unmarked: ds-offload places them by their users.
    return splat(b, loc, RankedTensorType::get({}, b.getF32Type()), v);
  }
  Value matmul(Value lhs, Value rhs, bool transposeLhs, bool transposeRhs) {
    return mark(b.create<MatmulOp>(loc, lhs, rhs, transposeLhs, transposeRhs));
  }
};

} // namespace

Value buildNewtonSchulz(OpBuilder &b, Location loc, Value u, int64_t steps,
                        bool host) {
  Emitter e{b, loc, host};
  auto t = cast<RankedTensorType>(u.getType());
  const int64_t rank = t.getRank();
  const bool tall = t.getDimSize(rank - 2) > t.getDimSize(rank - 1);
  Value sq = e.make<MulOp>(u, u);
  // A batch keeps its norms' dimensions so each matrix divides by its own.
  Value sum =
      rank == 2 ? e.make<ReduceSumOp>(sq, ArrayRef<int64_t>{0, 1})
                : e.make<ReduceSumOp>(sq, ArrayRef<int64_t>{rank - 2, rank - 1},
                                      /*keepdim=*/true);
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

double muonAspectFactor(int64_t rows, int64_t cols) {
  return rows > cols ? std::sqrt(double(rows) / double(cols)) : 1.0;
}

} // namespace mlir::ds
