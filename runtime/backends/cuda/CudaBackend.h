//===- CudaBackend.h - the CUDA backend -------------------------*- C++ -*-===//
//
// Device arenas are one cudaMalloc each; host arenas are pinned
// (cudaHostAlloc), so copies between the spaces run at full bandwidth and
// asynchronously. Each plan stream is a non-blocking cudaStream_t with its
// own cuBLASLt handle and workspace (CudaHandles.h); the executor
// (CudaExecutor.h) enqueues a program's kernels on them, turns the plan's
// events into cudaEvent_t's and replays a program as a CUDA graph from its
// second run on. Device instructions only: host-placed instructions (offload
// plans) wait for a per-space kernel lookup (docs/cuda.md).
//
// The GPU is the local rank's (OMPI_COMM_WORLD_LOCAL_RANK modulo the
// visible devices), so ranks on one machine take one GPU each.
//
// No CUDA header here: the runtime core and dsrun include this file.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CUDA_CUDABACKEND_H
#define DSC_RUNTIME_BACKENDS_CUDA_CUDABACKEND_H

#include "runtime/backends/Backend.h"
#include "runtime/kernels/KernelContract.h"

#include <memory>

namespace dsc::rt {

/// Registers "cuda" in the backend registry. Creating it fails with one line
/// on a machine with no usable GPU.
void registerCudaBackend();

/// The CUDA backend's kernel tables and placement rules without a device:
/// LoadedPlan verifies a plan against it as `dsrun --backend cuda` would,
/// where no GPU is (CudaPlansTest). It allocates nothing and runs nothing.
std::unique_ptr<Backend> createCudaPlanChecker();

namespace cuda {

/// Every CUDA kernel variant, sorted by name (KernelTableTest compares it
/// with the CPU's).
const std::vector<KernelInfo> &cudaKernels();

/// Whether the CUDA backend leaves out a dtype column its kernel's contract
/// declares (the gaps, each with its reason, are in CudaKernels.cpp).
bool isCudaKernelGap(KernelId id, KernelColumn column);

} // namespace cuda
} // namespace dsc::rt

#endif // DSC_RUNTIME_BACKENDS_CUDA_CUDABACKEND_H
