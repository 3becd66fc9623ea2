//===- RefMuon.cpp - Muon in float64 --------------------------------------===//
//
// The reference for ds.muon and the kernels it expands into
// (ds.muon_momentum, the Newton-Schulz iteration, ds.muon_apply):
// DeepSpeed 0.19.8's muon_update with the standard iteration, computed in
// double throughout (DeepSpeed runs it in bf16 or fp16 on accelerators;
// its `gram` method is the same iteration in exact arithmetic).
//
//===----------------------------------------------------------------------===//
#include "runtime/reference/RefFail.h"
#include "runtime/reference/RefKernels.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace dsc::ref {
namespace {

using detail::fail;

/// Row-major r x c matrices in double.
struct Matrix {
  int64_t rows, cols;
  std::vector<double> v;
  Matrix(int64_t r, int64_t c) : rows(r), cols(c), v(size_t(r * c), 0.0) {}
  double &at(int64_t i, int64_t j) { return v[size_t(i * cols + j)]; }
  double at(int64_t i, int64_t j) const { return v[size_t(i * cols + j)]; }
};

/// a b^T when `transB`, else a b.
Matrix product(const Matrix &a, const Matrix &b, bool transB) {
  const int64_t n = transB ? b.rows : b.cols;
  Matrix out(a.rows, n);
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < a.cols; ++k)
        sum += a.at(i, k) * (transB ? b.at(j, k) : b.at(k, j));
      out.at(i, j) = sum;
    }
  return out;
}

Matrix transposed(const Matrix &m) {
  Matrix out(m.cols, m.rows);
  for (int64_t i = 0; i < m.rows; ++i)
    for (int64_t j = 0; j < m.cols; ++j)
      out.at(j, i) = m.at(i, j);
  return out;
}

} // namespace

double muonFactor(const Shape &shape, int64_t heads) {
  if (shape.empty() || shape[0] <= 0 || heads <= 0)
    return 1;
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  const double rows = double(shape[0] / heads), cols = double(n / shape[0]);
  return rows > cols ? std::sqrt(rows / cols) : 1.0;
}

Result<UpdateState> muonMomentum(const Tensor &g, const Tensor &buf,
                                 double momentum, bool nesterov,
                                 double gradScale) {
  if (g.shape != buf.shape)
    return fail("muon_momentum: buf has shape ", shapeToString(buf.shape),
                " but grad has shape ", shapeToString(g.shape));
  UpdateState out{buf, Tensor(g.shape)};
  if (!std::isfinite(gradScale))
    return out;
  for (size_t i = 0; i < g.data.size(); ++i) {
    const double gs = g.data[i] * gradScale;
    const double b = buf.data[i] + (1 - momentum) * (gs - buf.data[i]);
    out.p.data[i] = b;
    out.state.data[i] = nesterov ? gs + momentum * (b - gs) : b;
  }
  return out;
}

namespace {

/// The iteration on one rows x cols block of `data`, in place.
void iterate(double *data, int64_t rows, int64_t cols, int64_t steps) {
  Matrix x(rows, cols);
  x.v.assign(data, data + rows * cols);
  const bool tall = rows > cols;
  if (tall)
    x = transposed(x);
  double sq = 0;
  for (double e : x.v)
    sq += e * e;
  const double denom = std::sqrt(sq) + 1e-7;
  for (double &e : x.v)
    e /= denom;
  const double a = 3.4445, b = -4.7750, c = 2.0315;
  for (int64_t s = 0; s < steps; ++s) {
    Matrix A = product(x, x, /*transB=*/true);
    Matrix AA = product(A, A, false);
    Matrix B(A.rows, A.cols);
    for (size_t i = 0; i < B.v.size(); ++i)
      B.v[i] = b * A.v[i] + c * AA.v[i];
    Matrix BX = product(B, x, false);
    for (size_t i = 0; i < x.v.size(); ++i)
      x.v[i] = a * x.v[i] + BX.v[i];
  }
  if (tall)
    x = transposed(x);
  std::copy(x.v.begin(), x.v.end(), data);
}

} // namespace

Result<Tensor> newtonSchulz(const Tensor &u, int64_t steps, int64_t heads) {
  if (u.rank() < 2 || u.numel() <= 0)
    return fail("newton_schulz: needs a matrix, got shape ",
                shapeToString(u.shape));
  if (heads < 1 || u.shape[0] % heads != 0)
    return fail("newton_schulz: ", u.shape[0], " rows do not split into ",
                heads, " heads");
  const int64_t rows = u.shape[0] / heads, cols = u.numel() / u.shape[0];
  Tensor out = u;
  for (int64_t h = 0; h < heads; ++h)
    iterate(out.data.data() + h * rows * cols, rows, cols, steps);
  return out;
}

Result<Tensor> muonApply(const Tensor &p, const Tensor &ortho, double lr,
                         double weightDecay, double factor, double gradScale) {
  if (p.shape != ortho.shape)
    return fail("muon_apply: ortho has shape ", shapeToString(ortho.shape),
                " but param has shape ", shapeToString(p.shape));
  Tensor out = p;
  if (!std::isfinite(gradScale))
    return out;
  for (size_t i = 0; i < p.data.size(); ++i)
    out.data[i] =
        p.data[i] * (1 - lr * weightDecay) - lr * factor * ortho.data[i];
  return out;
}

Result<UpdateState> muon(const Tensor &p, const Tensor &g, const Tensor &buf,
                         double lr, double momentum, double weightDecay,
                         bool nesterov, int64_t nsSteps, double gradScale,
                         int64_t heads) {
  if (p.shape != g.shape)
    return fail("muon: grad has shape ", shapeToString(g.shape),
                " but param has shape ", shapeToString(p.shape));
  auto moved = muonMomentum(g, buf, momentum, nesterov, gradScale);
  if (!moved)
    return Error{moved.error};
  if (!std::isfinite(gradScale))
    return UpdateState{p, buf};
  auto ortho = newtonSchulz(moved.value.state, nsSteps, heads);
  if (!ortho)
    return Error{ortho.error};
  auto next = muonApply(p, ortho.value, lr, weightDecay,
                        muonFactor(p.shape, heads), gradScale);
  if (!next)
    return Error{next.error};
  return UpdateState{next.value, moved.value.p};
}

} // namespace dsc::ref
