//===- CudaHandles.h - what a CUDA kernel gets besides its operands -*- C++
//-*-===//
//
// KernelContext::stream is the plan stream's cudaStream_t; ::handles points
// at that stream's CudaHandles. Internal to runtime/backends/cuda; plain
// types only, so host and device code include it alike.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CUDA_CUDAHANDLES_H
#define DSC_RUNTIME_BACKENDS_CUDA_CUDAHANDLES_H

#include <cstddef>
#include <cstdint>

namespace dsc::rt::cuda {

/// The values of a run that change between runs of one program, in device
/// memory. A replayed CUDA graph keeps the kernel parameters of its capture,
/// so a kernel that depends on the step or the micro-batch (dropout) reads
/// them from here, and the backend rewrites this before each run
/// (Backend::setRunContext).
struct RunContext {
  uint64_t seed;
  uint64_t sampleOffset;
  uint32_t step;
  /// The first bad datum a kernel met (an index out of range), which the
  /// executor reports after the run: a device kernel cannot return an
  /// error. The kernel that wins errorBits (0 -> its RunError) fills the
  /// rest. Cleared before each run.
  uint32_t errorBits;
  int64_t badValue, badPosition, badLimit, badIgnore;
};

/// errorBits: which kernel met bad data.
enum RunError : uint32_t {
  kEmbeddingIndex = 1,         ///< ds.embedding: an id outside [0, V)
  kEmbeddingGradIndex = 2,     ///< ds.embedding_grad: an id outside [0, V)
  kCrossEntropyTarget = 3,     ///< ds.cross_entropy: a bad target
  kCrossEntropyGradTarget = 4, ///< ds.cross_entropy_grad: a bad target
  kAdamwStep = 5,         ///< ds.adamw: step not an integer >= 1 (badValue:
                          ///< the float's bits)
  kAdamwRoundStep = 6,    ///< ds.adamw_round: the same
  kSgdStep = 7,           ///< ds.sgd: the same
  kLionStep = 8,          ///< ds.lion: the same
  kAdagradStep = 9,       ///< ds.adagrad: the same
  kBeta1Value = 10,       ///< ds.adamw(_round), ds.lion(_round): beta1_value
                          ///< outside [0, 1) (badValue: the float's bits;
                          ///< badPosition: the kernel's step error)
  kSgdRoundStep = 11,     ///< ds.sgd_round: step not an integer >= 1
  kLionRoundStep = 12,    ///< ds.lion_round: the same
  kAdagradRoundStep = 13, ///< ds.adagrad_round: the same
  kLambStep = 14,         ///< ds.lamb: the same
  kLinearCrossEntropyTarget = 15,   ///< ds.linear_cross_entropy: a bad target
  kCrossEntropyPartTarget = 16,     ///< ds.cross_entropy_part: a bad target
  kCrossEntropyPartGradTarget = 17, ///< ds.cross_entropy_part_grad: the same
};

/// One plan stream's library handles.
struct CudaHandles {
  void *lt = nullptr;        ///< cublasLtHandle_t
  void *workspace = nullptr; ///< cuBLASLt workspace, device memory
  size_t workspaceBytes = 0;
  RunContext *run = nullptr; ///< device memory, shared by all streams
  void *owner = nullptr; ///< the CudaDevice (host code: its NCCL communicator)
  /// TF32 tensor cores for f32 GEMMs (`--backend cuda:tf32=on`); off by
  /// default, so f32 plans compute as the CPU backend does.
  bool allowTf32 = false;
};

} // namespace dsc::rt::cuda

#endif // DSC_RUNTIME_BACKENDS_CUDA_CUDAHANDLES_H
