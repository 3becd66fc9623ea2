//===- Fnv1a.h - 64-bit FNV-1a hash of bytes --------------------*- C++ -*-===//
//
// The plan file's checksum and the identity a checkpoint records for its plan.
// Not cryptographic: it catches a flipped or truncated byte, not tampering.
// Header-only, no dependencies.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_CORE_FNV1A_H
#define DSC_RUNTIME_CORE_FNV1A_H

#include <cstddef>
#include <cstdint>

namespace dsc {

constexpr uint64_t kFnv1aOffsetBasis = 14695981039346656037ull;

/// Continues hash `h` over `n` bytes (start with kFnv1aOffsetBasis).
inline uint64_t fnv1a64(const uint8_t *data, size_t n,
                        uint64_t h = kFnv1aOffsetBasis) {
  for (size_t i = 0; i < n; ++i)
    h = (h ^ data[i]) * 1099511628211ull;
  return h;
}

} // namespace dsc

#endif // DSC_RUNTIME_CORE_FNV1A_H
