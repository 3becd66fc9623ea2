//===- Backend.h - what a runtime backend provides --------------*- C++ -*-===//
//
// The runtime core (plan verifier, Session, executor, dsrun's tooling) knows
// backends only through this interface, as IREE's runtime knows its HAL
// drivers: where arenas live, how bytes move between host memory and an
// arena, and the kernel table. A backend is one directory under
// runtime/backends/ that registers itself in the registry (Registry.h);
// AllBackends.h registers every backend this build has.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_BACKEND_H
#define DSC_RUNTIME_BACKENDS_BACKEND_H

#include "runtime/kernels/Kernel.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dsc::rt {

/// Where an arena lives; the values of plan.fbs's Space.
enum class MemorySpace : uint8_t { device = 0, host = 1 };

class Backend {
public:
  virtual ~Backend() = default;

  /// The name `dsrun --backend` selects it by ("cpu", "cuda").
  virtual std::string_view name() const = 0;

  /// The kernel called `name`, or null. The plan verifier checks a plan's
  /// kernels and their arity against this table; the Session calls them.
  virtual const KernelInfo *findKernel(std::string_view name) const = 0;

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
