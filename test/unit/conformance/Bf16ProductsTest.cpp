//===- Bf16ProductsTest.cpp - the small bf16 GEMMs of 16-bit kernels ------===//
//
// bf16 attention multiplies on AMX's tiles (AmxTiles.h) or, on a CPU where
// they pay, on AVX512-BF16's dot products (Bf16DotProducts.h); both take
// the same padded operands and packing. Each engine this CPU has must give
// the exact products summed in f32: within K f32 roundings of the float64
// sum of |a b|, writing only C's first N columns of each row and adding to
// C when asked. Which engine the kernels take follows the CPU (tiles, else
// dot products on an AMD CPU, else none).
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/AmxTiles.h"
#include "runtime/backends/cpu/Bf16DotProducts.h"
#include "runtime/backends/cpu/Convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace dsc::conformance {
namespace {

using rt::cpu::Bf16Product;

struct Engine {
  const char *name;
  Bf16Product multiply;
};

std::vector<Engine> enginesOfThisCpu() {
  std::vector<Engine> out;
  if (rt::cpu::amxUsable())
    out.push_back({"AMX tiles", rt::cpu::amxGemm});
  if (rt::cpu::dotProductsUsable())
    out.push_back({"AVX512-BF16 dot products", rt::cpu::dotGemm});
  return out;
}

std::vector<uint16_t> randomBf16(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> f(n);
  for (float &x : f)
    x = u(rng);
  std::vector<uint16_t> bits(n);
  rt::cpu::f32ToBf16(f.data(), bits.data(), int64_t(n));
  return bits;
}

float widen(uint16_t b) {
  float f;
  rt::cpu::bf16ToF32(&b, &f, 1);
  return f;
}

// C (+)= A B for one engine, checked element by element against float64:
// B is given packed [K / 2][ldb][2] and read through the same packing here.
void checkProduct(const Engine &e, int64_t M, int64_t N, int64_t K,
                  bool accumulate) {
  SCOPED_TRACE(std::string(e.name) + " " + std::to_string(M) + "x" +
               std::to_string(N) + "x" + std::to_string(K) +
               (accumulate ? " accumulating" : ""));
  const int64_t lda = K + 32, ldb = N + 16, ldc = N + 16;
  const auto A = randomBf16(size_t(M * lda), unsigned(M + N + K));
  const auto B = randomBf16(size_t(K / 2 * ldb * 2), unsigned(M * N + K));
  std::vector<float> C(size_t(M * ldc));
  for (size_t i = 0; i < C.size(); ++i)
    C[i] = float(int(i % 7) - 3) * 0.25f; // the sum's start, or to be set
  const std::vector<float> before = C;
  e.multiply(M, N, K, A.data(), lda, B.data(), ldb, C.data(), ldc, accumulate);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const size_t at = size_t(i * ldc + j);
      if (j >= N) {
        ASSERT_EQ(C[at], before[at]) << "column " << j << " past N written";
        continue;
      }
      double exact = accumulate ? double(before[at]) : 0.0, magnitude = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = double(widen(A[size_t(i * lda + k)])) *
                         widen(B[size_t((k / 2) * ldb * 2 + j * 2 + k % 2)]);
        exact += p;
        magnitude += std::abs(p);
      }
      ASSERT_LE(std::abs(double(C[at]) - exact),
                double(K + 1) * 0x1p-24 * (magnitude + std::abs(before[at])))
          << "C[" << i << "][" << j << "] = " << C[at] << ", exact " << exact;
    }
}

TEST(Bf16Products, EachEngineSumsTheExactProductsInF32) {
  const auto engines = enginesOfThisCpu();
  if (engines.empty())
    GTEST_SKIP() << "neither AMX tiles nor AVX512-BF16 on this CPU";
  struct Shape {
    int64_t M, N, K;
  };
  for (const Engine &e : engines)
    for (Shape s : {Shape{16, 16, 32}, Shape{32, 48, 64}, Shape{64, 80, 96},
                    Shape{48, 128, 512}})
      for (bool accumulate : {false, true})
        checkProduct(e, s.M, s.N, s.K, accumulate);
}

std::string cpuVendor() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("vendor_id", 0) == 0)
      return line.substr(line.find(':') + 2);
  return "";
}

// Tiles wherever this process may use them; else AVX512-BF16's dot
// products on an AMD CPU only (an Intel core without AMX runs one 512-bit
// dot product a cycle, no faster than its two f32 FMAs); else widening.
TEST(Bf16Products, KernelsTakeTheEngineThisCpuCallsFor) {
  const Bf16Product chosen = rt::cpu::bf16Products();
  if (rt::cpu::amxUsable())
    EXPECT_EQ(chosen, rt::cpu::amxGemm);
  else if (rt::cpu::dotProductsUsable() && cpuVendor() == "AuthenticAMD")
    EXPECT_EQ(chosen, rt::cpu::dotGemm);
  else
    EXPECT_EQ(chosen, nullptr) << "vendor " << cpuVendor();
}

} // namespace
} // namespace dsc::conformance
