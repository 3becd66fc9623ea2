//===- CpuBackend.h - the CPU backend ---------------------------*- C++ -*-===//
//
// Arenas in host memory (calloc'ed: fresh zero pages, touched lazily, so the
// resident set grows with what a run really uses), copies as memcpy, and
// the kernel table of CpuKernels.cpp. Both memory spaces are host memory
// here; the device space's capacity is a Session option (--device-memory).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CPU_CPUBACKEND_H
#define DSC_RUNTIME_BACKENDS_CPU_CPUBACKEND_H

#include "runtime/backends/Backend.h"

namespace dsc::rt {

class CpuBackend : public Backend {
public:
  std::string_view name() const override { return "cpu"; }
  KernelVariants kernelVariants(std::string_view name) const override;
  bool runsIn(MemorySpace) const override { return true; }
  bool reaches(MemorySpace, MemorySpace) const override { return true; }
  void *allocate(MemorySpace space, uint64_t bytes,
                 std::string &error) override;
  void release(void *block) override;
  void copyToArena(void *arena, const void *host, size_t bytes) override;
  void copyFromArena(void *host, const void *arena, size_t bytes) override;
};

/// Registers "cpu" in the backend registry.
void registerCpuBackend();

} // namespace dsc::rt

#endif // DSC_RUNTIME_BACKENDS_CPU_CPUBACKEND_H
