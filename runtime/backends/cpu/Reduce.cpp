//===- Reduce.cpp - reduce_sum, reduce_mean, reduce_max -------------------===//
//
// (x) -> out [axes...], axes strictly increasing; keepdim is read off the
// output's rank. After size-1 dims are dropped and neighbours of the same
// kind merged, x is [outer, R, inner] for most reductions (the bias
// gradient [B*T, C] -> [C] is R = B*T, inner = C): each output element sums
// a column of R values, in double, columns vectorized. Other patterns walk x
// once into double accumulators. Max propagates NaN.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/Convert.h"
#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/backends/cpu/Widening.h"
#include "runtime/core/Half.h"

#include <cmath>
#include <vector>

namespace dsc::rt::cpu {
namespace {

enum class Kind { Sum, Mean, Max };

float maxNan(float acc, float v) { return ((v > acc) | (v != v)) ? v : acc; }

// Row reduction of n contiguous values (a sum stays in double, in
// blockedSumOf's order: a fused group's sum adds its values so).
double reduceRow(Kind kind, const float *x, int64_t n) {
  if (kind != Kind::Max)
    return blockedSumOf(n, [&](int64_t j) { return double(x[j]); });
  float acc[16];
  for (int k = 0; k < 16; ++k)
    acc[k] = -HUGE_VALF;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int k = 0; k < 16; ++k)
      acc[k] = maxNan(acc[k], x[j + k]);
  float m = -HUGE_VALF;
  for (int k = 0; k < 16; ++k)
    m = maxNan(m, acc[k]);
  for (; j < n; ++j)
    m = maxNan(m, x[j]);
  return m;
}

/// x's dims with size-1 dims dropped and neighbours of the same kind
/// (reduced or kept) merged: sizes and kinds into `size` and `red`, the
/// first reduced one into `firstRed` (-1: none) and the reduced ones'
/// count into `numRed`; returns how many dims.
int mergeDims(const TensorRef &x, const bool reduced[kMaxRank],
              int64_t size[kMaxRank], bool red[kMaxRank], int &firstRed,
              int &numRed) {
  int r = 0;
  for (int d = 0; d < x.rank; ++d) {
    if (x.shape[d] == 1)
      continue;
    if (r > 0 && red[r - 1] == reduced[d]) {
      size[r - 1] *= x.shape[d];
    } else {
      size[r] = x.shape[d];
      red[r] = reduced[d];
      ++r;
    }
  }
  firstRed = -1;
  numRed = 0;
  for (int d = 0; d < r; ++d)
    if (red[d] && numRed++ == 0)
      firstRed = d;
  return r;
}

/// Column reductions of x viewed as [outer, R, inner]: out[o, c] reduces
/// x[o, 0..R, c] (a sum in double, in row order); threads own ranges of
/// (outer, column) outputs. `at(i)` reads x's element i as a float.
template <class At>
void reduceColumns(Kind kind, int64_t outer, int64_t R, int64_t inner,
                   double dscale, At at, float *yp) {
  parallelFor(outer * inner, columnReductionGrain(R),
              [&](int64_t b, int64_t e) {
                std::vector<double> acc;
                std::vector<float> mx;
                for (int64_t start = b; start < e;) {
                  const int64_t o = start / inner, c0 = start % inner;
                  const int64_t c1 = std::min(inner, c0 + (e - start));
                  const int64_t n = c1 - c0;
                  const int64_t base = o * R * inner + c0;
                  float *out = yp + o * inner + c0;
                  if (kind == Kind::Max) {
                    mx.assign(size_t(n), -HUGE_VALF);
                    for (int64_t i = 0; i < R; ++i)
                      for (int64_t c = 0; c < n; ++c)
                        mx[c] = maxNan(mx[c], at(base + i * inner + c));
                    std::copy(mx.begin(), mx.end(), out);
                  } else {
                    acc.assign(size_t(n), 0.0);
                    for (int64_t i = 0; i < R; ++i)
                      for (int64_t c = 0; c < n; ++c)
                        acc[c] += at(base + i * inner + c);
                    for (int64_t c = 0; c < n; ++c)
                      out[c] = float(acc[c] * dscale);
                  }
                  start += n;
                }
              });
}

bool reduceBody(Kind kind, const KernelArgs &a, std::string &err) {
  if (!expectAllF32(a, err))
    return false;
  const TensorRef &x = a.inputs[0], &y = a.outputs[0];
  bool reduced[kMaxRank];
  int64_t count;
  if (!checkReduce(a, reduced, count, err))
    return false;
  const float *xp = x.f32();
  float *yp = y.f32();
  const int64_t outN = y.numel();
  if (outN == 0)
    return true;
  const float scale = kind == Kind::Mean ? float(1.0 / double(count)) : 1.0f;
  const double dscale = kind == Kind::Mean ? 1.0 / double(count) : 1.0;
  if (count == 0) { // an empty reduction: the identity (mean: 0/0)
    float v = kind == Kind::Max   ? -HUGE_VALF
              : kind == Kind::Sum ? 0.0f
                                  : std::nanf("");
    std::fill(yp, yp + outN, v);
    return true;
  }
  // Merged dims (size, reduced), size-1 dims dropped.
  int64_t size[kMaxRank];
  bool red[kMaxRank];
  // [outer?, R, inner?] covers everything with one reduced block.
  int firstRed, numRed;
  const int r = mergeDims(x, reduced, size, red, firstRed, numRed);
  if (numRed == 0) { // nothing of size > 1 is reduced
    for (int64_t i = 0; i < outN; ++i)
      yp[i] = xp[i] * scale;
    return true;
  }
  if (numRed == 1) {
    const int64_t outer = firstRed == 1 ? size[0] : 1;
    const int64_t R = size[firstRed];
    const int64_t inner = firstRed + 1 < r ? size[firstRed + 1] : 1;
    if (inner == 1) {
      parallelFor(outer, std::max<int64_t>(1, 16384 / R),
                  [&](int64_t o0, int64_t o1) {
                    for (int64_t o = o0; o < o1; ++o) {
                      yp[o] = float(reduceRow(kind, xp + o * R, R) * dscale);
                    }
                  });
      return true;
    }
    reduceColumns(
        kind, outer, R, inner, dscale, [xp](int64_t i) { return xp[i]; }, yp);
    return true;
  }
  // General: walk x once, accumulating into its output element.
  int64_t outStride[kMaxRank];
  int64_t s = 1;
  for (int d = x.rank - 1; d >= 0; --d) {
    outStride[d] = reduced[d] ? 0 : s;
    if (!reduced[d])
      s *= x.shape[d];
  }
  std::vector<double> acc(static_cast<size_t>(outN), 0.0);
  std::vector<float> mx(kind == Kind::Max ? size_t(outN) : 0, -HUGE_VALF);
  int64_t idx[kMaxRank] = {}, off = 0;
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) {
    if (kind == Kind::Max)
      mx[size_t(off)] = maxNan(mx[size_t(off)], xp[i]);
    else
      acc[size_t(off)] += xp[i];
    for (int d = x.rank - 1; d >= 0; --d) {
      off += outStride[d];
      if (++idx[d] < x.shape[d])
        break;
      off -= outStride[d] * x.shape[d];
      idx[d] = 0;
    }
  }
  for (int64_t i = 0; i < outN; ++i)
    yp[i] = kind == Kind::Max ? mx[size_t(i)] : float(acc[size_t(i)] * dscale);
  return true;
}

/// The 16-bit column of the reductions: a 16-bit x reduced over one block
/// of rows (a bias gradient [B*T, C] -> [C]) read as it is, each element
/// widened where it is added; the same sums in the same order as the
/// widened call, so the same bits. Every other pattern is widened whole.
bool halfReduceBody(Kind kind, Body widenedBody, const KernelArgs &a,
                    std::string &err) {
  const TensorRef &x = a.inputs[0], &y = a.outputs[0];
  bool reduced[kMaxRank];
  int64_t count;
  const bool half = x.dtype == DType::bf16 || x.dtype == DType::f16;
  const bool outOk =
      y.dtype == DType::f32 || y.dtype == DType::bf16 || y.dtype == DType::f16;
  if (half && outOk && !checkReduce(a, reduced, count, err))
    return false;
  if (!half || !outOk || count == 0 || y.numel() == 0)
    return runWidened(widenedBody, a, err);
  int64_t size[kMaxRank];
  bool red[kMaxRank];
  int firstRed, numRed;
  const int r = mergeDims(x, reduced, size, red, firstRed, numRed);
  const int64_t inner =
      numRed == 1 && firstRed + 1 < r ? size[firstRed + 1] : 1;
  if (numRed != 1 || inner == 1)
    return runWidened(widenedBody, a, err);
  const int64_t outer = firstRed == 1 ? size[0] : 1;
  const double dscale = kind == Kind::Mean ? 1.0 / double(count) : 1.0;
  std::vector<float> out(size_t(y.numel()));
  float *yp = y.dtype == DType::f32 ? y.f32() : out.data();
  const auto *bits = static_cast<const uint16_t *>(x.data);
  if (x.dtype == DType::bf16)
    reduceColumns(
        kind, outer, size[firstRed], inner, dscale,
        [bits](int64_t i) { return bf16ToFloat(bits[i]); }, yp);
  else
    reduceColumns(
        kind, outer, size[firstRed], inner, dscale,
        [bits](int64_t i) { return f16ToFloat(bits[i]); }, yp);
  auto *yBits = static_cast<uint16_t *>(y.data);
  if (y.dtype == DType::bf16)
    f32ToBf16(yp, yBits, y.numel());
  else if (y.dtype == DType::f16)
    f32ToF16(yp, yBits, y.numel());
  return true;
}

} // namespace

bool halfReduceSumBody(const KernelArgs &a, std::string &e) {
  return halfReduceBody(Kind::Sum, &reduceSumBody, a, e);
}
bool halfReduceMeanBody(const KernelArgs &a, std::string &e) {
  return halfReduceBody(Kind::Mean, &reduceMeanBody, a, e);
}
bool halfReduceMaxBody(const KernelArgs &a, std::string &e) {
  return halfReduceBody(Kind::Max, &reduceMaxBody, a, e);
}

bool reduceSumBody(const KernelArgs &a, std::string &e) {
  return reduceBody(Kind::Sum, a, e);
}
bool reduceMeanBody(const KernelArgs &a, std::string &e) {
  return reduceBody(Kind::Mean, a, e);
}
bool reduceMaxBody(const KernelArgs &a, std::string &e) {
  return reduceBody(Kind::Max, a, e);
}

} // namespace dsc::rt::cpu
