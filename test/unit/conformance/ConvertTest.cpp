//===- ConvertTest.cpp - vector f16/bf16 conversions vs the scalar ones ---===//
//
// runtime/backends/cpu/Convert.h must give exactly the scalar conversions'
// bits (runtime/core/Half.h) whichever path this CPU takes: every 16-bit
// pattern widened, and narrowed floats covering ties, subnormals,
// overflow, infinities and NaNs. Lengths that are not a multiple of eight
// exercise the scalar tail after the vector loop.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cpu/Convert.h"
#include "runtime/core/Half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace dsc;
using namespace dsc::rt::cpu;

namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<uint16_t> allHalves() {
  std::vector<uint16_t> h(65536 + 3); // + a tail of 3
  for (size_t i = 0; i < h.size(); ++i)
    h[i] = uint16_t(i);
  return h;
}

// Floats around every interesting boundary of both 16-bit formats.
std::vector<float> probeFloats() {
  std::vector<float> f;
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i)
    f.push_back(floatOf(uint32_t(rng())));
  for (uint32_t h = 0; h < 65536; ++h) {
    // bf16 ties and neighbours, f16 values and their midpoints.
    uint32_t b = h << 16;
    for (uint32_t d : {0u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu})
      f.push_back(floatOf(b | d));
    float x = f16ToFloat(uint16_t(h)), y = f16ToFloat(uint16_t(h + 1));
    f.push_back(x);
    if (std::isfinite(x) && std::isfinite(y))
      f.push_back((x + y) / 2);
  }
  for (float s : {0.0f, -0.0f, 65504.0f, 65520.0f, 65536.0f, 1e-8f, 6e-8f,
                  INFINITY, -INFINITY, NAN, -NAN})
    f.push_back(s);
  f.push_back(1.0f); // an odd count: a scalar tail
  return f;
}

void expectSameFloat(float got, float want, size_t i) {
  if (std::isnan(want))
    EXPECT_TRUE(std::isnan(got)) << "element " << i;
  else
    EXPECT_EQ(bitsOf(got), bitsOf(want)) << "element " << i;
}

} // namespace

TEST(Convert, WideningGivesTheScalarBits) {
  std::vector<uint16_t> h = allHalves();
  std::vector<float> f16(h.size()), bf16(h.size());
  f16ToF32(h.data(), f16.data(), int64_t(h.size()));
  bf16ToF32(h.data(), bf16.data(), int64_t(h.size()));
  for (size_t i = 0; i < h.size(); ++i) {
    expectSameFloat(f16[i], f16ToFloat(h[i]), i);
    EXPECT_EQ(bitsOf(bf16[i]), bitsOf(bf16ToFloat(h[i]))) << "element " << i;
  }
}

TEST(Convert, NarrowingRoundsAsTheScalarConversions) {
  std::vector<float> f = probeFloats();
  std::vector<uint16_t> f16(f.size()), bf16(f.size());
  f32ToF16(f.data(), f16.data(), int64_t(f.size()));
  f32ToBf16(f.data(), bf16.data(), int64_t(f.size()));
  size_t wrong = 0;
  for (size_t i = 0; i < f.size() && wrong < 10; ++i) {
    uint16_t want16 = floatToF16(f[i]), wantB = floatToBf16(f[i]);
    // NaN stays NaN (payloads may be quieted differently).
    bool ok16 =
        std::isnan(f[i]) ? std::isnan(f16ToFloat(f16[i])) : f16[i] == want16;
    bool okB =
        std::isnan(f[i]) ? std::isnan(bf16ToFloat(bf16[i])) : bf16[i] == wantB;
    wrong += !ok16 + !okB;
    EXPECT_TRUE(ok16) << "f16 of " << f[i] << " (0x" << std::hex << bitsOf(f[i])
                      << "): 0x" << f16[i] << ", want 0x" << want16;
    EXPECT_TRUE(okB) << "bf16 of " << f[i] << " (0x" << std::hex << bitsOf(f[i])
                     << "): 0x" << bf16[i] << ", want 0x" << wantB;
  }
  RecordProperty("vector_conversions", vectorConversions() ? "yes" : "no");
}
