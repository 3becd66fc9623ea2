//===- MemorySpace.h - where a buffer lives, where work runs ----*- C++ -*-===//
//
// One enum for the backends (where an arena is allocated, where an
// instruction runs), the plan loader and the compiler's plan model, with
// the values of dsc.plan.Space in runtime/schema/plan.fbs. The schema's
// generated enum is a type of its own; plan::memorySpace and
// plan::schemaSpace (runtime/plan/PlanFormat.h) are the one conversion
// between the two, with a static_assert on the values. Header-only,
// standard library only.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_CORE_MEMORYSPACE_H
#define DSC_RUNTIME_CORE_MEMORYSPACE_H

#include <cstdint>

namespace dsc {

/// On the CPU backend "device" is an arena with a capacity
/// (--device-memory), so budgets behave as on a GPU.
enum class MemorySpace : uint8_t { device = 0, host = 1 };

} // namespace dsc

#endif // DSC_RUNTIME_CORE_MEMORYSPACE_H
