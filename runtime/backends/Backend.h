//===- Backend.h - what a runtime backend provides --------------*- C++ -*-===//
//
// The runtime core (plan verifier, Session, executor, dsrun's tooling) knows
// backends only through this interface, as IREE's runtime knows its HAL
// drivers: where arenas live, how bytes move between host memory and an
// arena, where instructions run, the kernel table and, when a backend needs
// one, the executor of its streams (StreamExecutor.h). A backend is one
// directory under runtime/backends/ that registers itself in the registry
// (Registry.h); AllBackends.h registers every backend this build has.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_BACKEND_H
#define DSC_RUNTIME_BACKENDS_BACKEND_H

#include "runtime/backends/StreamExecutor.h"
#include "runtime/core/MemorySpace.h"
#include "runtime/kernels/Kernel.h"
#include "runtime/kernels/KernelContract.h"
#include "runtime/kernels/KernelSignature.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dsc::rt {

/// Where an arena lives and where an instruction runs
/// (runtime/core/MemorySpace.h).
using dsc::MemorySpace;

/// The variants of one kernel, contiguous in the backend's table.
struct KernelVariants {
  const KernelInfo *data = nullptr;
  size_t size = 0;
  const KernelInfo *begin() const { return data; }
  const KernelInfo *end() const { return data + size; }
  bool empty() const { return size == 0; }
};

/// Sorts a kernel table by name, keeping each name's variants in table
/// order (for variantsOf). Registry.cpp.
void sortKernelTable(std::vector<KernelInfo> &table);

/// Appends one variant per signature of `contract`'s `column`, each run by
/// `fn` (Registry.cpp).
void addKernelVariants(std::vector<KernelInfo> &table,
                       const KernelContract &contract, KernelColumn column,
                       KernelFn fn);

/// The variants of `name` in a table sorted by sortKernelTable.
KernelVariants variantsOf(const std::vector<KernelInfo> &table,
                          std::string_view name);

/// A device's memory in bytes, as its driver reports it: in use on the
/// whole device (every process), in use when the backend had opened it
/// (its context, streams and workspaces; before any arena), and its size.
struct DeviceMemory {
  uint64_t used = 0, baseline = 0, total = 0;
};

class Backend {
public:
  virtual ~Backend() = default;

  /// The name `dsrun --backend` selects it by ("cpu", "cuda").
  virtual std::string_view name() const = 0;

  /// Every variant of the kernel called `name` (empty when there is none).
  /// The plan verifier checks each instruction's arity and dtypes against
  /// them; the Session calls the variant the dtypes select.
  virtual KernelVariants kernelVariants(std::string_view name) const = 0;

  /// The variants for an instruction placed in `where`: a GPU backend runs
  /// host-placed instructions (offload's CPU optimizer) with the CPU
  /// backend's kernels. The same table for both spaces by default.
  virtual KernelVariants kernelVariants(std::string_view name,
                                        MemorySpace where) const {
    (void)where;
    return kernelVariants(name);
  }

  /// The first variant of `name` (enough for its arity), or null.
  const KernelInfo *findKernel(std::string_view name,
                               MemorySpace where = MemorySpace::device) const {
    KernelVariants v = kernelVariants(name, where);
    return v.empty() ? nullptr : v.data;
  }
  /// The variant of `name` that takes these operand dtypes, or null.
  const KernelInfo *findKernel(std::string_view name, DTypeList inputs,
                               DTypeList outputs,
                               MemorySpace where = MemorySpace::device) const {
    for (const KernelInfo &k : kernelVariants(name, where))
      if (signatureMatches(k.dtypes, inputs, outputs))
        return &k;
    return nullptr;
  }

  /// Whether an instruction placed in `where` (plan.fbs Instr.space) can
  /// run here, and whether it can read and write an arena in `data`. The
  /// CPU backend runs both and reaches both; a GPU backend runs device
  /// instructions on the GPU, host instructions on the CPU, and each reaches
  /// only its own space's arenas.
  virtual bool runsIn(MemorySpace where) const = 0;
  virtual bool reaches(MemorySpace where, MemorySpace data) const = 0;

  /// The executor for this backend's Sessions, or null for the runtime's
  /// host executor (runtime/exec/Executor.h), which suits any backend whose
  /// kernels have finished when they return (the CPU's).
  virtual std::unique_ptr<StreamExecutor>
  createExecutor(const ExecutorSpec &spec) const {
    (void)spec;
    return nullptr;
  }

  /// The queue and library handles of plan stream `stream` (0 compute,
  /// 1 comm, 2 h2d, 3 d2h) for instructions placed in `where`. Valid until
  /// the backend is destroyed. Nulls by default (the CPU backend).
  virtual StreamResources streamResources(MemorySpace where, int stream) const {
    (void)where;
    (void)stream;
    return {};
  }

  /// Makes the per-run values of `ctx` (seed, step, sample offset) visible
  /// to the kernels launched next, and clears the run's error state. A
  /// backend whose executor replays captured work (CUDA graphs) keeps them
  /// in device memory, where a replayed kernel reads them; its executor
  /// calls this before each run, and so must anything that calls its
  /// kernels directly (the conformance suite). Nothing to do by default:
  /// kernels read the KernelContext.
  virtual bool setRunContext(const KernelContext &ctx, std::string &error) {
    (void)ctx;
    (void)error;
    return true;
  }

  /// The error a kernel flagged on the device since the last call (or the
  /// last setRunContext): a device kernel that meets bad data (a token id
  /// outside the table) cannot fail its call, so it records the datum and
  /// this returns the line the CPU backend's kernel would have failed with.
  /// Empty when none; always empty by default.
  virtual std::string takeKernelError() { return {}; }

  /// The device's memory as its driver reports it (for the run's summary
  /// and metrics, beside the plan's prediction); false where the backend
  /// has no device memory of its own (the CPU).
  virtual bool deviceMemory(DeviceMemory &memory) const {
    (void)memory;
    return false;
  }

  /// `bytes` of zeroed memory in `space`, 64-byte aligned (bytes may be 0).
  /// Null and one line in `error` when it cannot be had.
  virtual void *allocate(MemorySpace space, uint64_t bytes,
                         std::string &error) = 0;
  /// Frees what allocate returned (null is fine).
  virtual void release(void *block) = 0;

  /// Copies between host memory and memory from allocate: the Session's
  /// staged access, so tooling never dereferences an arena pointer.
  virtual void copyToArena(void *arena, const void *host, size_t bytes) = 0;
  virtual void copyFromArena(void *host, const void *arena, size_t bytes) = 0;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_BACKENDS_BACKEND_H
