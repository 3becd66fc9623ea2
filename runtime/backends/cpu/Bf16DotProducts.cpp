//===- Bf16DotProducts.cpp - bf16 products on AVX512-BF16 -----------------===//

#include "runtime/backends/cpu/Bf16DotProducts.h"

#include "runtime/backends/cpu/AmxTiles.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define DSC_HAVE_DOT_BF16 1
#include <cstring>
#include <immintrin.h>
// The instructions for these functions alone, whatever the build machine
// has: they run only where dotProductsUsable() said yes.
#define DSC_DOT_BF16 __attribute__((target("avx512f,avx512bf16")))
#endif

namespace dsc::rt::cpu {

#if DSC_HAVE_DOT_BF16
namespace {

constexpr int kRows = 8; // rows of C a block: 8 x Cn accumulators

/// A block of kRows x 16 Cn of C over all of K: each step of kk loads Cn
/// registers of packed B and broadcasts each row's pair of A.
template <int Cn>
DSC_DOT_BF16 void dotBlock(int64_t K, const uint16_t *A, int64_t lda,
                           const uint16_t *B, int64_t ldb, float *C,
                           int64_t ldc, bool accumulate) {
  __m512 acc[kRows][Cn];
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < Cn; ++c)
      acc[r][c] = accumulate ? _mm512_loadu_ps(C + r * ldc + 16 * c)
                             : _mm512_setzero_ps();
  for (int64_t kk = 0; kk < K / 2; ++kk) {
    const uint16_t *b = B + kk * ldb * 2;
    __m512bh bv[Cn];
    for (int c = 0; c < Cn; ++c)
      bv[c] = (__m512bh)_mm512_loadu_si512(b + 32 * c);
    for (int r = 0; r < kRows; ++r) {
      int32_t pair;
      std::memcpy(&pair, A + r * lda + 2 * kk, sizeof pair);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(pair);
      for (int c = 0; c < Cn; ++c)
        acc[r][c] = _mm512_dpbf16_ps(acc[r][c], av, bv[c]);
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < Cn; ++c)
      _mm512_storeu_ps(C + r * ldc + 16 * c, acc[r][c]);
}

} // namespace

bool dotProductsUsable() {
  static const bool usable = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bf16");
  }();
  return usable;
}

DSC_DOT_BF16 void dotGemm(int64_t M, int64_t N, int64_t K, const uint16_t *A,
                          int64_t lda, const uint16_t *packedB, int64_t ldb,
                          float *C, int64_t ldc, bool accumulate) {
  // Column panels outside: a panel of packed B (K x 32 bf16) stays in the
  // cache while every block of rows passes over it.
  int64_t j = 0;
  for (; j + 32 <= N; j += 32)
    for (int64_t i = 0; i < M; i += kRows)
      dotBlock<2>(K, A + i * lda, lda, packedB + j * 2, ldb, C + i * ldc + j,
                  ldc, accumulate);
  if (j < N)
    for (int64_t i = 0; i < M; i += kRows)
      dotBlock<1>(K, A + i * lda, lda, packedB + j * 2, ldb, C + i * ldc + j,
                  ldc, accumulate);
}

#else

bool dotProductsUsable() { return false; }

void dotGemm(int64_t, int64_t, int64_t, const uint16_t *, int64_t,
             const uint16_t *, int64_t, float *, int64_t, bool) {}

#endif

bool dotProductsPay() {
  static const bool pays = [] {
    __builtin_cpu_init();
    return dotProductsUsable() && __builtin_cpu_is("amd");
  }();
  return pays;
}

Bf16Product bf16Products() {
  if (amxUsable())
    return amxGemm;
  return dotProductsPay() ? dotGemm : nullptr;
}

} // namespace dsc::rt::cpu
