//===- NumberText.h - numbers from flags and environment variables -*- C++
//-*-===//
//
// Every number a user types (a dsrun or dsc flag, DSC_CPU_THREADS,
// DSC_COMM_TIMEOUT) goes through one of these parsers, so that "0", "-3",
// "abc", "1e400" and 2^64 + 1 are refused the same way everywhere instead of
// wrapping, saturating or being ignored. Each returns false on a bad text;
// the caller's message names the flag or variable, and `expectedCount`
// says what was wanted. Header-only.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_CORE_NUMBERTEXT_H
#define DSC_RUNTIME_CORE_NUMBERTEXT_H

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace dsc {

/// Decimal digits only (no sign, no spaces, no suffix) naming a value in
/// [min, max].
inline bool parseCount(std::string_view text, uint64_t min, uint64_t max,
                       uint64_t &out) {
  if (text.empty() || text[0] < '0' || text[0] > '9')
    return false;
  uint64_t value = 0;
  const char *end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || value < min || value > max)
    return false;
  out = value;
  return true;
}

/// "an integer from 1 to 64", "a non-negative integer up to 4294967295".
inline std::string expectedCount(uint64_t min, uint64_t max) {
  if (min == 0)
    return "a non-negative integer up to " + std::to_string(max);
  return "an integer from " + std::to_string(min) + " to " +
         std::to_string(max);
}

/// A finite decimal number in [min, max] (strtod's syntax, whole text).
inline bool parseFiniteNumber(std::string_view text, double min, double max,
                              double &out) {
  std::string copy(text);
  if (copy.empty() || copy[0] == ' ' || copy[0] == '\t')
    return false;
  char *end = nullptr;
  double value = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || !std::isfinite(value) ||
      value < min || value > max)
    return false;
  out = value;
  return true;
}

/// An environment variable holding a count: `out` unchanged when unset;
/// false + "NAME=TEXT: expected ..." when set to anything else.
inline bool envCount(const char *name, uint64_t min, uint64_t max,
                     uint64_t &out, std::string &error) {
  const char *text = std::getenv(name);
  if (!text)
    return true;
  if (parseCount(text, min, max, out))
    return true;
  error =
      std::string(name) + "=" + text + ": expected " + expectedCount(min, max);
  return false;
}

} // namespace dsc

#endif // DSC_RUNTIME_CORE_NUMBERTEXT_H
