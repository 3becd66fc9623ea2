//===- PlanChecksum.h - the checksum a plan file carries --------*- C++ -*-===//
//
// Plan.checksum is FNV-1a (runtime/core/Fnv1a.h) over the whole plan file
// with the checksum's own 8 bytes read as zeros. dsc writes it last
// (sealPlan); the loader recomputes it before trusting any field, so a
// flipped byte in an initializer or a kernel attribute is refused instead of
// silently changing the run. The FlatBuffers verifier alone cannot see such
// a byte: it checks offsets, not values.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_PLAN_PLANCHECKSUM_H
#define DSC_RUNTIME_PLAN_PLANCHECKSUM_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace dsc::plan {

/// What a plan builder passes as Plan.checksum so the field is stored (a
/// FlatBuffers scalar equal to its default is left out); sealPlan then
/// overwrites it.
constexpr uint64_t kUnsealedChecksum = ~0ull;

/// The byte offset of Plan.checksum in a verified plan buffer, or none when
/// the plan does not store one.
std::optional<size_t> checksumOffset(const uint8_t *data, size_t size);

/// The checksum of a plan buffer whose checksum field is at `offset`.
uint64_t computeChecksum(const uint8_t *data, size_t size, size_t offset);

/// Writes the checksum into a finished plan that stores the field (built
/// with kUnsealedChecksum); false when it does not.
bool sealPlan(std::vector<uint8_t> &bytes);

} // namespace dsc::plan

#endif // DSC_RUNTIME_PLAN_PLANCHECKSUM_H
