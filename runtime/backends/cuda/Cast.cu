//===- Cast.cu - ds.cast, ds.copy, ds.fill --------------------------------===//
//
// Casts between f32, f64, f16 and bf16 round to nearest even in one step
// (f64 -> f16 does not pass through f32, which could round twice), as the
// CPU backend does. ds.fill writes the bit pattern the CPU's ds.fill gives
// for one element, so both backends fill with the same bits and refuse the
// same values (an i32 fill of 2^31, say). Also the stream helpers: zeroing,
// scaling, and writing one word (the NCCL progress markers).
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/Registry.h"
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/DeviceSupport.cuh"

#include <cstring>

namespace dsc::rt::cuda {
namespace {

__device__ __forceinline__ double loadWide(const void *p, DType t, int64_t i) {
  switch (t) {
  case DType::f64:
    return static_cast<const double *>(p)[i];
  case DType::f16:
    return __half2float(static_cast<const __half *>(p)[i]);
  case DType::bf16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
  default:
    return static_cast<const float *>(p)[i];
  }
}

__device__ __forceinline__ void storeWide(void *p, DType t, int64_t i,
                                          double v) {
  switch (t) {
  case DType::f64:
    static_cast<double *>(p)[i] = v;
    break;
  case DType::f16:
    static_cast<__half *>(p)[i] = __double2half(v);
    break;
  case DType::bf16:
    static_cast<__nv_bfloat16 *>(p)[i] = __double2bfloat16(v);
    break;
  default:
    static_cast<float *>(p)[i] = float(v);
  }
}

// Every f32, f16 and bf16 value is exact in double, so widening first and
// rounding once gives the direct conversion.
__global__ void castKernel(const void *x, DType from, void *y, DType to,
                           int64_t n) {
  DSC_GRID_STRIDE(i, n) { storeWide(y, to, i, loadWide(x, from, i)); }
}

template <typename Word>
__global__ void fillKernel(Word *y, Word pattern, int64_t n) {
  DSC_GRID_STRIDE(i, n) { y[i] = pattern; }
}

bool copyBytes(const KernelArgs &args, const void *from, void *to,
               int64_t bytes, std::string &err) {
  if (bytes <= 0 || from == to)
    return true;
  cudaError_t status = cudaMemcpyAsync(to, from, size_t(bytes),
                                       cudaMemcpyDefault, streamOf(args));
  if (status == cudaSuccess)
    return true;
  return fail(err, "cudaMemcpyAsync: ", cudaGetErrorString(status));
}

} // namespace

bool castBody(const KernelArgs &args, std::string &err) {
  const TensorRef &x = args.inputs[0], &y = args.outputs[0];
  if (!isFloat(x.dtype))
    return fail(err, "unsupported dtype ", dtypeName(x.dtype),
                " for x (expected f32, f64, f16 or bf16)");
  if (!isFloat(y.dtype))
    return fail(err, "unsupported dtype ", dtypeName(y.dtype),
                " for the output (expected f32, f64, f16 or bf16)");
  if (!sameShape(x, y))
    return fail(err, "output has shape ", shapeStr(y), " but x has shape ",
                shapeStr(x));
  const int64_t n = x.numel();
  if (x.dtype == y.dtype)
    return copyBytes(args, x.data, y.data, n * int64_t(dtypeSize(x.dtype)),
                     err);
  if (n == 0)
    return true;
  castKernel<<<gridFor(n), kBlock, 0, streamOf(args)>>>(x.data, x.dtype, y.data,
                                                        y.dtype, n);
  return launched(err);
}

bool copyBody(const KernelArgs &args, std::string &err) {
  const TensorRef &x = args.inputs[0], &y = args.outputs[0];
  if (!checkCopyBytes(err, x, y))
    return false;
  const int64_t bytes = x.numel() * int64_t(dtypeSize(x.dtype));
  return copyBytes(args, x.data, y.data, bytes, err);
}

bool fillBody(const KernelArgs &args, std::string &err) {
  const TensorRef &y = args.outputs[0];
  // The CPU kernel computes (and checks) one element on the host.
  uint64_t word = 0;
  const int64_t one = 1;
  TensorRef probe{&word, y.dtype, &one, 1};
  KernelArgs hostArgs = args;
  hostArgs.outputs = &probe;
  KernelVariants fills = hostKernelVariants("ds.fill");
  const KernelInfo *cpuFill = fills.empty() ? nullptr : fills.data;
  std::string cpuError;
  if (!cpuFill || !cpuFill->fn(hostArgs, cpuError)) {
    // The CPU table prefixes its errors with the kernel name; ours adds it
    // again, so keep only the message.
    const std::string prefix = "ds.fill: ";
    return fail(err, cpuError.rfind(prefix, 0) == 0
                         ? cpuError.substr(prefix.size())
                         : cpuError);
  }
  const int64_t n = y.numel();
  if (n == 0)
    return true;
  cudaStream_t s = streamOf(args);
  switch (dtypeSize(y.dtype)) {
  case 2:
    fillKernel<<<gridFor(n), kBlock, 0, s>>>(static_cast<uint16_t *>(y.data),
                                             uint16_t(word), n);
    break;
  case 4:
    fillKernel<<<gridFor(n), kBlock, 0, s>>>(static_cast<uint32_t *>(y.data),
                                             uint32_t(word), n);
    break;
  default:
    fillKernel<<<gridFor(n), kBlock, 0, s>>>(static_cast<uint64_t *>(y.data),
                                             word, n);
  }
  return launched(err);
}

} // namespace dsc::rt::cuda

namespace dsc::rt::cuda {
namespace {

// The product in double, rounded to float, then to the dtype (f64: kept),
// which is the CPU's scaleInPlace to the bit.
__global__ void scaleKernel(void *data, DType t, int64_t n, double scale) {
  DSC_GRID_STRIDE(i, n) {
    double v = loadWide(data, t, i) * scale;
    storeWide(data, t, i, t == DType::f64 ? v : double(float(v)));
  }
}

__global__ void zeroKernel(uint32_t *words, int64_t n) {
  DSC_GRID_STRIDE(i, n) { words[i] = 0; }
}

__global__ void zeroBytesKernel(unsigned char *bytes, int64_t n) {
  DSC_GRID_STRIDE(i, n) { bytes[i] = 0; }
}

} // namespace

bool scaleOnStream(void *data, DType dtype, int64_t n, float scale,
                   void *stream, std::string &err) {
  if (scale == 1.0f || n == 0)
    return true;
  scaleKernel<<<gridFor(n), kBlock, 0, static_cast<cudaStream_t>(stream)>>>(
      data, dtype, n, double(scale));
  return launched(err);
}

bool zeroOnStream(void *data, size_t bytes, void *stream, std::string &err) {
  if (bytes == 0)
    return true;
  auto s = static_cast<cudaStream_t>(stream);
  // A kernel, not cudaMemsetAsync: the output may be a pinned host arena,
  // which kernels reach and memset does not promise to.
  if (reinterpret_cast<uintptr_t>(data) % 4 == 0 && bytes % 4 == 0)
    zeroKernel<<<gridFor(int64_t(bytes / 4)), kBlock, 0, s>>>(
        static_cast<uint32_t *>(data), int64_t(bytes / 4));
  else
    zeroBytesKernel<<<gridFor(int64_t(bytes)), kBlock, 0, s>>>(
        static_cast<unsigned char *>(data), int64_t(bytes));
  return launched(err);
}

namespace {
__global__ void writeWordKernel(uint32_t *word, uint32_t value) {
  *reinterpret_cast<volatile uint32_t *>(word) = value;
  __threadfence_system(); // seen by the host's polling without delay
}
} // namespace

bool writeWordOnStream(uint32_t *word, uint32_t value, void *stream,
                       std::string &err) {
  writeWordKernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(word, value);
  return launched(err);
}

} // namespace dsc::rt::cuda
