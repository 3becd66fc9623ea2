//===- F32GemmTest.cpp - f32 products on oneDNN's matmul -----------------===//
//
// On an AMD CPU with AVX-512 (or with DSC_BLAS=onednn) the CPU backend's
// f32 GEMMs run on oneDNN's matmul instead of the CBLAS library's sgemm
// (runtime/backends/cpu/Blas.cpp). Each product must be the f32 sum of the
// same terms, i.e. within the sum's rounding of the float64 product, for
// every layout sgemm is called with: either operand transposed, leading
// dimensions wider than the matrix (a block of a larger one), and C += op(A)
// op(B) (beta = 1: the fused head's chunked weight gradient), leaving the
// columns past N untouched. Skipped, with the reason, where oneDNN has no
// f32 matmul.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/CpuCommon.h"
#include "test/unit/conformance/KernelTestSupport.h"

#include <cmath>
#include <limits>

namespace dsc::conformance {
namespace {

struct Product {
  bool transA, transB;
  int64_t M, N, K, pad; // each leading dimension `pad` wider than needed
  bool accumulate;
};

TEST(F32Gemm, OneDnnProductsAreTheF32SumsForEveryLayout) {
  std::string why;
  if (!rt::cpu::oneDnnF32Usable(why))
    GTEST_SKIP() << "no f32 matmul in oneDNN here: " << why;
  SEEDED_RNG(rng);
  std::uniform_real_distribution<float> dist(-2, 2);
  const Product products[] = {
      {false, false, 37, 29, 300, 0, false},
      {true, false, 37, 29, 300, 3, false},
      {false, true, 37, 29, 300, 5, false},
      {true, true, 16, 40, 64, 1, false},
      {false, false, 37, 29, 300, 2, true},
      {true, false, 64, 48, 1024, 0, true},
  };
  for (const Product &p : products) {
    SCOPED_TRACE(std::to_string(p.M) + " x " + std::to_string(p.N) + " x " +
                 std::to_string(p.K) + (p.transA ? " transA" : "") +
                 (p.transB ? " transB" : "") + " pad " + std::to_string(p.pad) +
                 (p.accumulate ? " accumulate" : ""));
    // Stored shapes: A [M, K] ([K, M] transposed), B [K, N] ([N, K]).
    const int64_t aRows = p.transA ? p.K : p.M, aCols = p.transA ? p.M : p.K;
    const int64_t bRows = p.transB ? p.N : p.K, bCols = p.transB ? p.K : p.N;
    const int64_t lda = aCols + p.pad, ldb = bCols + p.pad, ldc = p.N + p.pad;
    std::vector<float> A(size_t(aRows * lda)), B(size_t(bRows * ldb));
    std::vector<float> C(size_t(p.M * ldc));
    for (float &v : A)
      v = dist(rng);
    for (float &v : B)
      v = dist(rng);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (float &v : C)
      v = p.accumulate ? dist(rng) : nan;
    const std::vector<float> before = C;
    ASSERT_TRUE(rt::cpu::gemmF32OneDnn(p.transA, p.transB, p.M, p.N, p.K,
                                       A.data(), lda, B.data(), ldb, C.data(),
                                       ldc, p.accumulate, why))
        << why;
    for (int64_t i = 0; i < p.M; ++i) {
      for (int64_t j = 0; j < ldc; ++j) {
        const size_t at = size_t(i * ldc + j);
        if (j >= p.N) { // past N: not written
          ASSERT_TRUE(std::isnan(C[at]) ? std::isnan(before[at])
                                        : C[at] == before[at])
              << i << ", " << j;
          continue;
        }
        double want = p.accumulate ? before[at] : 0.0, magnitude = 0;
        for (int64_t k = 0; k < p.K; ++k) {
          const double a =
              p.transA ? A[size_t(k * lda + i)] : A[size_t(i * lda + k)];
          const double b =
              p.transB ? B[size_t(j * ldb + k)] : B[size_t(k * ldb + j)];
          want += a * b;
          magnitude += std::fabs(a * b);
        }
        // An f32 sum of K terms: within K roundings of its terms' sizes.
        const double tol = double(p.K + 1) * 0x1p-24 * (magnitude + 1);
        ASSERT_NEAR(C[at], want, tol) << i << ", " << j;
      }
    }
  }
}

} // namespace
} // namespace dsc::conformance
