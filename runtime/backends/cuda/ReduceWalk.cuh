//===- ReduceWalk.cuh - reduction walks over any element source *- CUDA -*-===//
//
// The kernels of ds.reduce_sum/mean/max (Reduce.cu) with the elements read
// through a source: a tensor (Reduce.cu), or a fused elementwise group's
// program evaluated at each element (FusedElementwise.cu, whose sum then
// adds its values in the unfused reduce_sum's order: the same bits). Each
// element is read exactly once, so a source may also store other values
// of that element. Sums accumulate in double; max propagates NaN, as on
// the CPU. A thread per output, a block per output, or fixed slices of the
// reduction combined in order (planReduce in ReducePlan.h says which
// when): every order is fixed by the shapes, so results do not vary from
// run to run.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CUDA_REDUCEWALK_CUH
#define DSC_RUNTIME_BACKENDS_CUDA_REDUCEWALK_CUH

#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/DeviceSupport.cuh"
#include "runtime/backends/cuda/ReducePlan.h"

#include <cmath>
#include <string>

// Internal to each including file: its kernels are not shared symbols.
namespace dsc::rt::cuda::reduce {
namespace {

enum Kind : int { kSum, kMean, kMax };

/// Kept and reduced dims of x with their element strides in x, neighbours
/// merged where one index walks both (mergeWalkDims), so the common cases are
/// one kept and one reduced dim and offsetOf divides by nothing.
struct Walk {
  int kept = 0, red = 0;
  int64_t keptShape[kMaxRank], keptStride[kMaxRank];
  int64_t redShape[kMaxRank], redStride[kMaxRank];
};

__device__ int64_t offsetOf(int64_t i, int rank, const int64_t *shape,
                            const int64_t *stride) {
  if (rank == 1)
    return i * stride[0];
  int64_t off = 0;
  for (int d = rank - 1; d >= 0; --d) {
    off += (i % shape[d]) * stride[d];
    i /= shape[d];
  }
  return off;
}

__device__ __forceinline__ float maxNan(float acc, float v) {
  return (v > acc || v != v) ? v : acc;
}

// One output per thread.
template <class Src>
__global__ void reduceThreads(Src src, void *y, Storage sy, Walk w,
                              int64_t outN, int64_t count, Kind kind,
                              double scale) {
  DSC_GRID_STRIDE(o, outN) {
    const int64_t base = offsetOf(o, w.kept, w.keptShape, w.keptStride);
    double sum = 0;
    float mx = -INFINITY;
    for (int64_t j = 0; j < count; ++j) {
      float v = src(base + offsetOf(j, w.red, w.redShape, w.redStride));
      if (kind == kMax)
        mx = maxNan(mx, v);
      else
        sum += v;
    }
    store(y, sy, o, kind == kMax ? mx : float(sum * scale));
  }
}

// Elements [begin, end) of output o's reduction, over the block: the sum
// (in double) or the NaN-propagating max, valid in thread 0. Fixed order.
template <class Src>
__device__ double reduceRange(const Src &src, const Walk &w, int64_t o,
                              int64_t begin, int64_t end, Kind kind,
                              double *red, float *redMax) {
  const int64_t base = offsetOf(o, w.kept, w.keptShape, w.keptStride);
  double sum = 0;
  float mx = -INFINITY;
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
    float v = src(base + offsetOf(j, w.red, w.redShape, w.redStride));
    if (kind == kMax)
      mx = maxNan(mx, v);
    else
      sum += v;
  }
  if (kind != kMax)
    return blockSum(sum, red);
  for (int off = 16; off > 0; off /= 2)
    mx = maxNan(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  __syncthreads(); // redMax may still be read after a previous call
  if (threadIdx.x % 32 == 0)
    redMax[threadIdx.x / 32] = mx;
  __syncthreads();
  float m = -INFINITY;
  if (threadIdx.x == 0)
    for (int k = 0; k < int(blockDim.x / 32); ++k)
      m = maxNan(m, redMax[k]);
  return m;
}

// One output per block.
template <class Src>
__global__ void reduceBlocks(Src src, void *y, Storage sy, Walk w, int64_t outN,
                             int64_t count, Kind kind, double scale) {
  __shared__ double red[33];
  __shared__ float redMax[32];
  for (int64_t o = blockIdx.x; o < outN; o += gridDim.x) {
    double v = reduceRange(src, w, o, 0, count, kind, red, redMax);
    if (threadIdx.x == 0)
      store(y, sy, o, kind == kMax ? float(v) : float(v * scale));
  }
}

// A few huge reductions (a grad norm's sum of squares over a whole weight):
// `parts` blocks per output each reduce a fixed slice into a partial, and
// one thread per output combines its partials in order.
template <class Src>
__global__ void reduceSlices(Src src, Walk w, int64_t outN, int64_t count,
                             int64_t parts, Kind kind, double *partial) {
  __shared__ double red[33];
  __shared__ float redMax[32];
  const int64_t o = blockIdx.x / parts, part = blockIdx.x % parts;
  if (o >= outN)
    return;
  const int64_t slice = (count + parts - 1) / parts;
  const int64_t begin = part * slice;
  const int64_t end = begin + slice < count ? begin + slice : count;
  double v = reduceRange(src, w, o, begin, end, kind, red, redMax);
  if (threadIdx.x == 0)
    partial[blockIdx.x] = v;
}

// Column sums (the innermost dim kept, so neighbouring threads read
// neighbouring elements: a bias gradient over B*T rows): block (part, c)
// gives each of its threads one output of column chunk c and part `part`
// of that output's reduction, written to partial[part * outN + o].
template <class Src>
__global__ void reduceColumns(Src src, Walk w, int64_t outN, int64_t count,
                              int64_t parts, Kind kind, double *partial) {
  ColumnShare c;
  if (!columnShare(outN, count, parts, c))
    return;
  const int64_t base = offsetOf(c.col, w.kept, w.keptShape, w.keptStride);
  double sum = 0;
  float mx = -INFINITY;
  for (int64_t j = c.first; j < c.end; ++j) {
    float v = src(base + offsetOf(j, w.red, w.redShape, w.redStride));
    if (kind == kMax)
      mx = maxNan(mx, v);
    else
      sum += v;
  }
  partial[c.range * outN + c.col] = kind == kMax ? double(mx) : sum;
}

// Output o's partials, partial[o * oStride + p * pStride] for p in order.
__global__ void combineSlices(const double *partial, int64_t outN,
                              int64_t parts, int64_t oStride, int64_t pStride,
                              Kind kind, double scale, void *y, Storage sy) {
  DSC_GRID_STRIDE(o, outN) {
    double sum = 0;
    float mx = -INFINITY;
    for (int64_t p = 0; p < parts; ++p) {
      double v = partial[o * oStride + p * pStride];
      if (kind == kMax)
        mx = maxNan(mx, float(v));
      else
        sum += v;
    }
    store(y, sy, o, kind == kMax ? mx : float(sum * scale));
  }
}

__global__ void fillValue(void *y, Storage sy, float v, int64_t n) {
  DSC_GRID_STRIDE(i, n) { store(y, sy, i, v); }
}

/// A tensor's elements, by offset.
struct TensorSource {
  const void *x;
  Storage sx;
  __device__ float operator()(int64_t offset) const {
    return load(x, sx, offset);
  }
};

/// The walk of x (row-major) reducing the dims marked in `reduced`.
inline Walk walkOf(const TensorRef &x, const bool *reduced) {
  Walk w;
  int64_t stride = 1;
  int64_t strides[kMaxRank];
  for (int d = x.rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= x.shape[d];
  }
  for (int d = 0; d < x.rank; ++d) {
    if (reduced[d]) {
      w.redShape[w.red] = x.shape[d];
      w.redStride[w.red++] = strides[d];
    } else {
      w.keptShape[w.kept] = x.shape[d];
      w.keptStride[w.kept++] = strides[d];
    }
  }
  mergeWalkDims(w.kept, w.keptShape, w.keptStride);
  mergeWalkDims(w.red, w.redShape, w.redStride);
  return w;
}

/// Reduces `count` elements of `src` into each of y's outN elements
/// (both > 0) along walk w, on the instruction's stream.
template <class Src>
bool launchReduce(const KernelArgs &a, Kind kind, const Walk &w, int64_t outN,
                  int64_t count, Src src, void *y, Storage sy,
                  std::string &err) {
  cudaStream_t s = streamOf(a);
  if (count == 0) { // an empty reduction: the identity (mean: 0/0)
    float v = kind == kMax ? -INFINITY : kind == kSum ? 0.0f : NAN;
    fillValue<<<gridFor(outN), kBlock, 0, s>>>(y, sy, v, outN);
    return launched(err);
  }
  const double scale = kind == kMean ? 1.0 / double(count) : 1.0;
  const bool innermost = w.red > 0 && w.redStride[w.red - 1] == 1;
  const CudaHandles *h = handlesOf(a);
  const ReducePlan plan =
      planReduce(outN, count, innermost, h ? h->workspaceBytes : 0);
  const unsigned grid = unsigned(plan.blocks);
  double *partial = nullptr;
  if (plan.scratch) {
    void *scratch = nullptr;
    if (!scratchOf(a, plan.scratch, scratch, err))
      return false;
    partial = static_cast<double *>(scratch);
  }
  switch (plan.walk) {
  case ReducePlan::kSlices:
    reduceSlices<<<grid, plan.threads, 0, s>>>(src, w, outN, count, plan.parts,
                                               kind, partial);
    combineSlices<<<gridFor(outN), kBlock, 0, s>>>(
        partial, outN, plan.parts, plan.parts, 1, kind, scale, y, sy);
    break;
  case ReducePlan::kColumns:
    reduceColumns<<<grid, plan.threads, 0, s>>>(src, w, outN, count, plan.parts,
                                                kind, partial);
    combineSlices<<<gridFor(outN), kBlock, 0, s>>>(partial, outN, plan.parts, 1,
                                                   outN, kind, scale, y, sy);
    break;
  case ReducePlan::kBlocks:
    reduceBlocks<<<grid, plan.threads, 0, s>>>(src, y, sy, w, outN, count, kind,
                                               scale);
    break;
  case ReducePlan::kThreads:
    reduceThreads<<<grid, plan.threads, 0, s>>>(src, y, sy, w, outN, count,
                                                kind, scale);
    break;
  }
  return launched(err);
}

} // namespace
} // namespace dsc::rt::cuda::reduce

#endif // DSC_RUNTIME_BACKENDS_CUDA_REDUCEWALK_CUH
