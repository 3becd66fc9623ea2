//===- PlanChecksum.cpp - the checksum a plan file carries ----------------===//
#include "runtime/plan/PlanChecksum.h"

#include "runtime/core/Fnv1a.h"
#include "runtime/schema/plan_generated.h"

#include <cstring>

namespace dsc::plan {

std::optional<size_t> checksumOffset(const uint8_t *data, size_t size) {
  // Plan inherits flatbuffers::Table privately; the root read as a plain
  // Table gives the field's address from the vtable.
  const auto *table = flatbuffers::GetRoot<flatbuffers::Table>(data);
  const uint8_t *field = table->GetAddressOf(Plan::VT_CHECKSUM);
  if (!field || field < data || field + sizeof(uint64_t) > data + size)
    return std::nullopt;
  return size_t(field - data);
}

uint64_t computeChecksum(const uint8_t *data, size_t size, size_t offset) {
  const uint8_t zeros[sizeof(uint64_t)] = {};
  uint64_t h = fnv1a64(data, offset);
  h = fnv1a64(zeros, sizeof zeros, h);
  const size_t rest = offset + sizeof zeros;
  return fnv1a64(data + rest, size - rest, h);
}

bool sealPlan(std::vector<uint8_t> &bytes) {
  std::optional<size_t> offset = checksumOffset(bytes.data(), bytes.size());
  if (!offset)
    return false;
  // FlatBuffers scalars are little-endian, as on every host dsc supports.
  uint64_t sum = computeChecksum(bytes.data(), bytes.size(), *offset);
  flatbuffers::WriteScalar(bytes.data() + *offset, sum);
  return true;
}

} // namespace dsc::plan
