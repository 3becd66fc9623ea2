//===- CudaKernels.h - the CUDA backend's kernel table ----------*- C++ -*-===//
//
// Internal to runtime/backends/cuda. Each kernel is a host function that
// checks its arguments (the same checks and lines as the CPU backend,
// runtime/kernels/KernelChecks.h), then enqueues its work on
// KernelContext::stream and returns: the executor, not the kernel, waits.
// Float operands may be f32, f16 or bf16 each, computed in f32.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CUDA_CUDAKERNELS_H
#define DSC_RUNTIME_BACKENDS_CUDA_CUDAKERNELS_H

#include "runtime/backends/Backend.h"
#include "runtime/kernels/Kernel.h"
#include "runtime/kernels/KernelContract.h"

#include <string>
#include <string_view>

namespace dsc::rt::cuda {

/// Every variant of `name` (empty when the CUDA backend has none yet).
KernelVariants cudaKernelVariants(std::string_view name);

// One body per kernel of the contracts (runtime/kernels/KernelContract.h),
// in the file of its family (Elementwise.cu, Cast.cu, Random.cu, Norms.cu,
// Lookup.cu, Shape.cu, Reduce.cu, Optimizer.cu, Attention.cu, Matmul.cpp,
// Comm.cpp); errors without the "ds.x: " prefix.
#define DSC_DECLARE_CUDA_BODY(id, body)                                        \
  bool body##Body(const KernelArgs &, std::string &);
DSC_FOR_EACH_KERNEL(DSC_DECLARE_CUDA_BODY)
#undef DSC_DECLARE_CUDA_BODY

// Helpers the bodies share (Cast.cu).
/// data[i] *= scale on `stream` (Cast.cu), rounding once in the dtype.
bool scaleOnStream(void *data, DType dtype, int64_t n, float scale,
                   void *stream, std::string &err);
/// Zeroes `bytes` at `data` on `stream` (Cast.cu), device or pinned host.
bool zeroOnStream(void *data, size_t bytes, void *stream, std::string &err);
/// *word = value on `stream` once the work before it is done (Cast.cu);
/// `word` may be mapped pinned host memory, which the host then reads.
bool writeWordOnStream(uint32_t *word, uint32_t value, void *stream,
                       std::string &err);

} // namespace dsc::rt::cuda

#endif // DSC_RUNTIME_BACKENDS_CUDA_CUDAKERNELS_H
