//===- LinearCrossEntropy.cpp - an LM head's loss and gradients in chunks -===//
//
// ds.linear_cross_entropy: chunk_rows rows of h at a time, their logits
// against the whole vocabulary by one sgemm into the chunk, each row's
// loss term and logit gradient in place (the same arithmetic as
// ds.cross_entropy and ds.cross_entropy_grad, Lookup.cpp), then dh's rows
// and dweight's share by two more sgemms, dweight summing the chunks in
// order. The loss sums its rows in the blocks ds.cross_entropy uses; the
// products have other shapes than the unfused ones (a BLAS may take
// another path for them), and dweight sums the chunks in order: close to
// the unfused ops, not bitwise.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/backends/cpu/FastMath.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace dsc::rt::cpu {
namespace {

// Every target in [0, V) or ignored; returns how many count.
bool countTargets(std::string &err, const TensorRef &targets, int64_t V,
                  int64_t ignore, int64_t &count) {
  count = 0;
  for (int64_t r = 0, n = targets.numel(); r < n; ++r) {
    const int64_t t = indexAt(targets, r);
    if (t == ignore)
      continue;
    if (t < 0 || t >= V)
      return fail(err, "target ", t, " at position ", r, " is outside [0, ", V,
                  ") and is not the ignore index ", ignore);
    ++count;
  }
  return true;
}

// One row of logits, replaced by its gradient coef (softmax - onehot(t));
// returns the row's loss term.
double lossAndGradRow(float *row, int64_t V, int64_t t, double coef) {
  const float mx = maxOf(row, V);
  const float xt = row[t];
  for (int64_t j = 0; j < V; ++j)
    row[j] = fm::exp(row[j] - mx);
  const double sum = sumOf(V, [&](int64_t j) { return double(row[j]); });
  const double et = row[t];
  const float scale = float(coef / sum);
  for (int64_t j = 0; j < V; ++j)
    row[j] *= scale;
  // p_t - 1 = -(sum - e_t) / sum, without cancellation.
  row[t] = float(-coef * ((sum - et) / sum));
  return double(mx) + std::log(sum) - double(xt);
}

} // namespace

bool linearCrossEntropyBody(const KernelArgs &a, std::string &err) {
  int64_t N, V, D, count;
  float g;
  const TensorRef &h = a.inputs[0], &weight = a.inputs[1];
  const TensorRef &targets = a.inputs[2];
  const int64_t ignore = a.intAttrs[0], R = a.intAttrs[1];
  if (!checkLinearCrossEntropy(err, a, N, V, D) ||
      !expectIndexDType(err, targets, "targets") ||
      !scalarOperand(err, a.inputs[3], "grad", g) ||
      !countTargets(err, targets, V, ignore, count))
    return false;
  if (std::max({R, V, D}) > blasIntMax())
    return fail(err, "a chunk of ", R, " x ", V, " x ", D,
                " exceeds the BLAS index range");
  float *dh = a.outputs[1].f32(), *dw = a.outputs[2].f32();
  float *chunk = a.outputs[3].f32();
  const float *hp = h.f32(), *wp = weight.f32();
  if (N > 0 && (V == 0 || D == 0)) {
    std::memset(dh, 0, size_t(N * D) * sizeof(float));
    std::memset(dw, 0, size_t(V * D) * sizeof(float));
  }
  if (N > 0 && V > 0 && D > 0 && !blasReady(err))
    return false;
  const double coef = count ? double(g) / double(count) : 0.0;
  std::vector<double> rowLoss(size_t(N), 0.0);
  for (int64_t c = 0; V > 0 && D > 0 && c < N / R; ++c) {
    const float *hc = hp + c * R * D;
    sgemm(false, true, R, V, D, 1.0f, hc, D, wp, D, 0.0f, chunk, V);
    parallelFor(
        R, std::max<int64_t>(1, 16384 / V), [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r) {
            float *row = chunk + r * V;
            const int64_t t = indexAt(targets, c * R + r);
            if (t == ignore)
              std::memset(row, 0, size_t(V) * sizeof(float));
            else
              rowLoss[size_t(c * R + r)] = lossAndGradRow(row, V, t, coef);
          }
        });
    sgemm(false, false, R, D, V, 1.0f, chunk, V, wp, D, 0.0f, dh + c * R * D,
          D);
    sgemm(true, false, V, D, R, 1.0f, chunk, V, hc, D, c ? 1.0f : 0.0f, dw, D);
  }
  // ds.cross_entropy's blocks of rows, each summed in order, then in order.
  const int64_t blockRows = std::max<int64_t>(8, (N + 63) / 64);
  double total = 0;
  for (int64_t b0 = 0; b0 < N; b0 += blockRows) {
    double part = 0;
    for (int64_t r = b0; r < std::min(N, b0 + blockRows); ++r)
      if (indexAt(targets, r) != ignore)
        part += rowLoss[size_t(r)];
    total += part;
  }
  *a.outputs[0].f32() = count ? float(total / double(count)) : 0.0f;
  return true;
}

} // namespace dsc::rt::cpu
