//===- AllBackends.cpp - register every backend of this build -------------===//
#include "runtime/backends/AllBackends.h"

#include "runtime/backends/cpu/CpuBackend.h"
#if DSC_HAVE_CUDA
#include "runtime/backends/cuda/CudaBackend.h"
#endif

namespace dsc::rt {

void registerAvailableBackends() {
  registerCpuBackend();
#if DSC_HAVE_CUDA
  registerCudaBackend();
#endif
}

} // namespace dsc::rt
