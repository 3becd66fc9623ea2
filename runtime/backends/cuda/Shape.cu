//===- Shape.cu - transpose, slice, pad, broadcast, concat, split, iota ---===//
//
// Each kernel's arguments become the same StridedCopy plan as on the CPU
// backend (runtime/kernels/ShapeKernelPlans.cpp), executed here as one
// gather or scatter with a thread per word. A word is an element, or
// where every run the copy moves is whole words of 4, 8 or 16 bytes (the
// innermost dim contiguous: a transpose that keeps the head dim, say) the
// largest such word, so the threads move 16 bytes each rather than 2
// (measured on the H200: the per-element copy of [128, 1024, 12, 64] bf16
// ran at 0.46 TB/s). Concat and split are one 2-D copy per operand
// (cudaMemcpy2DAsync), which the copy engines do at full bandwidth.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/DeviceSupport.cuh"
#include "runtime/backends/cuda/IndexMath.h"

namespace dsc::rt::cuda {
namespace {

template <typename W>
__global__ void stridedCopyKernel(const W *src, W *dst, BroadcastLayout l,
                                  int64_t total, bool scatter) {
  DSC_GRID_STRIDE(i, total) {
    int64_t off = 0, rem = i;
    for (int d = l.rank - 1; d >= 0; --d) {
      off += (rem % l.shape[d]) * l.strides[0][d];
      rem /= l.shape[d];
    }
    if (scatter)
      dst[off] = src[i];
    else
      dst[i] = src[off];
  }
}

// The same where every index and offset fits in 31 bits (IndexMath.h).
template <typename W>
__global__ void stridedCopyNarrowKernel(const W *src, W *dst, NarrowLayout l,
                                        uint32_t total, bool scatter) {
  // total < 2^31 and the stride < 2^29: i cannot wrap.
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += gridDim.x * blockDim.x) {
    uint32_t off, unused;
    l.offsets(i, off, unused);
    if (scatter)
      dst[off] = src[i];
    else
      dst[i] = src[off];
  }
}

template <typename W>
void launchCopy(const KernelArgs &a, const StridedCopy &p, const void *src,
                void *dst) {
  const W *from = static_cast<const W *>(src) + p.srcBase;
  W *to = static_cast<W *>(dst) + p.dstBase;
  const unsigned grid = gridFor(p.total);
  NarrowLayout narrow;
  if (narrowLayout(p.layout, p.total, narrow))
    stridedCopyNarrowKernel<<<grid, kBlock, 0, streamOf(a)>>>(
        from, to, narrow, uint32_t(p.total), p.scatter);
  else
    stridedCopyKernel<<<grid, kBlock, 0, streamOf(a)>>>(from, to, p.layout,
                                                        p.total, p.scatter);
}

/// `p` as a copy of words of `bytes` (a multiple of its element size), or
/// false where a run would split a word: the innermost dim must be
/// contiguous on the strided side and whole words long, every other
/// stride and both bases whole words, both pointers aligned to a word.
bool widened(const StridedCopy &p, const void *src, const void *dst,
             size_t bytes, StridedCopy &w) {
  const int64_t k = int64_t(bytes / p.elemSize);
  const BroadcastLayout &l = p.layout;
  const int last = l.rank - 1;
  if (bytes % p.elemSize != 0 || k < 2 || l.strides[0][last] != 1 ||
      l.shape[last] % k != 0 || p.srcBase % k != 0 || p.dstBase % k != 0 ||
      reinterpret_cast<uintptr_t>(src) % bytes != 0 ||
      reinterpret_cast<uintptr_t>(dst) % bytes != 0)
    return false;
  for (int d = 0; d < last; ++d)
    if (l.strides[0][d] % k != 0)
      return false;
  w = p;
  w.layout.shape[last] /= k;
  for (int d = 0; d < last; ++d)
    w.layout.strides[0][d] /= k;
  w.total /= k;
  w.srcBase /= k;
  w.dstBase /= k;
  w.elemSize = bytes;
  return true;
}

bool runPlan(const KernelArgs &a, const StridedCopy &plan, const void *src,
             void *dst, std::string &err) {
  if (plan.total == 0)
    return true;
  StridedCopy p = plan;
  for (size_t bytes : {16, 8, 4})
    if (bytes > plan.elemSize && widened(plan, src, dst, bytes, p))
      break;
  switch (p.elemSize) {
  case 16:
    launchCopy<uint4>(a, p, src, dst);
    break;
  case 2:
    launchCopy<uint16_t>(a, p, src, dst);
    break;
  case 4:
    launchCopy<uint32_t>(a, p, src, dst);
    break;
  case 8:
    launchCopy<uint64_t>(a, p, src, dst);
    break;
  default:
    return fail(err, "unsupported element size ", p.elemSize);
  }
  return launched(err);
}

bool copy2d(const KernelArgs &a, void *dst, int64_t dpitch, const void *src,
            int64_t spitch, int64_t width, int64_t height, std::string &err) {
  if (width == 0 || height == 0)
    return true;
  cudaStream_t s = streamOf(a);
  auto check = [&](cudaError_t status, const char *what) {
    return status == cudaSuccess ||
           fail(err, what, ": ", cudaGetErrorString(status));
  };
  // Default copies: either side may be a pinned host arena.
  if (height == 1) // one row (concat along axis 0): no pitch limit applies
    return check(cudaMemcpyAsync(dst, src, size_t(width), cudaMemcpyDefault, s),
                 "cudaMemcpyAsync");
  // Pitches above the device's limit (~2 GiB rows): a copy per row.
  int maxPitch = 0, device = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&maxPitch, cudaDevAttrMaxPitch, device);
  if (dpitch > maxPitch || spitch > maxPitch) {
    for (int64_t r = 0; r < height; ++r)
      if (!check(cudaMemcpyAsync(static_cast<char *>(dst) + r * dpitch,
                                 static_cast<const char *>(src) + r * spitch,
                                 size_t(width), cudaMemcpyDefault, s),
                 "cudaMemcpyAsync"))
        return false;
    return true;
  }
  return check(cudaMemcpy2DAsync(dst, size_t(dpitch), src, size_t(spitch),
                                 size_t(width), size_t(height),
                                 cudaMemcpyDefault, s),
               "cudaMemcpy2DAsync");
}

template <typename T>
__global__ void iotaKernel(T *y, int64_t size, int64_t inner, int64_t n) {
  DSC_GRID_STRIDE(i, n) { y[i] = T((i / inner) % size); }
}

} // namespace

bool transposeBody(const KernelArgs &a, std::string &err) {
  StridedCopy p;
  return planTranspose(a, p, err) &&
         runPlan(a, p, a.inputs[0].data, a.outputs[0].data, err);
}

bool sliceBody(const KernelArgs &a, std::string &err) {
  StridedCopy p;
  return planSlice(a, p, err) &&
         runPlan(a, p, a.inputs[0].data, a.outputs[0].data, err);
}

bool broadcastBody(const KernelArgs &a, std::string &err) {
  StridedCopy p;
  return planBroadcast(a, p, err) &&
         runPlan(a, p, a.inputs[0].data, a.outputs[0].data, err);
}

bool padBody(const KernelArgs &a, std::string &err) {
  StridedCopy p;
  if (!planPad(a, p, err))
    return false;
  const TensorRef &y = a.outputs[0];
  if (!zeroOnStream(y.data, size_t(y.numel()) * dtypeSize(y.dtype), streamOf(a),
                    err))
    return false;
  return runPlan(a, p, a.inputs[0].data, y.data, err);
}

bool concatBody(const KernelArgs &a, std::string &err) {
  AxisBlocks b;
  if (!checkConcat(a, b, err))
    return false;
  const int64_t axis = a.intAttrs[0];
  const int64_t row = a.outputs[0].shape[axis] * b.innerBytes;
  int64_t at = 0;
  for (size_t i = 0; i < a.numInputs; ++i) {
    const int64_t chunk = a.inputs[i].shape[axis] * b.innerBytes;
    if (!copy2d(a, static_cast<char *>(a.outputs[0].data) + at, row,
                a.inputs[i].data, chunk, chunk, b.outer, err))
      return false;
    at += chunk;
  }
  return true;
}

bool splitBody(const KernelArgs &a, std::string &err) {
  AxisBlocks b;
  if (!checkSplit(a, b, err))
    return false;
  const int64_t axis = a.intAttrs[0];
  const int64_t row = a.inputs[0].shape[axis] * b.innerBytes;
  int64_t at = 0;
  for (size_t i = 0; i < a.numOutputs; ++i) {
    const int64_t chunk = a.outputs[i].shape[axis] * b.innerBytes;
    if (!copy2d(a, a.outputs[i].data, chunk,
                static_cast<const char *>(a.inputs[0].data) + at, row, chunk,
                b.outer, err))
      return false;
    at += chunk;
  }
  return true;
}

bool iotaBody(const KernelArgs &a, std::string &err) {
  int64_t size, inner;
  if (!checkIota(a, size, inner, err))
    return false;
  const TensorRef &y = a.outputs[0];
  const int64_t n = y.numel();
  if (n == 0)
    return true;
  cudaStream_t s = streamOf(a);
  switch (y.dtype) {
  case DType::f32:
    iotaKernel<<<gridFor(n), kBlock, 0, s>>>(static_cast<float *>(y.data), size,
                                             inner, n);
    break;
  case DType::f64:
    iotaKernel<<<gridFor(n), kBlock, 0, s>>>(static_cast<double *>(y.data),
                                             size, inner, n);
    break;
  case DType::i32:
    iotaKernel<<<gridFor(n), kBlock, 0, s>>>(static_cast<int32_t *>(y.data),
                                             size, inner, n);
    break;
  default:
    iotaKernel<<<gridFor(n), kBlock, 0, s>>>(static_cast<int64_t *>(y.data),
                                             size, inner, n);
  }
  return launched(err);
}

} // namespace dsc::rt::cuda
