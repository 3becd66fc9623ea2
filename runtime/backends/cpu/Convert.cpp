//===- Convert.cpp - f16/bf16 <-> f32 over arrays -------------------------===//

#include "runtime/backends/cpu/Convert.h"

#include "runtime/core/Half.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define DSC_X86_VECTORS 1
#endif

namespace dsc::rt::cpu {
namespace {

#if DSC_X86_VECTORS
#define DSC_AVX2_F16C __attribute__((target("avx2,f16c")))

DSC_AVX2_F16C int64_t f16ToF32Vec(const uint16_t *in, float *out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                  reinterpret_cast<const __m128i *>(in + i))));
  return i;
}

DSC_AVX2_F16C int64_t f32ToF16Vec(const float *in, uint16_t *out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(
        reinterpret_cast<__m128i *>(out + i),
        _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  return i;
}

DSC_AVX2_F16C int64_t bf16ToF32Vec(const uint16_t *in, float *out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i w = _mm256_cvtepu16_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i *>(in + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + i),
                        _mm256_slli_epi32(w, 16));
  }
  return i;
}

// floatToBf16's rounding, eight lanes at a time.
DSC_AVX2_F16C int64_t f32ToBf16Vec(const float *in, uint16_t *out, int64_t n) {
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7FFF);
  const __m256i absMask = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i inf = _mm256_set1_epi32(0x7F800000);
  const __m256i quietBit = _mm256_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(in + i));
    __m256i high = _mm256_srli_epi32(u, 16);
    __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, bias),
                                           _mm256_and_si256(high, one)),
                          16);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, absMask), inf);
    __m256i r =
        _mm256_blendv_epi8(rounded, _mm256_or_si256(high, quietBit), nan);
    // 32 -> 16 bits: the values fit, so unsigned saturation keeps them;
    // packus works per 128-bit lane, the permute puts them in order.
    __m256i packed = _mm256_permute4x64_epi64(
        _mm256_packus_epi32(r, _mm256_setzero_si256()), 0xD8);
    _mm_storeu_si128(reinterpret_cast<__m128i *>(out + i),
                     _mm256_castsi256_si128(packed));
  }
  return i;
}

#define DSC_AVX512BW __attribute__((target("avx512f,avx512bw")))
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() values, which
// -Wmaybe-uninitialized reports wherever they are inlined (a known false
// positive: every lane is written before it is read).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// The same two conversions sixteen lanes at a time, where the CPU has
// AVX-512: a bf16 plan's kernels read and write every 16-bit operand through
// them (a bf16 add spent 40% of its time here at eight lanes).
DSC_AVX512BW int64_t bf16ToF32Vec512(const uint16_t *in, float *out,
                                     int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i w = _mm512_cvtepu16_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i *>(in + i)));
    _mm512_storeu_si512(out + i, _mm512_slli_epi32(w, 16));
  }
  return i;
}

DSC_AVX512BW int64_t f32ToBf16Vec512(const float *in, uint16_t *out,
                                     int64_t n) {
  const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7FFF);
  const __m512i absMask = _mm512_set1_epi32(0x7FFFFFFF);
  const __m512i inf = _mm512_set1_epi32(0x7F800000);
  const __m512i quietBit = _mm512_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i u = _mm512_loadu_si512(in + i);
    __m512i high = _mm512_srli_epi32(u, 16);
    __m512i rounded =
        _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, bias),
                                           _mm512_and_si512(high, one)),
                          16);
    __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, absMask), inf);
    __m512i r =
        _mm512_mask_blend_epi32(nan, rounded, _mm512_or_si512(high, quietBit));
    // Every lane fits 16 bits: truncating keeps it.
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + i),
                        _mm512_cvtepi32_epi16(r));
  }
  return i;
}
#pragma GCC diagnostic pop
#endif

bool detect() {
#if DSC_X86_VECTORS
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

bool detect512() {
#if DSC_X86_VECTORS
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw");
#else
  return false;
#endif
}

bool vector512() {
  static const bool yes = detect512();
  return yes;
}

} // namespace

bool vectorConversions() {
  static const bool yes = detect();
  return yes;
}

void f16ToF32(const uint16_t *in, float *out, int64_t n) {
  int64_t i = 0;
#if DSC_X86_VECTORS
  if (vectorConversions())
    i = f16ToF32Vec(in, out, n);
#endif
  for (; i < n; ++i)
    out[i] = f16ToFloat(in[i]);
}

void f32ToF16(const float *in, uint16_t *out, int64_t n) {
  int64_t i = 0;
#if DSC_X86_VECTORS
  if (vectorConversions())
    i = f32ToF16Vec(in, out, n);
#endif
  for (; i < n; ++i)
    out[i] = floatToF16(in[i]);
}

void bf16ToF32(const uint16_t *in, float *out, int64_t n) {
  int64_t i = 0;
#if DSC_X86_VECTORS
  if (vector512())
    i = bf16ToF32Vec512(in, out, n);
  if (vectorConversions())
    i += bf16ToF32Vec(in + i, out + i, n - i);
#endif
  for (; i < n; ++i)
    out[i] = bf16ToFloat(in[i]);
}

void f32ToBf16(const float *in, uint16_t *out, int64_t n) {
  int64_t i = 0;
#if DSC_X86_VECTORS
  if (vector512())
    i = f32ToBf16Vec512(in, out, n);
  if (vectorConversions())
    i += f32ToBf16Vec(in + i, out + i, n - i);
#endif
  for (; i < n; ++i)
    out[i] = floatToBf16(in[i]);
}

const float *chunkAsF32(DType dtype, const void *data, int64_t at, int64_t n,
                        float *wide) {
  if (dtype == DType::f32)
    return static_cast<const float *>(data) + at;
  const auto *half = static_cast<const uint16_t *>(data) + at;
  (dtype == DType::f16 ? f16ToF32 : bf16ToF32)(half, wide, n);
  return wide;
}

} // namespace dsc::rt::cpu
