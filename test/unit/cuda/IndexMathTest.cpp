//===- IndexMathTest.cpp - offsets without 64-bit division ----------------===//
//
// FastDivmod and NarrowLayout (runtime/backends/cuda/IndexMath.h) are the
// same text on host and device; here they are checked against plain
// division: divisors of every size up to 2^31 - 1 with numerators at the
// edges, and the offsets of broadcast layouts element by element.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/IndexMath.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

using dsc::rt::BroadcastLayout;
using dsc::rt::TensorRef;
using dsc::rt::cuda::FastDivmod;
using dsc::rt::cuda::NarrowLayout;

namespace {

constexpr uint32_t kTop = (uint32_t(1) << 31) - 1; // the largest numerator

void expectDivides(uint32_t d, uint32_t n) {
  const FastDivmod f(d);
  const uint32_t q = f.div(n);
  ASSERT_EQ(q, n / d) << n << " / " << d;
  ASSERT_EQ(f.mod(n, q), n % d) << n << " % " << d;
}

TEST(IndexMath, FastDivmodIsExact) {
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= 3000; ++d)
    divisors.push_back(d);
  for (int k = 12; k < 31; ++k)
    for (int64_t delta : {-1, 0, 1})
      divisors.push_back(uint32_t((int64_t(1) << k) + delta));
  for (uint32_t d : {50304u, 50257u, 3072u * 1024u, 12u * 1024u, kTop})
    divisors.push_back(d);
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any(0, kTop);
  for (uint32_t d : divisors) {
    for (uint32_t n : {0u, 1u, d - 1, d, d + 1, kTop, kTop - 1, kTop / d * d,
                       kTop / d * d - 1})
      if (n <= kTop)
        expectDivides(d, n);
    for (int i = 0; i < 200; ++i)
      expectDivides(d, any(rng));
  }
  for (uint32_t n = 0; n < 100000; ++n) // every small numerator
    expectDivides(7, n);
}

/// Offsets of flat index i as the 64-bit kernels compute them.
void wideOffsets(const BroadcastLayout &l, int64_t i, int64_t &o0,
                 int64_t &o1) {
  o0 = o1 = 0;
  for (int d = l.rank - 1; d >= 0; --d) {
    const int64_t idx = i % l.shape[d];
    i /= l.shape[d];
    o0 += idx * l.strides[0][d];
    o1 += idx * l.strides[1][d];
  }
}

TEST(IndexMath, NarrowOffsetsEqualWideOnes) {
  struct Case {
    std::vector<int64_t> out, a, b;
  } cases[] = {
      {{2, 1024, 768}, {2, 1024, 768}, {768}},       // a bias
      {{3, 5, 7}, {3, 5, 7}, {3, 5, 7}},             // same shapes
      {{4, 6, 10}, {4, 1, 10}, {6, 1}},              // both broadcast
      {{2, 3, 4, 5, 6}, {1, 3, 1, 5, 1}, {2, 1, 4}}, // a rank-4 walk
      {{9, 11}, {1}, {9, 11}},                       // a scalar
  };
  for (const Case &c : cases) {
    TensorRef out{nullptr, dsc::rt::DType::f32, c.out.data(),
                  int(c.out.size())},
        a{nullptr, dsc::rt::DType::f32, c.a.data(), int(c.a.size())},
        b{nullptr, dsc::rt::DType::f32, c.b.data(), int(c.b.size())};
    const BroadcastLayout l = dsc::rt::broadcastLayout(out, &a, &b);
    NarrowLayout n;
    ASSERT_TRUE(narrowLayout(l, out.numel(), n));
    for (int64_t i = 0; i < out.numel(); ++i) {
      int64_t w0, w1;
      uint32_t n0, n1;
      wideOffsets(l, i, w0, w1);
      n.offsets(uint32_t(i), n0, n1);
      ASSERT_EQ(int64_t(n0), w0) << i;
      ASSERT_EQ(int64_t(n1), w1) << i;
    }
  }
}

TEST(IndexMath, WideLayoutsStayWide) {
  BroadcastLayout l;
  l.rank = 2;
  l.shape[0] = 1 << 16;
  l.shape[1] = 1 << 15;
  l.strides[0][0] = 1 << 15;
  l.strides[0][1] = 1;
  NarrowLayout n;
  EXPECT_FALSE(narrowLayout(l, int64_t(1) << 31, n)); // 2^31 elements
  l.shape[0] = 1 << 15;
  EXPECT_TRUE(narrowLayout(l, int64_t(1) << 30, n));
  l.strides[1][0] = int64_t(1) << 17; // a gather from a bigger tensor
  EXPECT_FALSE(narrowLayout(l, int64_t(1) << 30, n));
  l.strides[1][0] = -1;
  EXPECT_FALSE(narrowLayout(l, int64_t(1) << 30, n));
}

} // namespace
