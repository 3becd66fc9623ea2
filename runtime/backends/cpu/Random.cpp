//===- Random.cpp - ds.dropout ------------------------------------------===//
//
// Element e of x is kept when rng::uniformAt(seed, id, step, e) >= rate,
// then scaled by 1 / (1 - rate): the mask is a pure function of (seed, id,
// step, e), so a recomputation (remat, the backward pass) or another world
// size sees the same mask. Philox runs 16 counters side by side here so the
// rounds vectorize; each call yields the words of four consecutive elements,
// exactly as rng::bitsAt assigns them. 16-bit operands (the kernel's
// 16-bit column) are widened and rounded back a batch at a time.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/Convert.h"
#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/backends/cpu/Widening.h"
#include "runtime/kernels/DropoutLayout.h"
#include "runtime/rng/Philox.h"

#include <cmath>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DSC_X86_PHILOX 1
#endif

namespace dsc::rt::cpu {
namespace {

constexpr int kLanes = 16;                 // Philox blocks per batch
constexpr int64_t kBatch = 4 * kLanes;     // elements per batch
constexpr int64_t kGrainBatches = 1 << 10; // batches per parallel chunk

// The 32-bit words of elements [4 * firstBlock, 4 * firstBlock + kBatch),
// identical to rng::bitsAt for each of them. GCC does not vectorize the
// 32 x 32 -> 64-bit products well (3.2 ns an element on an AVX-512 Xeon),
// so CPUs with AVX-512 take philoxBatch512 (0.5 ns), the same words.
void philoxBatchPortable(uint64_t seed, uint32_t stream, uint32_t step,
                         uint64_t firstBlock, uint32_t words[kBatch]) {
  uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    uint64_t block = firstBlock + uint64_t(l);
    c0[l] = uint32_t(block);
    c1[l] = uint32_t(block >> 32);
    c2[l] = stream;
    c3[l] = step;
  }
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    for (int l = 0; l < kLanes; ++l) {
      uint64_t p0 = uint64_t(0xD2511F53u) * c0[l];
      uint64_t p1 = uint64_t(0xCD9E8D57u) * c2[l];
      uint32_t n0 = uint32_t(p1 >> 32) ^ c1[l] ^ k0;
      uint32_t n2 = uint32_t(p0 >> 32) ^ c3[l] ^ k1;
      c1[l] = uint32_t(p1);
      c3[l] = uint32_t(p0);
      c0[l] = n0;
      c2[l] = n2;
    }
  }
  for (int l = 0; l < kLanes; ++l) {
    words[4 * l] = c0[l];
    words[4 * l + 1] = c1[l];
    words[4 * l + 2] = c2[l];
    words[4 * l + 3] = c3[l];
  }
}

#if DSC_X86_PHILOX
#define DSC_AVX512F __attribute__((target("avx512f")))
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() values, which
// -Wmaybe-uninitialized reports wherever they are inlined (a known false
// positive, as in Convert.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

/// The high and low 32 bits of a * m for each 32-bit lane.
DSC_AVX512F inline void mulHiLo(__m512i a, __m512i m, __m512i &hi,
                                __m512i &lo) {
  const __m512i even = _mm512_mul_epu32(a, m); // lanes 0, 2, ... as 64 bits
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
  lo = _mm512_mullo_epi32(a, m);
}

/// philoxBatchPortable's words, one block a 32-bit lane.
DSC_AVX512F void philoxBatch512(uint64_t seed, uint32_t stream, uint32_t step,
                                uint64_t firstBlock, uint32_t words[kBatch]) {
  const __m512i low = _mm512_set1_epi32(int(uint32_t(firstBlock)));
  const __m512i high = _mm512_set1_epi32(int(uint32_t(firstBlock >> 32)));
  __m512i c0 =
      _mm512_add_epi32(low, _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                              11, 12, 13, 14, 15));
  // A block whose low word wrapped carries into its high word.
  const __mmask16 wrapped = _mm512_cmplt_epu32_mask(c0, low);
  __m512i c1 = _mm512_mask_add_epi32(high, wrapped, high, _mm512_set1_epi32(1));
  __m512i c2 = _mm512_set1_epi32(int(stream)),
          c3 = _mm512_set1_epi32(int(step));
  const __m512i m0 = _mm512_set1_epi32(int(0xD2511F53u)),
                m1 = _mm512_set1_epi32(int(0xCD9E8D57u));
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    __m512i hi0, lo0, hi1, lo1;
    mulHiLo(c0, m0, hi0, lo0);
    mulHiLo(c2, m1, hi1, lo1);
    const __m512i n0 =
        _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32(int(k0)));
    const __m512i n2 =
        _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32(int(k1)));
    c1 = lo1;
    c3 = lo0;
    c0 = n0;
    c2 = n2;
  }
  // words[4 l + i] = c_i[l]: a 4 x 4 transpose within each 128-bit block,
  // then of the blocks.
  const __m512i t0 = _mm512_unpacklo_epi32(c0, c1),
                t1 = _mm512_unpackhi_epi32(c0, c1),
                t2 = _mm512_unpacklo_epi32(c2, c3),
                t3 = _mm512_unpackhi_epi32(c2, c3);
  const __m512i u0 = _mm512_unpacklo_epi64(t0, t2),
                u1 = _mm512_unpackhi_epi64(t0, t2),
                u2 = _mm512_unpacklo_epi64(t1, t3),
                u3 = _mm512_unpackhi_epi64(t1, t3);
  const __m512i v0 = _mm512_shuffle_i32x4(u0, u1, 0x44),
                v1 = _mm512_shuffle_i32x4(u0, u1, 0xEE),
                v2 = _mm512_shuffle_i32x4(u2, u3, 0x44),
                v3 = _mm512_shuffle_i32x4(u2, u3, 0xEE);
  _mm512_storeu_si512(words, _mm512_shuffle_i32x4(v0, v2, 0x88));
  _mm512_storeu_si512(words + 16, _mm512_shuffle_i32x4(v0, v2, 0xDD));
  _mm512_storeu_si512(words + 32, _mm512_shuffle_i32x4(v1, v3, 0x88));
  _mm512_storeu_si512(words + 48, _mm512_shuffle_i32x4(v1, v3, 0xDD));
}
#pragma GCC diagnostic pop
#endif

void philoxBatch(uint64_t seed, uint32_t stream, uint32_t step,
                 uint64_t firstBlock, uint32_t words[kBatch]) {
#if DSC_X86_PHILOX
  static const bool avx512 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
  }();
  if (avx512)
    return philoxBatch512(seed, stream, step, firstBlock, words);
#endif
  philoxBatchPortable(seed, stream, step, firstBlock, words);
}

/// One run of n elements of x from element `at` into the same elements of
/// y (x and y f32, f16 or bf16; y may be x), consecutive in the whole, the
/// first at global index `offset`. A 16-bit x is widened and a 16-bit y
/// rounded a batch at a time: the f32 kernel's results on widened values.
void dropoutRun(const TensorRef &x, const TensorRef &y, int64_t at, int64_t n,
                uint64_t offset, uint64_t seed, uint32_t stream, uint32_t step,
                uint32_t threshold, float scale) {
  // Rows not a multiple of 4 elements: the batched draw does not line up,
  // so each element draws alone.
  const bool aligned = offset % 4 == 0;
  parallelFor(
      (n + kBatch - 1) / kBatch, kGrainBatches, [&](int64_t b0, int64_t b1) {
        uint32_t words[kBatch];
        float wide[kBatch], result[kBatch];
        for (int64_t batch = b0; batch < b1; ++batch) {
          const int64_t base = batch * kBatch;
          const int64_t count = std::min<int64_t>(kBatch, n - base);
          if (aligned)
            philoxBatch(seed, stream, step, (offset + uint64_t(base)) / 4,
                        words);
          else
            for (int64_t j = 0; j < count; ++j)
              words[j] =
                  rng::bitsAt(seed, stream, step, offset + uint64_t(base + j));
          const float *xb = chunkAsF32(x.dtype, x.data, at + base, count, wide);
          float *yb = y.dtype == DType::f32 ? y.f32() + at + base : result;
          for (int64_t j = 0; j < count; ++j)
            yb[j] = (words[j] >> 8) >= threshold ? xb[j] * scale : 0.0f;
          if (y.dtype != DType::f32)
            (y.dtype == DType::bf16 ? f32ToBf16 : f32ToF16)(
                yb, static_cast<uint16_t *>(y.data) + at + base, count);
        }
      });
}

/// ds.dropout over checked operands of any float type.
bool dropoutAnyFloat(const KernelArgs &args, std::string &err) {
  const TensorRef &x = args.inputs[0], &y = args.outputs[0];
  if (!checkDropout(args, err))
    return false;
  const int64_t id = args.intAttrs[0];
  const double rate = args.floatAttrs[0];
  if (!args.ctx)
    return fail(err, "needs a KernelContext (the seed and the step)");
  const int64_t n = x.numel();
  if (rate == 0 && x.dtype == y.dtype) {
    if (x.data != y.data && n > 0)
      std::memcpy(y.data, x.data, size_t(n) * dtypeSize(x.dtype));
    return true;
  }
  // uniform = k * 2^-24 >= rate  <=>  k >= ceil(rate * 2^24) (exact); rate
  // 0 between dtypes keeps every element, scaled by 1.
  const uint32_t threshold = uint32_t(std::ceil(rate * 16777216.0));
  const float scale = float(1.0 / (1.0 - rate)); // inf at rate 1: unused
  const uint64_t seed = args.ctx->seed;
  const uint32_t stream = uint32_t(id), step = args.ctx->step;
  // Element e is keyed by its global index: the leading dimension is the
  // micro-batch, which starts at sample ctx->sampleOffset (and x may be
  // one part of the whole activation, in runs: DropoutLayout.h).
  const DropoutLayout where =
      dropoutLayout(x, args.intAttrs[1], args.intAttrs[2], args.ctx->tensorRank,
                    args.intAttrs[3]);
  const uint64_t first =
      args.ctx->sampleOffset * where.sampleElements + where.partOffset;
  const int64_t segment = int64_t(where.segment);
  for (int64_t at = 0; at < n; at += segment)
    dropoutRun(x, y, at, std::min(segment, n - at),
               first + uint64_t(at / segment) * where.stride, seed, stream,
               step, threshold, scale);
  return true;
}

} // namespace

bool dropoutBody(const KernelArgs &args, std::string &err) {
  return expectAllF32(args, err) && dropoutAnyFloat(args, err);
}

bool halfDropoutBody(const KernelArgs &args, std::string &err) {
  return dropoutAnyFloat(args, err);
}

} // namespace dsc::rt::cpu
