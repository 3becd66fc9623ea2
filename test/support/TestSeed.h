//===- TestSeed.h - the seed of a randomized test ---------------*- C++ -*-===//
//
// Randomized tests draw a fresh seed each run, so that reruns explore new
// inputs, and must say which one failed: every user prints the seed in its
// failure messages (SCOPED_TRACE) and DSC_TEST_SEED=<seed> replays it.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TEST_SUPPORT_TESTSEED_H
#define DSC_TEST_SUPPORT_TESTSEED_H

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

namespace dsc::test {

/// DSC_TEST_SEED when set (decimal or 0x hex), else a fresh random seed.
inline uint64_t testSeed() {
  if (const char *s = std::getenv("DSC_TEST_SEED"))
    return std::strtoull(s, nullptr, 0);
  std::random_device rd;
  return (uint64_t(rd()) << 32) | rd();
}

/// The line a failure prints: "DSC_TEST_SEED=<seed> replays this run".
inline std::string seedNote(uint64_t seed) {
  return "DSC_TEST_SEED=" + std::to_string(seed) + " replays this run";
}

} // namespace dsc::test

#endif // DSC_TEST_SUPPORT_TESTSEED_H
