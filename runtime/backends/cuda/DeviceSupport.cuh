//===- DeviceSupport.cuh - what the CUDA kernel files share -----*- CUDA
//-*-===//
//
// Storage types (f32, f16, bf16 operands are loaded as float and stored
// rounded to nearest even, which is what the CPU backend's 16-bit variants
// compute: widen, run in f32, round), grid-stride launches, and the host
// wrappers' launch check. Internal to runtime/backends/cuda.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CUDA_DEVICESUPPORT_CUH
#define DSC_RUNTIME_BACKENDS_CUDA_DEVICESUPPORT_CUH

#include "runtime/backends/cuda/CudaHandles.h"
#include "runtime/kernels/KernelChecks.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace dsc::rt::cuda {

/// How a float operand is stored; the wrapper maps DType to it.
enum Storage : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

/// f32, f16 or bf16 as a Storage; false for any other dtype.
inline bool storageOf(DType t, Storage &s) {
  switch (t) {
  case DType::f32:
    s = kF32;
    return true;
  case DType::f16:
    s = kF16;
    return true;
  case DType::bf16:
    s = kBF16;
    return true;
  default:
    return false;
  }
}

/// Every operand of `args` is f32, f16 or bf16.
inline bool expectFloatStorage(const KernelArgs &args, std::string &err) {
  Storage s;
  for (size_t i = 0; i < args.numInputs; ++i)
    if (!storageOf(args.inputs[i].dtype, s))
      return fail(err, "unsupported dtype ", dtypeName(args.inputs[i].dtype),
                  " for input ", i, " (expected f32, f16 or bf16)");
  for (size_t i = 0; i < args.numOutputs; ++i)
    if (!storageOf(args.outputs[i].dtype, s))
      return fail(err, "unsupported dtype ", dtypeName(args.outputs[i].dtype),
                  " for output ", i, " (expected f32, f16 or bf16)");
  return true;
}

inline Storage storage(const TensorRef &t) {
  Storage s = kF32;
  storageOf(t.dtype, s);
  return s;
}

// The storage type is the same for every thread of a launch, so the switch
// is a uniform branch.
__device__ __forceinline__ float load(const void *p, Storage s, int64_t i) {
  switch (s) {
  case kF16:
    return __half2float(static_cast<const __half *>(p)[i]);
  case kBF16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
  default:
    return static_cast<const float *>(p)[i];
  }
}

__device__ __forceinline__ void store(void *p, Storage s, int64_t i, float v) {
  switch (s) {
  case kF16:
    static_cast<__half *>(p)[i] = __float2half_rn(v);
    break;
  case kBF16:
    static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v);
    break;
  default:
    static_cast<float *>(p)[i] = v;
  }
}

constexpr int kBlock = 256;

/// Blocks for a grid-stride loop over n items (at least 1).
inline unsigned gridFor(int64_t n) {
  int64_t blocks = (n + kBlock - 1) / kBlock;
  if (blocks > (int64_t(1) << 20))
    blocks = int64_t(1) << 20; // the loop strides over the rest
  return unsigned(blocks < 1 ? 1 : blocks);
}

#define DSC_GRID_STRIDE(i, n)                                                  \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);    \
       i += int64_t(gridDim.x) * blockDim.x)

/// Records the first bad datum of a run (RunContext): the first kernel to
/// flag wins, the rest of the run computes on (with the bad element read as
/// a zero row) and the executor reports the winner afterwards.
__device__ inline void flagBad(RunContext *run, RunError what, int64_t value,
                               int64_t position, int64_t limit,
                               int64_t ignore = 0) {
  if (atomicCAS(&run->errorBits, 0u, uint32_t(what)) == 0u) {
    run->badValue = value;
    run->badPosition = position;
    run->badLimit = limit;
    run->badIgnore = ignore;
  }
}

//===--- Block reductions -------------------------------------------------===//

/// Sum over the block, the same value in every thread. `scratch` is 33
/// entries of shared memory; blockDim.x is a multiple of 32, at most 1024.
/// The order of the additions depends on blockDim only, so results are
/// reproducible, and one thread computes the total that all of them get
/// (in a butterfly each lane associates differently).
template <typename T> __device__ T blockSum(T v, T *scratch) {
  for (int off = 16; off > 0; off /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, off);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads(); // scratch may still be read after a previous call
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T w = lane < int(blockDim.x / 32) ? scratch[lane] : T(0);
    for (int off = 16; off > 0; off /= 2)
      w += __shfl_xor_sync(0xffffffffu, w, off);
    if (lane == 0)
      scratch[32] = w;
  }
  __syncthreads();
  return scratch[32];
}

/// Largest value over the block, NaN skipped as std::max skips it (-inf
/// when every value is NaN or the block holds none).
__device__ inline float blockMax(float v, float *scratch) {
  for (int off = 16; off > 0; off /= 2) {
    float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = o > v ? o : v;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0)
    scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  v = lane < warps ? scratch[lane] : -INFINITY;
  for (int off = 16; off > 0; off /= 2) {
    float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = o > v ? o : v;
  }
  return v;
}

/// This thread's share of a column walk (ReducePlan.h's kColumns): block
/// (range, chunk) gives its threads a column each of chunk `chunk` and the
/// rows [first, end) of `range`, one of `ranges` equal ranges of `rows`.
/// False for a thread past the last column.
struct ColumnShare {
  int64_t col, range, first, end;
};
__device__ inline bool columnShare(int64_t cols, int64_t rows, int64_t ranges,
                                   ColumnShare &s) {
  const int64_t chunks = (cols + blockDim.x - 1) / blockDim.x;
  s.range = blockIdx.x / chunks;
  s.col = (blockIdx.x % chunks) * blockDim.x + threadIdx.x;
  if (s.range >= ranges || s.col >= cols)
    return false;
  const int64_t size = (rows + ranges - 1) / ranges;
  s.first = s.range * size;
  s.end = s.first + size < rows ? s.first + size : rows;
  return true;
}

/// Threads per block for a row of `cols` elements: a multiple of 32
/// between 64 and 1024, about one element per thread for short rows.
inline int rowThreads(int64_t cols) {
  int64_t t = (cols + 31) / 32 * 32;
  return int(t < 64 ? 64 : t > 1024 ? 1024 : t);
}

/// Scratch device memory for a kernel's partial results: the stream's
/// cuBLASLt workspace, which nothing else on the stream uses while the
/// kernel runs (work on one stream is ordered). False with err when it is
/// missing or too small.
inline bool scratchOf(const KernelArgs &args, size_t bytes, void *&scratch,
                      std::string &err) {
  const CudaHandles *h =
      args.ctx ? static_cast<const CudaHandles *>(args.ctx->handles) : nullptr;
  if (!h || !h->workspace)
    return fail(err, "needs the CUDA backend's stream workspace");
  if (bytes > h->workspaceBytes)
    return fail(err, "needs ", bytes, " bytes of scratch, more than the ",
                h->workspaceBytes, "-byte stream workspace");
  scratch = h->workspace;
  return true;
}

inline cudaStream_t streamOf(const KernelArgs &args) {
  return args.ctx ? static_cast<cudaStream_t>(args.ctx->stream) : nullptr;
}

inline const CudaHandles *handlesOf(const KernelArgs &args) {
  return args.ctx ? static_cast<const CudaHandles *>(args.ctx->handles)
                  : nullptr;
}

/// After a launch: false with CUDA's message when it did not start.
inline bool launched(std::string &err) {
  cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess)
    return true;
  return fail(err, "kernel launch failed: ", cudaGetErrorString(status));
}

} // namespace dsc::rt::cuda

#endif // DSC_RUNTIME_BACKENDS_CUDA_DEVICESUPPORT_CUH
