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

// ds.linear_cross_entropy's pieces (LinearCrossEntropy.cpp).
/// Row-major C [M x N] = op(A) op(B) + beta C, A and B of dtype `in`
/// (f32, f16 or bf16), C of `out`, the sums in f32.
struct RowMajorGemm {
  bool transA, transB;
  int64_t M, N, K;
  const void *A;
  int64_t lda;
  const void *B;
  int64_t ldb;
  float beta;
  void *C;
  int64_t ldc;
  DType in = DType::f32, out = DType::f32;
};
/// Enqueues `p` through cuBLASLt (Matmul.cpp).
bool gemmRowMajor(const KernelArgs &args, const RowMajorGemm &p,
                  std::string &err);
/// Records the first target outside [0, V) that is not `ignore` for the
/// run's error, as ds.linear_cross_entropy's (Lookup.cu).
bool validateLinearCrossEntropyTargets(const KernelArgs &args, int64_t V,
                                       int64_t ignore, std::string &err);
/// Rows [first, first + rows) of the whole step's logits, in `chunk`
/// [rows, V] of the head's dtype (the op's chunk output): each replaced by
/// its gradient (grad / the counted targets) (softmax - onehot), its loss
/// term / the count added to *loss (Lookup.cu).
bool lossAndGradChunk(const KernelArgs &args, void *chunk, int64_t first,
                      int64_t rows, int64_t V, float *loss, std::string &err);

} // namespace dsc::rt::cuda

#endif // DSC_RUNTIME_BACKENDS_CUDA_CUDAKERNELS_H
