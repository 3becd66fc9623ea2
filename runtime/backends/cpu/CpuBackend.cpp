//===- CpuBackend.cpp - the CPU backend -----------------------------------===//
#include "runtime/backends/cpu/CpuBackend.h"
#include "runtime/backends/cpu/CpuCommon.h"

#include "runtime/backends/Registry.h"
#include "runtime/backends/cpu/CpuKernels.h"

#include <cstdlib>
#include <cstring>

namespace dsc::rt {
namespace {

constexpr uintptr_t kAlignment = 64;

// The block calloc returned sits in the word before the aligned address.
void *&originOf(void *aligned) { return static_cast<void **>(aligned)[-1]; }

} // namespace

KernelVariants CpuBackend::kernelVariants(std::string_view name) const {
  return cpuKernelVariants(name);
}

void *CpuBackend::allocate(MemorySpace, uint64_t bytes, std::string &error) {
  size_t total = size_t(bytes) + kAlignment + sizeof(void *);
  if (bytes > (uint64_t(1) << 56) || total < bytes) {
    error = std::to_string(bytes) + " bytes is more than this machine has";
    return nullptr;
  }
  void *block = std::calloc(1, total);
  if (!block) {
    error = "cannot allocate " + std::to_string(bytes) + " bytes";
    return nullptr;
  }
  uintptr_t p = reinterpret_cast<uintptr_t>(block) + sizeof(void *);
  p = (p + kAlignment - 1) & ~(kAlignment - 1);
  void *aligned = reinterpret_cast<void *>(p);
  originOf(aligned) = block;
  return aligned;
}

void CpuBackend::release(void *block) {
  if (block)
    std::free(originOf(block));
}

void CpuBackend::copyToArena(void *arena, const void *host, size_t bytes) {
  if (bytes)
    std::memcpy(arena, host, bytes);
}

void CpuBackend::copyFromArena(void *host, const void *arena, size_t bytes) {
  if (bytes)
    std::memcpy(host, arena, bytes);
}

void registerCpuBackend() {
  registerHostKernels(cpuKernelVariants);
  registerBackend("cpu",
                  [](const BackendOptions &options,
                     std::string &error) -> std::unique_ptr<Backend> {
                    int threads = 1;
                    std::string blas, bf16Gemm, pool;
                    if (!checkBackendOptions("cpu", options, {}, error) ||
                        !cpu::kernelThreadsFromEnv(threads, error) ||
                        !cpu::blasChoiceFromEnv(blas, error) ||
                        !cpu::bf16GemmChoiceFromEnv(bf16Gemm, error) ||
                        !cpu::cpuPoolChoiceFromEnv(pool, error))
                      return nullptr;
                    if (pool == "openmp" && !cpu::openMpTeamLoads()) {
                      error = "DSC_CPU_POOL=openmp: cannot load libgomp.so.1";
                      return nullptr;
                    }
                    // The GEMM library is loaded now, its pages in the
                    // run's baseline, not the first step's memory. One
                    // asked for by name that is missing stops the run
                    // before it starts; without any (auto), a plan's
                    // first GEMM says so, and plans without one run.
                    if (!cpu::blasReady(error) && blas != "auto")
                      return nullptr;
                    error.clear();
                    // oneDNN is loaded (and probed) now, unless bf16
                    // products are widened: its pages then count in the
                    // run's baseline, not as the first step's memory.
                    const bool nativeBf16 =
                        bf16Gemm != "widen" && cpu::nativeBf16Gemm();
                    if (bf16Gemm == "onednn" && !nativeBf16) {
                      error = "DSC_BF16_GEMM=onednn: " + cpu::bf16GemmLibrary();
                      return nullptr;
                    }
                    return std::make_unique<CpuBackend>();
                  });
}

} // namespace dsc::rt
