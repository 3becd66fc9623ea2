//===- Half.h - 16-bit float storage formats to and from float --*- C++ -*-===//
//
// bf16 and IEEE f16 values as their 16-bit patterns, converted exactly to
// float and rounded from float to nearest even (NaN stays NaN). For the CPU
// kernels' casts and the collectives' 16-bit sums. f16 goes through the
// compiler's _Float16 (GCC >= 12, Clang >= 15). Header-only.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_CORE_HALF_H
#define DSC_RUNTIME_CORE_HALF_H

#include <cstdint>
#include <cstring>

#ifndef __FLT16_MAX__
#error "dsc needs a compiler with _Float16 (GCC >= 12, Clang >= 15)"
#endif

namespace dsc {

inline float bf16ToFloat(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint16_t floatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  // Adding 0x7FFF plus the lowest kept bit rounds the dropped half to
  // nearest even; a carry into the exponent gives the next binade or inf.
  uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  uint32_t quietNan = (u >> 16) | 0x40u;
  return uint16_t((u & 0x7FFFFFFFu) > 0x7F800000u ? quietNan : rounded);
}

inline float f16ToFloat(uint16_t h) {
  _Float16 v;
  std::memcpy(&v, &h, sizeof v);
  return float(v);
}

inline uint16_t floatToF16(float f) {
  _Float16 v = _Float16(f);
  uint16_t h;
  std::memcpy(&h, &v, sizeof h);
  return h;
}

} // namespace dsc

#endif // DSC_RUNTIME_CORE_HALF_H
