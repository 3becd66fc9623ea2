//===- ByteCount.h - "8GiB" and other byte counts on command lines -*- C++
//-*-===//
//
// dsrun's and dsc's --device-memory read the same spelling: digits with an
// optional binary suffix (K, KiB, M, MiB, G, GiB, T, TiB). Header-only.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_CORE_BYTECOUNT_H
#define DSC_RUNTIME_CORE_BYTECOUNT_H

#include <cstdint>
#include <limits>
#include <string_view>

namespace dsc {

/// False for anything else, or a count past 2^64 - 1.
inline bool parseByteCount(std::string_view text, uint64_t &out) {
  size_t digits = 0;
  uint64_t n = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    uint64_t d = uint64_t(text[digits] - '0');
    if (n > (std::numeric_limits<uint64_t>::max() - d) / 10)
      return false;
    n = n * 10 + d;
    ++digits;
  }
  if (digits == 0)
    return false;
  std::string_view suffix = text.substr(digits);
  static const struct {
    const char *name;
    int shift;
  } units[] = {{"", 0},   {"K", 10},   {"KiB", 10}, {"M", 20},  {"MiB", 20},
               {"G", 30}, {"GiB", 30}, {"T", 40},   {"TiB", 40}};
  for (const auto &u : units) {
    if (suffix != u.name)
      continue;
    if (u.shift && n > (std::numeric_limits<uint64_t>::max() >> u.shift))
      return false;
    out = n << u.shift;
    return true;
  }
  return false;
}

} // namespace dsc

#endif // DSC_RUNTIME_CORE_BYTECOUNT_H
