//===- Norms.cpp - layer norm, RMS norm, softmax and their gradients ------===//
//
// Row-wise over the last dim. Row statistics (mean, variance, sums of
// squares, softmax sums, the gradients' dot products) accumulate in double;
// the per-element work is float or double where cancellation would cost
// float precision. Rows are split over threads; the weight gradients sum
// per fixed block of rows and then over blocks in order, so the result does
// not depend on the thread count.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/Convert.h"
#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/backends/cpu/FastMath.h"
#include "runtime/backends/cpu/Widening.h"

#include <cmath>
#include <vector>

namespace dsc::rt::cpu {
namespace {

// Rows per parallel chunk: about 16K elements.
int64_t rowGrain(int64_t cols) {
  return std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(cols, 1));
}

// At most 64 blocks of consecutive rows, fixed for a given row count.
struct RowBlocks {
  int64_t count, size;
};
RowBlocks rowBlocks(int64_t rows) {
  int64_t size = std::max<int64_t>(16, (rows + 63) / 64);
  return {(rows + size - 1) / size, size};
}

struct Stats {
  double mean, rstd;
};
Stats layerNormStats(const float *x, int64_t n, double eps) {
  double mean = sumOf(n, [&](int64_t j) { return double(x[j]); }) / double(n);
  double var = sumOf(n,
                     [&](int64_t j) {
                       double d = double(x[j]) - mean;
                       return d * d;
                     }) /
               double(n);
  return {mean, 1.0 / std::sqrt(var + eps)};
}

/// y = (x - mean) rstd w (+ b) for one row: layer_norm's and
/// add_layer_norm's output, written once so every variant rounds alike.
inline void normalizeRow(const float *x, int64_t n, const Stats &st,
                         const float *w, const float *b, float *y) {
  if (b) {
    for (int64_t j = 0; j < n; ++j)
      y[j] = float((double(x[j]) - st.mean) * st.rstd) * w[j] + b[j];
  } else {
    for (int64_t j = 0; j < n; ++j)
      y[j] = float((double(x[j]) - st.mean) * st.rstd) * w[j];
  }
}

double rmsInverse(const float *x, int64_t n, double eps) {
  double ss = sumOf(n, [&](int64_t j) { return double(x[j]) * x[j]; });
  return 1.0 / std::sqrt(ss / double(n) + eps);
}

// Sums block partials [count][n] into float outputs, block by block.
void sumBlocks(const std::vector<double> &part, int64_t count, int64_t stride,
               int64_t offset, int64_t n, float *out) {
  for (int64_t j = 0; j < n; ++j) {
    double s = 0;
    for (int64_t b = 0; b < count; ++b)
      s += part[size_t(b * stride + offset + j)];
    out[j] = float(s);
  }
}

} // namespace

bool layerNormBody(const KernelArgs &a, std::string &err) {
  int64_t rows, cols;
  if (!expectAllF32(a, err) || !checkLayerNorm(a, rows, cols, err))
    return false;
  const double eps = a.floatAttrs[0];
  const float *x = a.inputs[0].f32(), *w = a.inputs[1].f32();
  const float *b = a.numInputs == 3 ? a.inputs[2].f32() : nullptr;
  float *y = a.outputs[0].f32();
  parallelFor(rows, rowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *xr = x + r * cols;
      normalizeRow(xr, cols, layerNormStats(xr, cols, eps), w, b, y + r * cols);
    }
  });
  return true;
}

bool addLayerNormBody(const KernelArgs &a, std::string &err) {
  int64_t rows, cols;
  if (!expectAllF32(a, err) || !checkAddLayerNorm(a, rows, cols, err))
    return false;
  const double eps = a.floatAttrs[0];
  const float *x = a.inputs[0].f32(), *res = a.inputs[1].f32(),
              *w = a.inputs[2].f32();
  const float *b = a.numInputs == 4 ? a.inputs[3].f32() : nullptr;
  float *sum = a.outputs[0].f32(), *y = a.outputs[1].f32();
  parallelFor(rows, rowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *xr = x + r * cols, *rr = res + r * cols;
      float *sr = sum + r * cols, *yr = y + r * cols;
      // The whole sum row first: either output may be x or the residual.
      for (int64_t j = 0; j < cols; ++j)
        sr[j] = xr[j] + rr[j];
      normalizeRow(sr, cols, layerNormStats(sr, cols, eps), w, b, yr);
    }
  });
  return true;
}

namespace {

/// ds.layer_norm_grad over checked operands of any float type: a 16-bit
/// row is widened (and dx rounded back) in the thread's scratch as it is
/// used, so the arithmetic, and the bits, are the f32 kernel's on widened
/// copies, without whole-operand copies (which cost a bf16 step's
/// layer_norm_grad 2.1 ms a call against 0.27 ms in f32).
void layerNormGradRows(const KernelArgs &a, int64_t rows, int64_t cols) {
  const double eps = a.floatAttrs[0];
  const TensorRef &x = a.inputs[0], &g = a.inputs[2], &dx = a.outputs[0];
  std::vector<float> wideW(static_cast<size_t>(cols));
  const float *w = floatRow(a.inputs[1], 0, cols, wideW.data());
  const RowBlocks blocks = rowBlocks(rows);
  // Per block: dw partials then db partials.
  std::vector<double> part(static_cast<size_t>(blocks.count * 2 * cols));
  parallelFor(blocks.count, 1, [&](int64_t b0, int64_t b1) {
    std::vector<double> xhat(static_cast<size_t>(cols)),
        gy(static_cast<size_t>(cols));
    std::vector<float> rowScratch(static_cast<size_t>(3 * cols));
    for (int64_t blk = b0; blk < b1; ++blk) {
      double *pdw = part.data() + blk * 2 * cols, *pdb = pdw + cols;
      int64_t end = std::min(rows, (blk + 1) * blocks.size);
      for (int64_t r = blk * blocks.size; r < end; ++r) {
        const float *xr = floatRow(x, r, cols, rowScratch.data()),
                    *gr = floatRow(g, r, cols, rowScratch.data() + cols);
        float *dxr = outRow(dx, r, cols, rowScratch.data() + 2 * cols);
        Stats st = layerNormStats(xr, cols, eps);
        for (int64_t j = 0; j < cols; ++j) {
          xhat[j] = (double(xr[j]) - st.mean) * st.rstd;
          gy[j] = double(gr[j]) * w[j];
          pdw[j] += double(gr[j]) * xhat[j];
          pdb[j] += gr[j];
        }
        double meanGy = sumOf(cols, [&](int64_t j) { return gy[j]; }) / cols;
        double meanGyXhat =
            sumOf(cols, [&](int64_t j) { return gy[j] * xhat[j]; }) / cols;
        // gy with its components along 1 and along xhat removed, times rstd.
        for (int64_t j = 0; j < cols; ++j)
          dxr[j] = float(st.rstd * (gy[j] - meanGy - xhat[j] * meanGyXhat));
        storeRow(dxr, dx, r, cols);
      }
    }
  });
  std::vector<float> sums(static_cast<size_t>(cols));
  for (int k = 0; k < 2; ++k) {
    const TensorRef &out = a.outputs[1 + k];
    float *o = outRow(out, 0, cols, sums.data());
    sumBlocks(part, blocks.count, 2 * cols, k * cols, cols, o);
    storeRow(o, out, 0, cols);
  }
}

/// ds.add_layer_norm over checked operands of any float type, a row at a
/// time in the thread's scratch: the sum rounded to its output's dtype and
/// widened back before the norm reads it, as the pair's two widened steps
/// (runWidenedPair) round it, so the bits are theirs.
void addLayerNormRows(const KernelArgs &a, int64_t rows, int64_t cols) {
  const double eps = a.floatAttrs[0];
  const TensorRef &x = a.inputs[0], &res = a.inputs[1];
  const TensorRef &sum = a.outputs[0], &y = a.outputs[1];
  std::vector<float> wideWB(static_cast<size_t>(2 * cols));
  const float *w = floatRow(a.inputs[2], 0, cols, wideWB.data());
  const float *b = a.numInputs == 4
                       ? floatRow(a.inputs[3], 0, cols, wideWB.data() + cols)
                       : nullptr;
  parallelFor(rows, rowGrain(cols), [&](int64_t r0, int64_t r1) {
    std::vector<float> scratch(static_cast<size_t>(3 * cols));
    float *sr = scratch.data(), *yr = sr + 2 * cols;
    for (int64_t r = r0; r < r1; ++r) {
      // Both rows read before either output is written: an output may be
      // x or the residual.
      const float *xr = floatRow(x, r, cols, sr),
                  *rr = floatRow(res, r, cols, sr + cols);
      float *s = outRow(sum, r, cols, sr);
      for (int64_t j = 0; j < cols; ++j)
        s[j] = xr[j] + rr[j];
      storeRow(s, sum, r, cols);
      const float *rounded = floatRow(sum, r, cols, sr);
      float *out = outRow(y, r, cols, yr);
      normalizeRow(rounded, cols, layerNormStats(rounded, cols, eps), w, b,
                   out);
      storeRow(out, y, r, cols);
    }
  });
}

} // namespace

bool halfAddLayerNormBody(const KernelArgs &a, std::string &err) {
  int64_t rows, cols;
  if (!checkAddLayerNorm(a, rows, cols, err))
    return false;
  addLayerNormRows(a, rows, cols);
  return true;
}

bool layerNormGradBody(const KernelArgs &a, std::string &err) {
  int64_t rows, cols;
  if (!expectAllF32(a, err) || !checkLayerNormGrad(a, rows, cols, err))
    return false;
  layerNormGradRows(a, rows, cols);
  return true;
}

bool halfLayerNormGradBody(const KernelArgs &a, std::string &err) {
  int64_t rows, cols;
  if (!checkLayerNormGrad(a, rows, cols, err))
    return false;
  layerNormGradRows(a, rows, cols);
  return true;
}

bool rmsNormBody(const KernelArgs &a, std::string &err) {
  int64_t rows, cols;
  if (!expectAllF32(a, err) || !checkRmsNorm(a, rows, cols, err))
    return false;
  const double eps = a.floatAttrs[0];
  const float *x = a.inputs[0].f32(), *w = a.inputs[1].f32();
  float *y = a.outputs[0].f32();
  parallelFor(rows, rowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *xr = x + r * cols;
      float *yr = y + r * cols;
      double inv = rmsInverse(xr, cols, eps);
      for (int64_t j = 0; j < cols; ++j)
        yr[j] = float(double(xr[j]) * inv) * w[j];
    }
  });
  return true;
}

namespace {

/// ds.rms_norm_grad over checked operands of any float type, a 16-bit row
/// widened (and dx rounded back) in the thread's scratch as it is used:
/// the f32 kernel's arithmetic and bits without whole-operand copies
/// (which cost a bf16 Llama step's rms_norm_grad 1.29 ms a call against
/// 0.24 ms in f32).
void rmsNormGradRows(const KernelArgs &a, int64_t rows, int64_t cols) {
  const double eps = a.floatAttrs[0];
  const TensorRef &x = a.inputs[0], &g = a.inputs[2], &dx = a.outputs[0];
  std::vector<float> wideW(static_cast<size_t>(cols));
  const float *w = floatRow(a.inputs[1], 0, cols, wideW.data());
  const RowBlocks blocks = rowBlocks(rows);
  std::vector<double> part(static_cast<size_t>(blocks.count * cols));
  parallelFor(blocks.count, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> rowScratch(static_cast<size_t>(3 * cols));
    for (int64_t blk = b0; blk < b1; ++blk) {
      double *pdw = part.data() + blk * cols;
      int64_t end = std::min(rows, (blk + 1) * blocks.size);
      for (int64_t r = blk * blocks.size; r < end; ++r) {
        const float *xr = floatRow(x, r, cols, rowScratch.data()),
                    *gr = floatRow(g, r, cols, rowScratch.data() + cols);
        float *dxr = outRow(dx, r, cols, rowScratch.data() + 2 * cols);
        double inv = rmsInverse(xr, cols, eps);
        double dot = sumOf(cols, [&](int64_t j) {
          return double(gr[j]) * w[j] * double(xr[j]);
        });
        // d inv / d x_j = -inv^3 x_j / cols.
        double coef = inv * inv * inv * dot / double(cols);
        for (int64_t j = 0; j < cols; ++j) {
          dxr[j] = float(double(gr[j]) * w[j] * inv - double(xr[j]) * coef);
          pdw[j] += double(gr[j]) * xr[j] * inv;
        }
        storeRow(dxr, dx, r, cols);
      }
    }
  });
  std::vector<float> sums(static_cast<size_t>(cols));
  const TensorRef &dw = a.outputs[1];
  float *o = outRow(dw, 0, cols, sums.data());
  sumBlocks(part, blocks.count, cols, 0, cols, o);
  storeRow(o, dw, 0, cols);
}

} // namespace

bool rmsNormGradBody(const KernelArgs &a, std::string &err) {
  int64_t rows, cols;
  if (!expectAllF32(a, err) || !checkRmsNormGrad(a, rows, cols, err))
    return false;
  rmsNormGradRows(a, rows, cols);
  return true;
}

bool halfRmsNormGradBody(const KernelArgs &a, std::string &err) {
  int64_t rows, cols;
  if (!checkRmsNormGrad(a, rows, cols, err))
    return false;
  rmsNormGradRows(a, rows, cols);
  return true;
}

bool softmaxBody(const KernelArgs &a, std::string &err) {
  int64_t rows, cols;
  if (!expectAllF32(a, err) || !checkSoftmax(a, rows, cols, err))
    return false;
  const float *x = a.inputs[0].f32();
  float *y = a.outputs[0].f32();
  parallelFor(rows, rowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *xr = x + r * cols;
      float *yr = y + r * cols;
      const float mx = maxOf(xr, cols);
      for (int64_t j = 0; j < cols; ++j)
        yr[j] = fm::exp(xr[j] - mx);
      const float inv =
          float(1.0 / sumOf(cols, [&](int64_t j) { return double(yr[j]); }));
      for (int64_t j = 0; j < cols; ++j)
        yr[j] *= inv;
    }
  });
  return true;
}

bool softmaxGradBody(const KernelArgs &a, std::string &err) {
  int64_t rows, cols;
  if (!expectAllF32(a, err) || !checkSoftmaxGrad(a, rows, cols, err))
    return false;
  const float *y = a.inputs[0].f32(), *g = a.inputs[1].f32();
  float *dx = a.outputs[0].f32();
  parallelFor(rows, rowGrain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *yr = y + r * cols, *gr = g + r * cols;
      float *dxr = dx + r * cols;
      // g - dot cancels where y is large: keep it in double.
      const double dot =
          sumOf(cols, [&](int64_t j) { return double(gr[j]) * yr[j]; });
      for (int64_t j = 0; j < cols; ++j)
        dxr[j] = float(double(yr[j]) * (double(gr[j]) - dot));
    }
  });
  return true;
}

} // namespace dsc::rt::cpu
