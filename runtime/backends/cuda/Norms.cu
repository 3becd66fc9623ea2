//===- Norms.cu - layer norm, RMS norm, softmax and their gradients -------===//
//
// Rows of up to 1024 elements (a transformer's widths) take a warp each,
// the row in the warp's registers and its statistics summed by shuffles
// (the *Warps kernels); longer rows take a block each, summed through blockSum
// (DeviceSupport.cuh). Row statistics accumulate in double, as on the CPU
// backend, in an order fixed by the shapes; the per-element formulas are
// the CPU's (cpu/Norms.cpp), so 16-bit operands give what the CPU's
// widened variants give. The weight gradients sum per fixed block of rows
// into double partials (in the stream's scratch) and then over blocks in
// order: no atomics, the same bits every run.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/DeviceSupport.cuh"
#include "runtime/backends/cuda/ReducePlan.h"

#include <type_traits>

namespace dsc::rt::cuda {
namespace {

struct Row {
  const void *p;
  Storage s;
  __device__ float at(int64_t i) const { return load(p, s, i); }
};

struct OutRow {
  void *p;
  Storage s;
  __device__ void set(int64_t i, float v) const { store(p, s, i, v); }
};

Row rowOf(const TensorRef &t) { return {t.data, storage(t)}; }
OutRow outOf(const TensorRef &t) { return {t.data, storage(t)}; }

/// Rows a grid walks: at most 2^20 blocks, each striding on.
unsigned rowGrid(int64_t rows) {
  return unsigned(rows < (int64_t(1) << 20) ? (rows < 1 ? 1 : rows)
                                            : (int64_t(1) << 20));
}

#define DSC_FOR_ROWS(r, rows)                                                  \
  for (int64_t r = blockIdx.x; r < (rows); r += gridDim.x)

// Mean and 1/sqrt(var + eps) of row `base` (two passes, as the CPU).
__device__ void meanRstd(Row x, int64_t base, int64_t cols, double eps,
                         double *red, double &mean, double &rstd) {
  double s = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    s += x.at(base + j);
  mean = blockSum(s, red) / double(cols);
  double v = 0;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    double d = double(x.at(base + j)) - mean;
    v += d * d;
  }
  rstd = 1.0 / sqrt(blockSum(v, red) / double(cols) + eps);
}

__global__ void layerNormKernel(Row x, Row w, Row b, bool hasBias, OutRow y,
                                int64_t rows, int64_t cols, double eps) {
  __shared__ double red[33];
  DSC_FOR_ROWS(r, rows) {
    const int64_t base = r * cols;
    double mean, rstd;
    meanRstd(x, base, cols, eps, red, mean, rstd);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      float v = float((double(x.at(base + j)) - mean) * rstd) * w.at(j);
      y.set(base + j, hasBias ? v + b.at(j) : v);
    }
  }
}

// The sum is stored (rounded to its dtype) and read back before the norm,
// so the fused pair is exactly add then layer_norm. Each thread reads back
// only elements it wrote itself.
__global__ void addLayerNormKernel(Row x, Row res, Row w, Row b, bool hasBias,
                                   OutRow sum, OutRow y, int64_t rows,
                                   int64_t cols, double eps) {
  __shared__ double red[33];
  DSC_FOR_ROWS(r, rows) {
    const int64_t base = r * cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      sum.set(base + j, x.at(base + j) + res.at(base + j));
    Row s{sum.p, sum.s};
    double mean, rstd;
    meanRstd(s, base, cols, eps, red, mean, rstd);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      float v = float((double(s.at(base + j)) - mean) * rstd) * w.at(j);
      y.set(base + j, hasBias ? v + b.at(j) : v);
    }
  }
}

__global__ void rmsNormKernel(Row x, Row w, OutRow y, int64_t rows,
                              int64_t cols, double eps) {
  __shared__ double red[33];
  DSC_FOR_ROWS(r, rows) {
    const int64_t base = r * cols;
    double ss = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      double v = x.at(base + j);
      ss += v * v;
    }
    const double inv = 1.0 / sqrt(blockSum(ss, red) / double(cols) + eps);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      y.set(base + j, float(double(x.at(base + j)) * inv) * w.at(j));
  }
}

//===--- Rows of up to 1024 elements: a warp per row ----------------------===//

constexpr int kRowWarps = 8; // warps per block

/// The warp's sum, the same in every lane: summed down to lane 0 in a
/// fixed order and broadcast (in a butterfly each lane rounds differently).
__device__ __forceinline__ double warpSum(double v) {
  for (int off = 16; off > 0; off /= 2)
    v += __shfl_down_sync(0xffffffffu, v, off);
  return __shfl_sync(0xffffffffu, v, 0);
}

/// Warp w of block b takes row b * kRowWarps + w, then strides on by the
/// grid's warps (the same row for every lane: shuffles stay convergent).
#define DSC_FOR_WARP_ROWS(r, rows)                                             \
  for (int64_t r = int64_t(blockIdx.x) * kRowWarps + threadIdx.x / 32;         \
       r < (rows); r += int64_t(gridDim.x) * kRowWarps)

/// Elements per lane for a row of `cols`: 8, 16, 24 or 32 (0: an empty row,
/// or one longer than a warp takes: a block per row instead).
int warpBucket(int64_t cols) {
  return cols < 1       ? 0
         : cols <= 256  ? 8
         : cols <= 512  ? 16
         : cols <= 768  ? 24
         : cols <= 1024 ? 32
                        : 0;
}

unsigned warpRowGrid(int64_t rows) {
  const int64_t blocks = (rows + kRowWarps - 1) / kRowWarps;
  return unsigned(blocks < (int64_t(1) << 20) ? (blocks < 1 ? 1 : blocks)
                                              : (int64_t(1) << 20));
}

/// Calls f(std::integral_constant<int, P>) for the row's bucket; false for
/// rows a warp does not take.
template <class F> bool byWarpBucket(int64_t cols, F &&f) {
  switch (warpBucket(cols)) {
  case 8:
    f(std::integral_constant<int, 8>{});
    return true;
  case 16:
    f(std::integral_constant<int, 16>{});
    return true;
  case 24:
    f(std::integral_constant<int, 24>{});
    return true;
  case 32:
    f(std::integral_constant<int, 32>{});
    return true;
  default:
    return false;
  }
}

/// This lane's elements j = lane + 32 k of row `base` (0 past cols).
template <int P>
__device__ __forceinline__ void loadRow(Row x, int64_t base, int cols,
                                        float (&v)[P]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k < P; ++k) {
    const int j = lane + 32 * k;
    v[k] = j < cols ? x.at(base + j) : 0.0f;
  }
}

/// Mean and 1/sqrt(var + eps) of the row in v (two passes, as the CPU).
template <int P>
__device__ __forceinline__ void warpMeanRstd(const float (&v)[P], int cols,
                                             double eps, double &mean,
                                             double &rstd) {
  const int lane = threadIdx.x % 32;
  double s = 0;
#pragma unroll
  for (int k = 0; k < P; ++k)
    s += v[k]; // zero past cols
  mean = warpSum(s) / double(cols);
  double q = 0;
#pragma unroll
  for (int k = 0; k < P; ++k)
    if (lane + 32 * k < cols) {
      const double d = double(v[k]) - mean;
      q += d * d;
    }
  rstd = 1.0 / sqrt(warpSum(q) / double(cols) + eps);
}

template <int P>
__device__ __forceinline__ void
normalizeRow(const float (&v)[P], Row w, Row b, bool hasBias, OutRow y,
             int64_t base, int cols, double mean, double rstd) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k < P; ++k) {
    const int j = lane + 32 * k;
    if (j < cols) {
      const float o = float((double(v[k]) - mean) * rstd) * w.at(j);
      y.set(base + j, hasBias ? o + b.at(j) : o);
    }
  }
}

template <int P>
__global__ void __launch_bounds__(kRowWarps * 32)
    layerNormWarps(Row x, Row w, Row b, bool hasBias, OutRow y, int64_t rows,
                   int cols, double eps) {
  DSC_FOR_WARP_ROWS(r, rows) {
    float v[P];
    loadRow(x, r * cols, cols, v);
    double mean, rstd;
    warpMeanRstd(v, cols, eps, mean, rstd);
    normalizeRow(v, w, b, hasBias, y, r * cols, cols, mean, rstd);
  }
}

// As addLayerNormKernel: the sum stored rounded and read back by the lane
// that wrote it.
template <int P>
__global__ void __launch_bounds__(kRowWarps * 32)
    addLayerNormWarps(Row x, Row res, Row w, Row b, bool hasBias, OutRow sum,
                      OutRow y, int64_t rows, int cols, double eps) {
  const int lane = threadIdx.x % 32;
  const Row stored{sum.p, sum.s};
  DSC_FOR_WARP_ROWS(r, rows) {
    const int64_t base = r * cols;
    float v[P];
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int j = lane + 32 * k;
      v[k] = 0.0f;
      if (j < cols) {
        sum.set(base + j, x.at(base + j) + res.at(base + j));
        v[k] = stored.at(base + j);
      }
    }
    double mean, rstd;
    warpMeanRstd(v, cols, eps, mean, rstd);
    normalizeRow(v, w, b, hasBias, y, base, cols, mean, rstd);
  }
}

template <int P>
__global__ void __launch_bounds__(kRowWarps * 32)
    rmsNormWarps(Row x, Row w, OutRow y, int64_t rows, int cols, double eps) {
  const int lane = threadIdx.x % 32;
  DSC_FOR_WARP_ROWS(r, rows) {
    const int64_t base = r * cols;
    float v[P];
    loadRow(x, base, cols, v);
    double ss = 0;
#pragma unroll
    for (int k = 0; k < P; ++k)
      ss += double(v[k]) * v[k];
    const double inv = 1.0 / sqrt(warpSum(ss) / double(cols) + eps);
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int j = lane + 32 * k;
      if (j < cols)
        y.set(base + j, float(double(v[k]) * inv) * w.at(j));
    }
  }
}

//===--- Gradients: rows in fixed blocks, weight partials per block
//--------===//

struct RowBlocks {
  int64_t count, size;
};

// At most 1024 blocks of at least 4 rows, and no more partials (`perRow`
// doubles per column) than the scratch holds.
RowBlocks rowBlocks(int64_t rows, int64_t cols, int perRow, size_t scratch) {
  int64_t most = int64_t(scratch / (sizeof(double) * size_t(perRow) *
                                    size_t(cols > 0 ? cols : 1)));
  if (most > 1024)
    most = 1024;
  if (most < 1)
    most = 1;
  int64_t size = (rows + most - 1) / most;
  if (size < 4)
    size = 4;
  return {(rows + size - 1) / size, size};
}

__global__ void layerNormGradKernel(Row x, Row w, Row g, OutRow dx,
                                    double *part, int64_t rows, int64_t cols,
                                    int64_t blockRows, double eps) {
  __shared__ double red[33];
  double *pdw = part + int64_t(blockIdx.x) * 2 * cols, *pdb = pdw + cols;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    pdw[j] = pdb[j] = 0;
  const int64_t first = int64_t(blockIdx.x) * blockRows;
  const int64_t end = first + blockRows < rows ? first + blockRows : rows;
  for (int64_t r = first; r < end; ++r) {
    const int64_t base = r * cols;
    double mean, rstd;
    meanRstd(x, base, cols, eps, red, mean, rstd);
    double sGy = 0, sGyX = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      double xhat = (double(x.at(base + j)) - mean) * rstd;
      double gj = g.at(base + j);
      double gy = gj * w.at(j);
      sGy += gy;
      sGyX += gy * xhat;
      pdw[j] += gj * xhat;
      pdb[j] += gj;
    }
    const double meanGy = blockSum(sGy, red) / double(cols);
    const double meanGyXhat = blockSum(sGyX, red) / double(cols);
    // gy with its components along 1 and along xhat removed, times rstd.
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      double xhat = (double(x.at(base + j)) - mean) * rstd;
      double gy = double(g.at(base + j)) * w.at(j);
      dx.set(base + j, float(rstd * (gy - meanGy - xhat * meanGyXhat)));
    }
  }
}

__global__ void rmsNormGradKernel(Row x, Row w, Row g, OutRow dx, double *part,
                                  int64_t rows, int64_t cols, int64_t blockRows,
                                  double eps) {
  __shared__ double red[33];
  double *pdw = part + int64_t(blockIdx.x) * cols;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    pdw[j] = 0;
  const int64_t first = int64_t(blockIdx.x) * blockRows;
  const int64_t end = first + blockRows < rows ? first + blockRows : rows;
  for (int64_t r = first; r < end; ++r) {
    const int64_t base = r * cols;
    double ss = 0, dot = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      double xj = x.at(base + j);
      ss += xj * xj;
      dot += double(g.at(base + j)) * w.at(j) * xj;
    }
    const double inv = 1.0 / sqrt(blockSum(ss, red) / double(cols) + eps);
    // d inv / d x_j = -inv^3 x_j / cols.
    const double coef = inv * inv * inv * blockSum(dot, red) / double(cols);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      double xj = x.at(base + j), gj = g.at(base + j);
      dx.set(base + j, float(gj * w.at(j) * inv - xj * coef));
      pdw[j] += gj * xj * inv;
    }
  }
}

// The gradients of rows a warp takes run as two kernels: a warp per row
// computes dx and records the row's statistics (mean and 1/std for layer
// norm, 1/rms for RMS norm), then a column walk (ReducePlan's kColumns:
// a thread per column per range of rows) sums the weight gradients from
// x, g and those statistics into double partials per range (it reads x and
// g after dx is written: the kernel table refuses dx aliasing either,
// CudaKernels.cpp). Holding a
// lane's share of the weight gradients in the row kernel instead took
// over 200 registers.

struct RowStats {
  double shift, scale; // layer norm: mean, rstd; RMS norm: 0, 1/rms
};

template <int P>
__global__ void __launch_bounds__(kRowWarps * 32)
    layerNormGradWarps(Row x, Row w, Row g, OutRow dx, RowStats *stats,
                       int64_t rows, int cols, double eps) {
  const int lane = threadIdx.x % 32;
  DSC_FOR_WARP_ROWS(r, rows) {
    const int64_t base = r * cols;
    float xv[P];
    loadRow(x, base, cols, xv);
    double mean, rstd;
    warpMeanRstd(xv, cols, eps, mean, rstd);
    double sGy = 0, sGyX = 0;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int j = lane + 32 * k;
      if (j < cols) {
        const double gy = double(g.at(base + j)) * w.at(j);
        sGy += gy;
        sGyX += gy * ((double(xv[k]) - mean) * rstd);
      }
    }
    const double meanGy = warpSum(sGy) / double(cols);
    const double meanGyXhat = warpSum(sGyX) / double(cols);
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int j = lane + 32 * k;
      if (j < cols) {
        const double xhat = (double(xv[k]) - mean) * rstd;
        const double gy = double(g.at(base + j)) * w.at(j);
        dx.set(base + j, float(rstd * (gy - meanGy - xhat * meanGyXhat)));
      }
    }
    if (lane == 0)
      stats[r] = {mean, rstd};
  }
}

template <int P>
__global__ void __launch_bounds__(kRowWarps * 32)
    rmsNormGradWarps(Row x, Row w, Row g, OutRow dx, RowStats *stats,
                     int64_t rows, int cols, double eps) {
  const int lane = threadIdx.x % 32;
  DSC_FOR_WARP_ROWS(r, rows) {
    const int64_t base = r * cols;
    float xv[P];
    loadRow(x, base, cols, xv);
    double ss = 0, dot = 0;
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int j = lane + 32 * k;
      ss += double(xv[k]) * xv[k]; // zero past cols
      if (j < cols)
        dot += double(g.at(base + j)) * w.at(j) * xv[k];
    }
    const double inv = 1.0 / sqrt(warpSum(ss) / double(cols) + eps);
    // d inv / d x_j = -inv^3 x_j / cols.
    const double coef = inv * inv * inv * warpSum(dot) / double(cols);
#pragma unroll
    for (int k = 0; k < P; ++k) {
      const int j = lane + 32 * k;
      if (j < cols)
        dx.set(base + j,
               float(double(g.at(base + j)) * w.at(j) * inv - xv[k] * coef));
    }
    if (lane == 0)
      stats[r] = {0.0, inv};
  }
}

// Weight partials over rows: block (range, c) gives its threads a column
// each of chunk c and the rows of `range`, and writes
// part[range][o * cols + j]: o = 0 the sum of g x_hat (x_hat = (x - shift)
// scale), o = 1 (with bias) the sum of g.
__global__ void normWeightPartials(Row x, Row g, const RowStats *stats,
                                   int64_t rows, int64_t cols, int64_t ranges,
                                   bool withBias, double *part) {
  ColumnShare c;
  if (!columnShare(cols, rows, ranges, c))
    return;
  const int64_t j = c.col, range = c.range;
  double dw = 0, db = 0;
  for (int64_t r = c.first; r < c.end; ++r) {
    const RowStats st = stats[r];
    const double gj = g.at(r * cols + j);
    dw += gj * ((double(x.at(r * cols + j)) - st.shift) * st.scale);
    db += gj;
  }
  const int outputs = withBias ? 2 : 1;
  part[range * outputs * cols + j] = dw;
  if (withBias)
    part[range * outputs * cols + cols + j] = db;
}

// out_k[j] = sum over blocks b of part[b][k * cols + j], in block order.
__global__ void sumPartials(const double *part, int64_t count, int64_t stride,
                            int64_t cols, OutRow out0, OutRow out1,
                            int outputs) {
  DSC_GRID_STRIDE(j, cols) {
    for (int k = 0; k < outputs; ++k) {
      double s = 0;
      for (int64_t b = 0; b < count; ++b)
        s += part[b * stride + k * cols + j];
      (k == 0 ? out0 : out1).set(j, float(s));
    }
  }
}

//===--- Softmax
//-----------------------------------------------------------===//

__global__ void softmaxKernel(Row x, OutRow y, int64_t rows, int64_t cols) {
  __shared__ double red[33];
  __shared__ float redMax[33];
  DSC_FOR_ROWS(r, rows) {
    const int64_t base = r * cols;
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      float v = x.at(base + j);
      m = v > m ? v : m; // NaN skipped, as the CPU's maxOf
    }
    const float mx = blockMax(m, redMax);
    double s = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      s += expf(x.at(base + j) - mx);
    const float inv = float(1.0 / blockSum(s, red));
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      y.set(base + j, expf(x.at(base + j) - mx) * inv);
  }
}

__global__ void softmaxGradKernel(Row y, Row g, OutRow dx, int64_t rows,
                                  int64_t cols) {
  __shared__ double red[33];
  DSC_FOR_ROWS(r, rows) {
    const int64_t base = r * cols;
    double dot = 0; // g - dot cancels where y is large: keep it in double
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      dot += double(g.at(base + j)) * y.at(base + j);
    dot = blockSum(dot, red);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      dx.set(base + j,
             float(double(y.at(base + j)) * (double(g.at(base + j)) - dot)));
  }
}

// The gradient kernels, then their weight partials summed into the
// `outputs` per-channel outputs: for rows a warp takes, warpKernel(P) and
// normWeightPartials (when the row statistics fit the scratch), else the
// block kernel's partials per row block.
template <typename Kernel, typename WarpKernel>
bool gradWithPartials(const KernelArgs &a, Kernel kernel, WarpKernel warpKernel,
                      int outputs, int64_t rows, int64_t cols,
                      std::string &err) {
  const CudaHandles *h = handlesOf(a);
  const size_t available = h ? h->workspaceBytes : 0;
  cudaStream_t s = streamOf(a);
  const Row x = rowOf(a.inputs[0]), w = rowOf(a.inputs[1]),
            g = rowOf(a.inputs[2]);
  const OutRow dx = outOf(a.outputs[0]);
  const double eps = a.floatAttrs[0];
  const size_t statsBytes = (size_t(rows) * sizeof(RowStats) + 255) / 256 * 256;
  double *part = nullptr;
  int64_t count = 0; // partials per output to sum
  void *scratch = nullptr;
  // (The statistics and at least one range's partials must fit.)
  if (rows > 0 && warpBucket(cols) &&
      statsBytes + size_t(outputs * cols) * sizeof(double) <= available) {
    const ReducePlan plan =
        planReduce(cols, rows, false, (available - statsBytes) / outputs);
    const bool ranged = plan.walk == ReducePlan::kColumns;
    const int64_t ranges = ranged ? plan.parts : 1;
    const int threads = ranged ? plan.threads : kBlock;
    if (!scratchOf(
            a, statsBytes + size_t(ranges * outputs * cols) * sizeof(double),
            scratch, err))
      return false;
    auto *stats = static_cast<RowStats *>(scratch);
    part =
        reinterpret_cast<double *>(static_cast<char *>(scratch) + statsBytes);
    byWarpBucket(cols, [&](auto p) {
      warpKernel(p)<<<warpRowGrid(rows), kRowWarps * 32, 0, s>>>(
          x, w, g, dx, stats, rows, int(cols), eps);
    });
    const int64_t chunks = (cols + threads - 1) / threads;
    normWeightPartials<<<unsigned(chunks * ranges), threads, 0, s>>>(
        x, g, stats, rows, cols, ranges, outputs == 2, part);
    count = ranges;
  } else {
    const RowBlocks blocks = rowBlocks(rows, cols, outputs, available);
    if (!scratchOf(a,
                   size_t(blocks.count) * size_t(outputs) * size_t(cols) *
                       sizeof(double),
                   scratch, err))
      return false;
    part = static_cast<double *>(scratch);
    if (rows > 0)
      kernel<<<unsigned(blocks.count), rowThreads(cols), 0, s>>>(
          x, w, g, dx, part, rows, cols, blocks.size, eps);
    count = rows > 0 ? blocks.count : 0;
  }
  if (cols > 0)
    sumPartials<<<gridFor(cols), kBlock, 0, s>>>(
        part, count, int64_t(outputs) * cols, cols, outOf(a.outputs[1]),
        outOf(a.outputs[outputs == 2 ? 2 : 1]), outputs);
  return launched(err);
}

} // namespace

bool layerNormBody(const KernelArgs &a, std::string &err) {
  int64_t rows, cols;
  if (!expectFloatStorage(a, err) || !checkLayerNorm(a, rows, cols, err))
    return false;
  if (rows == 0 || cols == 0)
    return true;
  const bool bias = a.numInputs == 3;
  const Row b = bias ? rowOf(a.inputs[2]) : Row{nullptr, kF32};
  if (!byWarpBucket(cols, [&](auto p) {
        layerNormWarps<decltype(p)::value>
            <<<warpRowGrid(rows), kRowWarps * 32, 0, streamOf(a)>>>(
                rowOf(a.inputs[0]), rowOf(a.inputs[1]), b, bias,
                outOf(a.outputs[0]), rows, int(cols), a.floatAttrs[0]);
      }))
    layerNormKernel<<<rowGrid(rows), rowThreads(cols), 0, streamOf(a)>>>(
        rowOf(a.inputs[0]), rowOf(a.inputs[1]), b, bias, outOf(a.outputs[0]),
        rows, cols, a.floatAttrs[0]);
  return launched(err);
}

bool addLayerNormBody(const KernelArgs &a, std::string &err) {
  int64_t rows, cols;
  if (!expectFloatStorage(a, err) || !checkAddLayerNorm(a, rows, cols, err))
    return false;
  if (rows == 0 || cols == 0)
    return true;
  const bool bias = a.numInputs == 4;
  const Row b = bias ? rowOf(a.inputs[3]) : Row{nullptr, kF32};
  if (!byWarpBucket(cols, [&](auto p) {
        addLayerNormWarps<decltype(p)::value>
            <<<warpRowGrid(rows), kRowWarps * 32, 0, streamOf(a)>>>(
                rowOf(a.inputs[0]), rowOf(a.inputs[1]), rowOf(a.inputs[2]), b,
                bias, outOf(a.outputs[0]), outOf(a.outputs[1]), rows, int(cols),
                a.floatAttrs[0]);
      }))
    addLayerNormKernel<<<rowGrid(rows), rowThreads(cols), 0, streamOf(a)>>>(
        rowOf(a.inputs[0]), rowOf(a.inputs[1]), rowOf(a.inputs[2]), b, bias,
        outOf(a.outputs[0]), outOf(a.outputs[1]), rows, cols, a.floatAttrs[0]);
  return launched(err);
}

bool layerNormGradBody(const KernelArgs &a, std::string &err) {
  int64_t rows, cols;
  if (!expectFloatStorage(a, err) || !checkLayerNormGrad(a, rows, cols, err))
    return false;
  return gradWithPartials(
      a, layerNormGradKernel,
      [](auto p) { return layerNormGradWarps<decltype(p)::value>; }, 2, rows,
      cols, err);
}

bool rmsNormBody(const KernelArgs &a, std::string &err) {
  int64_t rows, cols;
  if (!expectFloatStorage(a, err) || !checkRmsNorm(a, rows, cols, err))
    return false;
  if (rows == 0 || cols == 0)
    return true;
  if (!byWarpBucket(cols, [&](auto p) {
        rmsNormWarps<decltype(p)::value>
            <<<warpRowGrid(rows), kRowWarps * 32, 0, streamOf(a)>>>(
                rowOf(a.inputs[0]), rowOf(a.inputs[1]), outOf(a.outputs[0]),
                rows, int(cols), a.floatAttrs[0]);
      }))
    rmsNormKernel<<<rowGrid(rows), rowThreads(cols), 0, streamOf(a)>>>(
        rowOf(a.inputs[0]), rowOf(a.inputs[1]), outOf(a.outputs[0]), rows, cols,
        a.floatAttrs[0]);
  return launched(err);
}

bool rmsNormGradBody(const KernelArgs &a, std::string &err) {
  int64_t rows, cols;
  if (!expectFloatStorage(a, err) || !checkRmsNormGrad(a, rows, cols, err))
    return false;
  return gradWithPartials(
      a, rmsNormGradKernel,
      [](auto p) { return rmsNormGradWarps<decltype(p)::value>; }, 1, rows,
      cols, err);
}

bool softmaxBody(const KernelArgs &a, std::string &err) {
  int64_t rows, cols;
  if (!expectFloatStorage(a, err) || !checkSoftmax(a, rows, cols, err))
    return false;
  if (rows == 0 || cols == 0)
    return true;
  softmaxKernel<<<rowGrid(rows), rowThreads(cols), 0, streamOf(a)>>>(
      rowOf(a.inputs[0]), outOf(a.outputs[0]), rows, cols);
  return launched(err);
}

bool softmaxGradBody(const KernelArgs &a, std::string &err) {
  int64_t rows, cols;
  if (!expectFloatStorage(a, err) || !checkSoftmaxGrad(a, rows, cols, err))
    return false;
  if (rows == 0 || cols == 0)
    return true;
  softmaxGradKernel<<<rowGrid(rows), rowThreads(cols), 0, streamOf(a)>>>(
      rowOf(a.inputs[0]), rowOf(a.inputs[1]), outOf(a.outputs[0]), rows, cols);
  return launched(err);
}

} // namespace dsc::rt::cuda
