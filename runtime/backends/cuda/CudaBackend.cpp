//===- CudaBackend.cpp - the CUDA backend ---------------------------------===//
#include "runtime/backends/cuda/CudaBackend.h"

#include "runtime/backends/Registry.h"
#include "runtime/backends/cuda/CudaDevice.h"
#include "runtime/backends/cuda/CudaExecutor.h"
#include "runtime/backends/cuda/CudaKernels.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_set>

namespace dsc::rt {
namespace {

using cuda::cudaOk;

// What the CUDA backend decides without a device: its kernel tables and
// where instructions run and reach (createCudaPlanChecker).
class CudaTables : public Backend {
public:
  std::string_view name() const override { return "cuda"; }
  KernelVariants kernelVariants(std::string_view name) const override {
    return cuda::cudaKernelVariants(name);
  }
  // Host-placed instructions (offload's optimizer) run the CPU backend's
  // kernels, on the CPU, in their plan stream's order (CudaExecutor.h).
  KernelVariants kernelVariants(std::string_view name,
                                MemorySpace where) const override {
    return where == MemorySpace::host ? hostKernelVariants(name)
                                      : cuda::cudaKernelVariants(name);
  }
  bool runsIn(MemorySpace) const override { return true; }
  // Host arenas are pinned, so device kernels reach them too (through
  // unified addressing, at the bus's speed); the CPU reaches host arenas
  // only.
  bool reaches(MemorySpace where, MemorySpace data) const override {
    return where == MemorySpace::device || data == MemorySpace::host;
  }
  // No memory without a device (the checker's verifier allocates none).
  void *allocate(MemorySpace, uint64_t, std::string &error) override {
    error = "the CUDA plan checker has no device memory";
    return nullptr;
  }
  void release(void *) override {}
  void copyToArena(void *, const void *, size_t) override {}
  void copyFromArena(void *, const void *, size_t) override {}
};

class CudaBackend final : public CudaTables {
public:
  ~CudaBackend() override { device_.close(); }

  bool open(const cuda::CudaDevice::Settings &settings, std::string &error) {
    int ordinal = 0;
    if (!cuda::pickDevice(ordinal, error) ||
        !device_.open(ordinal, settings, error))
      return false;
    DeviceMemory now;
    if (deviceMemory(now)) // before any arena: the context's own cost
      baseline_ = now.used;
    return true;
  }

  bool deviceMemory(DeviceMemory &memory) const override {
    cudaSetDevice(device_.ordinal);
    size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
      (void)cudaGetLastError(); // not a kernel's error
      return false;
    }
    memory.used = total - free;
    memory.baseline = baseline_;
    memory.total = total;
    return true;
  }

  std::unique_ptr<StreamExecutor>
  createExecutor(const ExecutorSpec &spec) const override {
    return cuda::createCudaExecutor(const_cast<cuda::CudaDevice &>(device_),
                                    spec);
  }
  StreamResources streamResources(MemorySpace where,
                                  int stream) const override {
    if (stream < 0 || stream >= kNumStreams)
      return {};
    // A host instruction gets its plan stream's queue (for its order) but
    // no device handles: its kernel is the CPU's.
    return {device_.streams[size_t(stream)],
            where == MemorySpace::host ? nullptr
                                       : const_cast<cuda::CudaHandles *>(
                                             &device_.handles[size_t(stream)])};
  }
  bool setRunContext(const KernelContext &ctx, std::string &error) override {
    cudaSetDevice(device_.ordinal);
    cuda::RunContext values{ctx.seed, ctx.sampleOffset, ctx.step, 0, 0, 0, 0,
                            0};
    return device_.writeRunContext(values, error);
  }
  std::string takeKernelError() override {
    std::string message, error;
    if (!device_.takeRunError(message, error))
      return error;
    return message;
  }

  void *allocate(MemorySpace space, uint64_t bytes,
                 std::string &error) override {
    cudaSetDevice(device_.ordinal); // the calling thread's current device
    void *block = nullptr;
    size_t n = bytes ? size_t(bytes) : 1;
    if (space == MemorySpace::host) {
      if (!cudaOk(cudaHostAlloc(&block, n, cudaHostAllocPortable), error,
                  "cudaHostAlloc"))
        return nullptr;
      std::memset(block, 0, n);
      std::lock_guard<std::mutex> lock(mutex_);
      hostBlocks_.insert(block);
      return block;
    }
    // cudaMalloc aligns to 256 bytes.
    if (!cudaOk(cudaMalloc(&block, n), error, "cudaMalloc"))
      return nullptr;
    // Zeroed on a plan stream and waited for: cudaMemset would run on the
    // legacy stream, which the non-blocking plan streams do not wait for.
    cudaStream_t s = device_.streams[0];
    if (!cudaOk(cudaMemsetAsync(block, 0, n, s), error, "cudaMemsetAsync") ||
        !cudaOk(cudaStreamSynchronize(s), error, "cudaStreamSynchronize")) {
      cudaFree(block);
      return nullptr;
    }
    return block;
  }

  void release(void *block) override {
    if (!block)
      return;
    bool host;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      host = hostBlocks_.erase(block) > 0;
    }
    cudaSetDevice(device_.ordinal);
    std::string ignored;
    device_.synchronize(ignored); // nothing in flight may still use it
    if (host)
      cudaFreeHost(block);
    else
      cudaFree(block);
  }

  // The Session stages through these between runs only; a plan stream
  // carries the copy so that it is ordered after (and finished before)
  // anything the streams did.
  void copyToArena(void *arena, const void *host, size_t bytes) override {
    copy(arena, host, bytes);
  }
  void copyFromArena(void *host, const void *arena, size_t bytes) override {
    copy(host, arena, bytes);
  }

private:
  void copy(void *dst, const void *src, size_t bytes) {
    if (!bytes)
      return;
    cudaSetDevice(device_.ordinal);
    std::string error;
    cudaStream_t s = device_.streams[0];
    if (!cudaOk(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s), error,
                "cudaMemcpyAsync") ||
        !cudaOk(cudaStreamSynchronize(s), error, "cudaStreamSynchronize")) {
      // The interface has no error path: a failed copy here means the
      // device is gone, and nothing after it can be trusted.
      std::fprintf(stderr, "dsrun: cuda: %s\n", error.c_str());
      std::abort();
    }
  }

  cuda::CudaDevice device_;
  uint64_t baseline_ = 0; // device memory in use once opened
  std::mutex mutex_;
  std::unordered_set<void *> hostBlocks_;
};

} // namespace

std::unique_ptr<Backend> createCudaPlanChecker() {
  return std::make_unique<CudaTables>();
}

void registerCudaBackend() {
  registerBackend(
      "cuda",
      [](const BackendOptions &options,
         std::string &error) -> std::unique_ptr<Backend> {
        // Options first: a typo is reported on a machine without a GPU too.
        cuda::CudaDevice::Settings settings;
        if (!checkBackendOptions("cuda", options, {"graphs", "tf32"}, error) ||
            !backendSwitch(options, "graphs", true, settings.graphs, error) ||
            !backendSwitch(options, "tf32", false, settings.tf32, error))
          return nullptr;
        auto backend = std::make_unique<CudaBackend>();
        if (!backend->open(settings, error))
          return nullptr;
        return backend;
      });
}

} // namespace dsc::rt
