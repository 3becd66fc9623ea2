//===- AttentionBf16.cpp - bf16 attention on bf16 products ----------------===//
//
// ds.attention and ds.attention_grad with q, k, v (and g) all bf16, on a CPU
// with bf16 products that pay (Bf16DotProducts.h's bf16Products: AMX's
// tiles, or AVX512-BF16's dot products on an AMD CPU), unless bf16
// products are turned off (DSC_BF16_GEMM=widen): every product bf16
// operands with f32 sums, as the CUDA backend's tensor cores and flash
// attention run them. q, k, v and g enter their products as they are
// (exact); the scores, the softmax and dS follow the f32 kernel's formulas
// (Attention.cpp) in f32 with an AVX-512 exp (2.3e-7 relative); the
// probabilities and dS are rounded to bf16 before they are multiplied,
// where the widened kernel keeps them in f32. The forward multiplies the
// rounded exponentials and divides each row by their sum, so a row's
// weights still sum to one (as AttentionMmaTiles.h does on the GPU).
// Results are within a bf16 rounding of the f32 kernel's (WideningTest).
//
// Per (batch, head) pair, on the kernel threads: the pair's rows copied
// into the thread's scratch, zero-padded to the tiles' multiples (16 rows,
// 32 summed elements), the second operand of each product packed as the
// tiles read it; query rows in blocks of 64, causal ones against the keys
// the block's last row sees.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/AttentionBf16.h"

#include "runtime/backends/cpu/AmxTiles.h"
#include "runtime/backends/cpu/Bf16DotProducts.h"
#include "runtime/backends/cpu/Convert.h"
#include "runtime/backends/cpu/CpuCommon.h"

#include <cmath>
#include <cstring>
#include <immintrin.h>
#include <vector>

namespace dsc::rt::cpu {
namespace {

using Dims = AttentionDims;

constexpr int64_t kBlockRows = 64; // query rows a block

int64_t roundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

/// A pair's padded sizes: rows of q and g (TqP) and of k and v (TkP) to
/// 32, head dims (Dp, Dvp) to 32, every one a multiple a product needs.
struct Padded {
  int64_t TqP, TkP, Dp, Dvp;
  explicit Padded(const Dims &d)
      : TqP(roundUp(d.Tq, 32)), TkP(roundUp(d.Tk, 32)), Dp(roundUp(d.D, 32)),
        Dvp(roundUp(d.Dv, 32)) {}
};

/// A block of query rows [i0, i0 + m), padded to mP, against keys [0, kv)
/// (padded to kvP).
struct Block {
  int64_t i0, m, mP, kv, kvP;
};

Block blockAt(const Dims &d, bool causal, int64_t i0) {
  const int64_t m = std::min(kBlockRows, d.Tq - i0);
  const int64_t kv = d.visibleKeys(causal, i0 + m - 1);
  return {i0, m, roundUp(m, 32), kv, roundUp(kv, 32)};
}

/// The pair's T rows of bf16 operand t (each `width` wide) into out [rows x
/// cols], zeros past them.
void copyPairRows(const Dims &d, const TensorRef &t, int64_t p, int64_t T,
                  int64_t width, uint16_t *out, int64_t rows, int64_t cols) {
  const auto *src = static_cast<const uint16_t *>(t.data);
  const int64_t first = d.rowOffset(p, 0, T, width);
  const int64_t stride = d.rowStride(width);
  for (int64_t i = 0; i < rows; ++i) {
    uint16_t *o = out + i * cols;
    const int64_t kept = i < T ? width : 0;
    if (kept)
      std::memcpy(o, src + first + i * stride, size_t(kept) * 2);
    std::fill(o + kept, o + cols, uint16_t(0));
  }
}

/// src [K x N] (row-major, K even) as a product's second operand:
/// out[kk][n][r] = src[2 kk + r][n].
void packRows(const uint16_t *src, int64_t K, int64_t N, uint16_t *out) {
  for (int64_t kk = 0; kk < K / 2; ++kk) {
    const uint16_t *even = src + 2 * kk * N, *odd = even + N;
    uint16_t *o = out + kk * N * 2;
    for (int64_t n = 0; n < N; ++n) {
      const uint32_t pair = uint32_t(even[n]) | uint32_t(odd[n]) << 16;
      std::memcpy(o + 2 * n, &pair, 4); // little-endian: even first
    }
  }
}

/// out [cols x rows] = the transpose of src [rows x cols], elements of
/// sizeof(Word) bytes, in 16 x 16 blocks (each block's reads and writes in
/// a few cache lines).
template <typename Word>
void transposeWords(const uint16_t *src, int64_t rows, int64_t cols,
                    uint16_t *out) {
  constexpr int64_t kBlock = 16;
  constexpr int64_t kWord = sizeof(Word) / sizeof(uint16_t);
  for (int64_t i0 = 0; i0 < rows; i0 += kBlock)
    for (int64_t j0 = 0; j0 < cols; j0 += kBlock)
      for (int64_t i = i0; i < std::min(rows, i0 + kBlock); ++i)
        for (int64_t j = j0; j < std::min(cols, j0 + kBlock); ++j)
          std::memcpy(out + (j * rows + i) * kWord,
                      src + (i * cols + j) * kWord, sizeof(Word));
}

/// The transpose of src [N x K] (row-major, K even) as a product's second
/// operand: out[kk][n][r] = src[n][2 kk + r], i.e. a transpose of the
/// 32-bit pairs.
void packTransposed(const uint16_t *src, int64_t N, int64_t K, uint16_t *out) {
  transposeWords<uint32_t>(src, N, K / 2, out);
}

/// Row i of the pair's output t (rows `width` wide) from f32 values.
void storePairRow(const Dims &d, const TensorRef &t, int64_t p, int64_t T,
                  int64_t width, int64_t i, const float *values) {
  const int64_t at = d.rowOffset(p, i, T, width);
  if (t.dtype == DType::f32)
    std::memcpy(t.f32() + at, values, size_t(width) * sizeof(float));
  else
    (t.dtype == DType::bf16 ? f32ToBf16 : f32ToF16)(
        values, static_cast<uint16_t *>(t.data) + at, width);
}

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*() values, which
// -Wmaybe-uninitialized reports wherever they are inlined (a known false
// positive, as in Convert.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// The softmax's row passes in AVX-512 (every CPU with AMX or AVX512-BF16
// has it; productsAndRowPasses checks): with FastMath.h's exp, kept for the f32
// kernel's bits, and double sums they took 2.5x the tiles' products.
#define DSC_AVX512_BF16                                                        \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma")))

/// e^x over 16 lanes to 2.3e-7 relative: x = n ln 2 + r, |r| <= ln 2 / 2,
/// e^r by its Taylor polynomial to r^6, scaled by 2^n. x is held above
/// -87 (e^-87 ~ 1.6e-38; a score that far below its row's max weighs
/// nothing either way); a NaN stays NaN.
DSC_AVX512_BF16 inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-87.0f), x); // NaN x: the second operand
  const __m512 n = _mm512_roundscale_ps(
      _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  for (float c : {1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f})
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
  return _mm512_scalef_ps(p, n);
}

/// The lanes of [j, n) a 16-lane step covers.
DSC_AVX512_BF16 inline __mmask16 lanesLeft(int64_t j, int64_t n) {
  return n - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - j)) - 1);
}

/// max over j < n of scale row[j] (-inf for n = 0).
DSC_AVX512_BF16 float scaledMax(const float *row, int64_t n, float scale) {
  const __m512 s = _mm512_set1_ps(scale);
  __m512 m = _mm512_set1_ps(-HUGE_VALF);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = lanesLeft(j, n);
    m = _mm512_mask_max_ps(m, k, m,
                           _mm512_mul_ps(s, _mm512_maskz_loadu_ps(k, row + j)));
  }
  return _mm512_reduce_max_ps(m);
}

/// The sum over j < n of keep(j, lanes, e) for e = e^(scale row[j] - max)
/// of the 16 lanes from j (masked to n): `keep` stores e as its caller wants
/// it and returns what the sum adds.
template <class Keep>
DSC_AVX512_BF16 float sumOfExps(const float *row, int64_t n, float scale,
                                Keep keep) {
  const __m512 s = _mm512_set1_ps(scale),
               m = _mm512_set1_ps(scaledMax(row, n, scale));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = lanesLeft(j, n);
    const __m512 e =
        exp16(_mm512_fmsub_ps(s, _mm512_maskz_loadu_ps(k, row + j), m));
    sum = _mm512_mask_add_ps(sum, k, sum, keep(j, k, e));
  }
  return _mm512_reduce_add_ps(sum);
}

/// Stores the exponentials rounded to bf16 (nearest even); the sum adds the
/// rounded values.
struct RoundedExps {
  uint16_t *out;
  DSC_AVX512_BF16 __m512 operator()(int64_t j, __mmask16 k, __m512 e) const {
    const __m256i bits = __m256i(_mm512_cvtneps_pbh(e));
    _mm256_mask_storeu_epi16(out + j, k, bits);
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
  }
};

/// Stores the exponentials in f32, and sums them.
struct Exps {
  float *out;
  DSC_AVX512_BF16 __m512 operator()(int64_t j, __mmask16 k, __m512 e) const {
    _mm512_mask_storeu_ps(out + j, k, e);
    return e;
  }
};

/// out[j] = bf16(e^(scale row[j] - max)) for j < n (rounded to nearest
/// even); returns the sum of the rounded values.
DSC_AVX512_BF16 float roundedExps(const float *row, int64_t n, float scale,
                                  uint16_t *out) {
  return sumOfExps(row, n, scale, RoundedExps{out});
}

/// row[j] = softmax(scale row)[j] over j < n, in place.
DSC_AVX512_BF16 void probabilities(float *row, int64_t n, float scale) {
  const __m512 inv = _mm512_set1_ps(1.0f / sumOfExps(row, n, scale, Exps{row}));
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = lanesLeft(j, n);
    _mm512_mask_storeu_ps(
        row + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, row + j), inv));
  }
}

/// ds[j] = p[j] (ds[j] - sum_i p[i] ds[i]) scale over j < n, in place (ds
/// holds dP).
DSC_AVX512_BF16 void scoreGrads(const float *p, float *ds, int64_t n,
                                float scale) {
  __m512 dot = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = lanesLeft(j, n);
    dot = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, p + j),
                          _mm512_maskz_loadu_ps(k, ds + j), dot);
  }
  const __m512 d = _mm512_set1_ps(_mm512_reduce_add_ps(dot)),
               s = _mm512_set1_ps(scale);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = lanesLeft(j, n);
    const __m512 pj = _mm512_maskz_loadu_ps(k, p + j);
    const __m512 g = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, ds + j), d);
    _mm512_mask_storeu_ps(ds + j, k, _mm512_mul_ps(_mm512_mul_ps(pj, g), s));
  }
}

void forwardPair(const Dims &d, bool causal, float scale, const KernelArgs &a,
                 int64_t p, std::vector<uint16_t> &bits,
                 std::vector<float> &floats) {
  const Padded P(d);
  const Bf16Product multiply = bf16Products();
  // bf16: q rows, k rows, v rows, k packed transposed, v packed, P's block.
  const int64_t nQ = P.TqP * P.Dp, nK = P.TkP * P.Dp, nV = P.TkP * P.Dvp;
  bits.resize(size_t(nQ + 2 * nK + 2 * nV + kBlockRows * P.TkP));
  uint16_t *q = bits.data(), *k = q + nQ, *v = k + nK, *kT = v + nV,
           *vP = kT + nK, *pb = vP + nV;
  // f32: the block's scores, its output rows and their 1 / sums.
  floats.resize(size_t(kBlockRows * (P.TkP + P.Dvp + 1)));
  float *S = floats.data(), *O = S + kBlockRows * P.TkP,
        *inv = O + kBlockRows * P.Dvp;
  copyPairRows(d, a.inputs[0], p, d.Tq, d.D, q, P.TqP, P.Dp);
  copyPairRows(d, a.inputs[1], p, d.Tk, d.D, k, P.TkP, P.Dp);
  copyPairRows(d, a.inputs[2], p, d.Tk, d.Dv, v, P.TkP, P.Dvp);
  packTransposed(k, P.TkP, P.Dp, kT);
  packRows(v, P.TkP, P.Dvp, vP);
  for (int64_t i0 = 0; i0 < d.Tq; i0 += kBlockRows) {
    const Block b = blockAt(d, causal, i0);
    multiply(b.mP, b.kvP, P.Dp, q + i0 * P.Dp, P.Dp, kT, P.TkP, S, b.kvP,
             false);
    for (int64_t i = 0; i < b.mP; ++i) {
      float *row = S + i * b.kvP;
      uint16_t *pr = pb + i * b.kvP;
      const int64_t n = i < b.m ? d.visibleKeys(causal, i0 + i) : 0;
      // The exponentials rounded, and their sum that of the rounded values.
      const float sum = roundedExps(row, n, scale, pr);
      std::fill(pr + n, pr + b.kvP, uint16_t(0));
      inv[i] = n ? 1.0f / sum : 0.0f; // no visible key: a zero row
    }
    multiply(b.mP, P.Dvp, b.kvP, pb, b.kvP, vP, P.Dvp, O, P.Dvp, false);
    for (int64_t i = 0; i < b.m; ++i) {
      float *o = O + i * P.Dvp;
      for (int64_t c = 0; c < d.Dv; ++c)
        o[c] *= inv[i];
      storePairRow(d, a.outputs[0], p, d.Tq, d.Dv, i0 + i, o);
    }
  }
}

#pragma GCC diagnostic pop

/// The probabilities of a block's rows from their scores, in place (masked
/// keys and padding rows 0).
void blockProbabilities(const Dims &d, bool causal, float scale, const Block &b,
                        float *S) {
  for (int64_t i = 0; i < b.mP; ++i) {
    float *row = S + i * b.kvP;
    const int64_t n = i < b.m ? d.visibleKeys(causal, b.i0 + i) : 0;
    probabilities(row, n, scale);
    std::fill(row + n, row + b.kvP, 0.0f);
  }
}

/// dS = P (dP - rowsum(P dP)) scale over a block's rows, into dP's place
/// (the f32 kernel's formula, in f32; padding rows and masked keys 0).
void blockScoreGrads(const Dims &d, bool causal, float scale, const Block &b,
                     const float *Pr, float *dP) {
  for (int64_t i = 0; i < b.mP; ++i) {
    const float *pr = Pr + i * b.kvP;
    float *sr = dP + i * b.kvP;
    const int64_t n = i < b.m ? d.visibleKeys(causal, b.i0 + i) : 0;
    scoreGrads(pr, sr, n, scale);
    std::fill(sr + n, sr + b.kvP, 0.0f);
  }
}

/// The gradient's bf16 operands for one pair, carved from one buffer: q and
/// g transposed (the A operands of dK^T and dV^T), k's and v's transposes
/// and k packed (the B operands of S, dP and dQ), a block's P or dS
/// rounded and its packing.
struct GradOperands {
  uint16_t *qT, *gT, *g, *q, *kT, *vT, *kP, *rounded, *packed, *rows;
  explicit GradOperands(const Padded &P, std::vector<uint16_t> &bits) {
    const int64_t nQ = P.TqP * P.Dp, nG = P.TqP * P.Dvp, nK = P.TkP * P.Dp,
                  nV = P.TkP * P.Dvp, nBlock = kBlockRows * P.TkP;
    const int64_t sizes[] = {nQ, nG, nG,     nQ,     nK,
                             nV, nK, nBlock, nBlock, std::max(nK, nV)};
    int64_t total = 0;
    for (int64_t n : sizes)
      total += n;
    bits.resize(size_t(total));
    uint16_t **slots[] = {&qT, &gT, &g,       &q,      &kT,
                          &vT, &kP, &rounded, &packed, &rows};
    uint16_t *next = bits.data();
    for (size_t i = 0; i < 10; ++i) {
      *slots[i] = next;
      next += sizes[i];
    }
  }
};

/// Rounds a block's f32 P or dS [mP x kvP] to bf16 (o.rounded, row-major:
/// dQ's A operand) and packs it as the B operand of dK^T or dV^T
/// (o.packed).
void roundAndPack(const Block &b, const float *values, GradOperands &o) {
  f32ToBf16(values, o.rounded, b.mP * b.kvP);
  packRows(o.rounded, b.mP, b.kvP, o.packed);
}

/// Rows [0, T) of the pair's output t from the transposed f32 sums
/// sumsT [width x ld]: transposed in blocks into `rows` [T x width], then
/// stored (rows `width` wide).
void storeTransposed(const Dims &d, const TensorRef &t, int64_t p, int64_t T,
                     int64_t width, const float *sumsT, int64_t ld,
                     float *rows) {
  constexpr int64_t kBlock = 16;
  for (int64_t c0 = 0; c0 < width; c0 += kBlock)
    for (int64_t j0 = 0; j0 < T; j0 += kBlock)
      for (int64_t c = c0; c < std::min(width, c0 + kBlock); ++c)
        for (int64_t j = j0; j < std::min(T, j0 + kBlock); ++j)
          rows[j * width + c] = sumsT[c * ld + j];
  for (int64_t j = 0; j < T; ++j)
    storePairRow(d, t, p, T, width, j, rows + j * width);
}

// dK and dV are summed transposed, dK^T += q_b^T dS_b and dV^T += g_b^T
// P_b, so that per block only P and dS are packed (row pairs interleaved)
// and the transposes are of q and g, once per pair.
void gradPair(const Dims &d, bool causal, float scale, const KernelArgs &a,
              int64_t p, std::vector<uint16_t> &bits,
              std::vector<float> &floats) {
  const Padded P(d);
  const Bf16Product multiply = bf16Products();
  GradOperands o(P, bits);
  const int64_t nBlock = kBlockRows * P.TkP, nK = P.TkP * P.Dp,
                nV = P.TkP * P.Dvp;
  // f32: P and dP (then dS) of a block, dQ's block rows, dK^T and dV^T
  // sums, dK's or dV's rows.
  floats.resize(
      size_t(2 * nBlock + kBlockRows * P.Dp + nK + nV + std::max(nK, nV)));
  float *S = floats.data(), *dP = S + nBlock, *dQ = dP + nBlock,
        *dKT = dQ + kBlockRows * P.Dp, *dVT = dKT + nK, *row = dVT + nV;
  copyPairRows(d, a.inputs[0], p, d.Tq, d.D, o.q, P.TqP, P.Dp);
  copyPairRows(d, a.inputs[3], p, d.Tq, d.Dv, o.g, P.TqP, P.Dvp);
  transposeWords<uint16_t>(o.q, P.TqP, P.Dp, o.qT);
  transposeWords<uint16_t>(o.g, P.TqP, P.Dvp, o.gT);
  copyPairRows(d, a.inputs[1], p, d.Tk, d.D, o.rows, P.TkP, P.Dp);
  packTransposed(o.rows, P.TkP, P.Dp, o.kT);
  packRows(o.rows, P.TkP, P.Dp, o.kP);
  copyPairRows(d, a.inputs[2], p, d.Tk, d.Dv, o.rows, P.TkP, P.Dvp);
  packTransposed(o.rows, P.TkP, P.Dvp, o.vT);
  // Backwards: the last block sees every key, so its products set all of
  // dK^T and dV^T and the others add to their first columns.
  const int64_t last = (d.Tq - 1) / kBlockRows * kBlockRows;
  for (int64_t i0 = last; i0 >= 0; i0 -= kBlockRows) {
    const Block b = blockAt(d, causal, i0);
    const bool sum = i0 != last;
    multiply(b.mP, b.kvP, P.Dp, o.q + i0 * P.Dp, P.Dp, o.kT, P.TkP, S, b.kvP,
             false);
    blockProbabilities(d, causal, scale, b, S);
    roundAndPack(b, S, o); // dV^T += g_b^T P
    multiply(P.Dvp, b.kvP, b.mP, o.gT + i0, P.TqP, o.packed, b.kvP, dVT, P.TkP,
             sum);
    // dP = g v^T, then dS in its place
    multiply(b.mP, b.kvP, P.Dvp, o.g + i0 * P.Dvp, P.Dvp, o.vT, P.TkP, dP,
             b.kvP, false);
    blockScoreGrads(d, causal, scale, b, S, dP);
    roundAndPack(b, dP, o); // dQ = dS k; dK^T += q_b^T dS
    multiply(b.mP, P.Dp, b.kvP, o.rounded, b.kvP, o.kP, P.Dp, dQ, P.Dp, false);
    for (int64_t i = 0; i < b.m; ++i)
      storePairRow(d, a.outputs[0], p, d.Tq, d.D, i0 + i, dQ + i * P.Dp);
    multiply(P.Dp, b.kvP, b.mP, o.qT + i0, P.TqP, o.packed, b.kvP, dKT, P.TkP,
             sum);
  }
  storeTransposed(d, a.outputs[1], p, d.Tk, d.D, dKT, P.TkP, row);
  storeTransposed(d, a.outputs[2], p, d.Tk, d.Dv, dVT, P.TkP, row);
}

/// Whether this path may run: bf16 products not turned off, products that
/// pay (bf16Products) and the AVX-512 subsets of the row passes.
bool productsAndRowPasses() {
  static const bool usable = [] {
    std::string choice, error;
    if (!bf16GemmChoiceFromEnv(choice, error) || choice == "widen")
      return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bf16") && bf16Products() != nullptr;
  }();
  return usable;
}

} // namespace

bool bf16ProductsRunAttention(const KernelArgs &a, size_t bf16Inputs) {
  for (size_t i = 0; i < bf16Inputs; ++i)
    if (a.inputs[i].dtype != DType::bf16)
      return false;
  return productsAndRowPasses();
}

void bf16Attention(const KernelArgs &a, const AttentionDims &d, bool causal,
                   float scale) {
  parallelFor(d.B * d.H, 1, [&](int64_t p0, int64_t p1) {
    std::vector<uint16_t> bits;
    std::vector<float> floats;
    for (int64_t p = p0; p < p1; ++p)
      forwardPair(d, causal, scale, a, p, bits, floats);
  });
}

void bf16AttentionGrad(const KernelArgs &a, const AttentionDims &d, bool causal,
                       float scale) {
  parallelFor(d.B * d.H, 1, [&](int64_t p0, int64_t p1) {
    std::vector<uint16_t> bits;
    std::vector<float> floats;
    for (int64_t p = p0; p < p1; ++p)
      gradPair(d, causal, scale, a, p, bits, floats);
  });
}

} // namespace dsc::rt::cpu
