//===- Norms.cu - layer norm, RMS norm, softmax and their gradients -------===//
//
// One block per row of the last dim (rows strided over the grid). Row
// statistics accumulate in double, as on the CPU backend, through
// blockSum (DeviceSupport.cuh: an order fixed by the block size); the
// per-element formulas are the CPU's (cpu/Norms.cpp), so 16-bit operands
// give what the CPU's widened variants give. The weight gradients sum
// per fixed block of rows into double partials (in the stream's scratch)
// and then over blocks in order: no atomics, the same bits every run.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/DeviceSupport.cuh"

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

// Launches a weight-gradient kernel over row blocks, then sums its
// partials into the `outputs` per-channel outputs.
template <typename Kernel>
bool gradWithPartials(const KernelArgs &a, Kernel kernel, int outputs,
                      int64_t rows, int64_t cols, std::string &err) {
  const CudaHandles *h = handlesOf(a);
  size_t available = h ? h->workspaceBytes : 0;
  RowBlocks blocks = rowBlocks(rows, cols, outputs, available);
  void *scratch = nullptr;
  if (!scratchOf(a,
                 size_t(blocks.count) * size_t(outputs) * size_t(cols) *
                     sizeof(double),
                 scratch, err))
    return false;
  auto *part = static_cast<double *>(scratch);
  cudaStream_t s = streamOf(a);
  if (rows > 0)
    kernel<<<unsigned(blocks.count), rowThreads(cols), 0, s>>>(
        rowOf(a.inputs[0]), rowOf(a.inputs[1]), rowOf(a.inputs[2]),
        outOf(a.outputs[0]), part, rows, cols, blocks.size, a.floatAttrs[0]);
  const int64_t count = rows > 0 ? blocks.count : 0;
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
  layerNormKernel<<<rowGrid(rows), rowThreads(cols), 0, streamOf(a)>>>(
      rowOf(a.inputs[0]), rowOf(a.inputs[1]),
      bias ? rowOf(a.inputs[2]) : Row{nullptr, kF32}, bias, outOf(a.outputs[0]),
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
  addLayerNormKernel<<<rowGrid(rows), rowThreads(cols), 0, streamOf(a)>>>(
      rowOf(a.inputs[0]), rowOf(a.inputs[1]), rowOf(a.inputs[2]),
      bias ? rowOf(a.inputs[3]) : Row{nullptr, kF32}, bias, outOf(a.outputs[0]),
      outOf(a.outputs[1]), rows, cols, a.floatAttrs[0]);
  return launched(err);
}

bool layerNormGradBody(const KernelArgs &a, std::string &err) {
  int64_t rows, cols;
  if (!expectFloatStorage(a, err) || !checkLayerNormGrad(a, rows, cols, err))
    return false;
  return gradWithPartials(a, layerNormGradKernel, 2, rows, cols, err);
}

bool rmsNormBody(const KernelArgs &a, std::string &err) {
  int64_t rows, cols;
  if (!expectFloatStorage(a, err) || !checkRmsNorm(a, rows, cols, err))
    return false;
  if (rows == 0 || cols == 0)
    return true;
  rmsNormKernel<<<rowGrid(rows), rowThreads(cols), 0, streamOf(a)>>>(
      rowOf(a.inputs[0]), rowOf(a.inputs[1]), outOf(a.outputs[0]), rows, cols,
      a.floatAttrs[0]);
  return launched(err);
}

bool rmsNormGradBody(const KernelArgs &a, std::string &err) {
  int64_t rows, cols;
  if (!expectFloatStorage(a, err) || !checkRmsNormGrad(a, rows, cols, err))
    return false;
  return gradWithPartials(a, rmsNormGradKernel, 1, rows, cols, err);
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
