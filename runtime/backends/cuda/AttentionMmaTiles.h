//===- AttentionMmaTiles.h - attention's forward on tensor cores -*- C++
//-*-===//
//
// The forward tile program of AttentionTiles.h for q, k and v all bf16 (or
// all f16), its two products on tensor cores (WarpMma.h). A block of eight
// warps owns 128 query rows, a warp 16 of them: the warp computes its rows'
// scores against a key tile (Q K^T), two threads per row (every thread of
// the block, each over half the tile's keys) turn them into probabilities
// with the online softmax and round them to the operands' type, as flash
// attention does, and the warp adds P V into accumulators it
// keeps in registers, rescaled by row. Head dims are padded with zeros to
// a multiple of 16 in shared memory. Q, K and V sit there row-major as in
// global memory: each product's operands are then whole 16-byte rows, which
// the device reads with ldmatrix (WarpMma.h) and, where the head dim is a
// multiple of 8, fills 16 bytes a thread; K and V twice, the next tile
// arriving by cp.async while the block computes on this one. After the
// tile's load a warp reads only its own rows' scores and probabilities, so
// those phases end in the warp's barrier, not the block's.
//
// Against the f32 program: P is rounded to 16 bits before its product, and
// the row sums are of those rounded values, so the weights still sum to
// one. The output is within a 16-bit rounding of the f32 program's.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CUDA_ATTENTIONMMATILES_H
#define DSC_RUNTIME_BACKENDS_CUDA_ATTENTIONMMATILES_H

#include "runtime/backends/cuda/AttentionTiles.h"
#include "runtime/backends/cuda/WarpMma.h"

namespace dsc::rt::cuda::tiles {

/// 128 query rows (16 per warp), BC keys, head dims up to DM.
template <int BC_, int DM_> struct MmaTiles {
  static constexpr int BR = 16 * kThreads / 32, BC = BC_, DM = DM_;
  static_assert(BC % 16 == 0 && DM % 16 == 0, "whole m16n8k16 tiles");
};
using MmaTiles64 = MmaTiles<64, 64>;
using MmaTiles128 = MmaTiles<32, 128>;

/// Head dims up to 64 and 128 on tensor cores (0: more).
inline int mmaTileWidth(int64_t dim) {
  return dim <= 64 ? 64 : dim <= 128 ? 128 : 0;
}

DSC_TILE_FN int64_t roundUp(int64_t n, int64_t to) {
  return ceilDiv(n, to) * to;
}

#if defined(__CUDA_ARCH__)
/// 16 bytes from global to shared memory without passing through
/// registers (cp.async, sm_80 and up); zero-filled when !valid.
__device__ __forceinline__ void copyAsync16(void *dst, const void *src,
                                            bool valid) {
  const uint32_t at = uint32_t(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(at),
               "l"(src), "r"(valid ? 16 : 0)
               : "memory");
}
#endif

/// The asynchronous copies a thread issued so far (loadTile16<.., true>)
/// form a group; awaitTileLoads waits for all of them. After the wait a
/// block barrier makes every thread's copies visible to all. (The host's
/// copies are done when issued.)
DSC_TILE_FN void commitTileLoads() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
DSC_TILE_FN void awaitTileLoads() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
#endif
}

/// dst[r * ld + c] = the 16-bit bits of src row r of `at`, column c, for
/// r < ROWS and c < width; rows past `rows` and columns past `cols` zero.
/// kAsync: where the rows are whole aligned 16-byte words, the device
/// copies them asynchronously (commitTileLoads, awaitTileLoads), so a
/// program loads the next tile while it computes on this one.
template <class IO, int ROWS, bool kAsync = false>
DSC_TILE_FN void loadTile16(const void *src, RowsAt at, int64_t rows,
                            int64_t cols, int64_t width, uint16_t *dst, int ld,
                            int t) {
#if defined(__CUDA_ARCH__)
  // Rows of whole 16-byte words on both sides: a word a thread. (The host
  // emulation takes the element walk below, which means the same.)
  if (cols == width && cols % 8 == 0 && ld % 8 == 0 &&
      ((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) &
       15) == 0) {
    const int words = int(cols / 8);
    const uint4 *from = static_cast<const uint4 *>(src);
    for (int e = t; e < ROWS * words; e += kThreads) {
      const int r = e / words, w = e % words;
      uint16_t *to = dst + r * ld + 8 * w;
      if constexpr (kAsync)
        copyAsync16(to,
                    r < rows ? from + (at.base + r * at.step) / 8 + w : from,
                    r < rows);
      else
        *reinterpret_cast<uint4 *>(to) =
            r < rows ? from[(at.base + r * at.step) / 8 + w]
                     : make_uint4(0, 0, 0, 0);
    }
    return;
  }
#endif
  for (TileWalk w(width, t); w.r < ROWS; w.next())
    dst[w.r * ld + w.c] = w.r < rows && w.c < cols
                              ? IO::load16(src, at.base + w.r * at.step + w.c)
                              : 0;
}

/// Step `step`'s tiles of BC keys of pair p, K and V, into shared memory at
/// k and v (rows of ld), asynchronously (the forward's and dQ's programs,
/// which double-buffer them).
template <class IO, int BC>
DSC_TILE_FN void loadKeyTiles(const Problem &a, int64_t p, int64_t step,
                              uint16_t *k, uint16_t *v, int ld, int t) {
  const int64_t j0 = step * BC;
  loadTile16<IO, BC, true>(a.k, a.rows(p, j0, a.Tk, a.D), a.Tk - j0, a.D,
                           roundUp(a.D, 16), k, ld, t);
  loadTile16<IO, BC, true>(a.v, a.rows(p, j0, a.Tk, a.Dv), a.Tk - j0, a.Dv,
                           roundUp(a.Dv, 16), v, ld, t);
  commitTileLoads();
}

/// kStats false: the output. kStats true: each query row's log-sum-exp and
/// D_i = sum_j P_ij (g_i . v_j) for the gradient (AttentionMmaGradTiles.h),
/// with the scores and g . v from the same products the gradient computes.
template <class Cfg, class IO, bool kBF16, bool kStats = false>
struct ForwardMmaTiles : QueryTiling {
  static constexpr int BR = Cfg::BR, BC = Cfg::BC, DM = Cfg::DM;
  // Row strides in shared memory, in elements; the pads spread rows over
  // banks.
  static constexpr int LQ = DM + 8, LK = DM + 8, LP = BC + 8, SW = BC + 1;
  static constexpr int halves(int n) { return (n + 1) / 2; } // in floats
  // Shared memory, in floats: Q, K and V tiles (16-bit, row stride LK for
  // K and V), scores (f32), P (16-bit), and per row the
  // running max, sum and rescale factor and the step's new max; per half
  // row the step's max and sum; for the statistics the g tile (16-bit) and
  // g . v (f32) instead of P, and per half row the running D (double, at
  // an even offset).
  // K and V twice: step s computes on buffer s % 2 while the next tile
  // arrives in the other (kKV floats further on).
  static constexpr int kKV = 2 * halves(BC * LK);
  static constexpr int kQ = 0, kK = kQ + halves(BR * LQ),
                       kV = kK + halves(BC * LK), kS = kK + 2 * kKV,
                       kP = kS + BR * SW,
                       kM = kP + (kStats ? BR * SW : halves(BR * LP)),
                       kL = kM + BR, kC = kL + BR, kMN = kC + BR,
                       kHM = kMN + BR, kHS = kHM + 2 * BR, kG = kHS + 2 * BR,
                       kD = (kG + (kStats ? halves(BR * LQ) : 0) + 1) / 2 * 2,
                       kSmemFloats = kD + (kStats ? 4 * BR : 0);
  // A query row's softmax is two threads', each over half the step's keys
  // (phases 2 and 3); a row's running max and sum are updated from the
  // halves in the next phase that has room: the P V phase, or for the
  // statistics the next step's first phase and the epilogue.
  static constexpr int kHalf = BC / 2;
  static_assert(2 * BR == kThreads, "two threads per query row");
  static constexpr int kPrologue = 1, kBody = kStats ? 4 : 5,
                       kEpilogue = kStats ? 2 : 1;
  // Past the key tile's load a warp works on its own 16 rows until the P V
  // phase (the statistics: the softmax) ends: only the warp meets after
  // the scores, the maxima and the softmax.
  static constexpr uint32_t kWarpBody = kStats ? 0b0110 : 0b01110;
  static constexpr int kTilesN = kStats ? 1 : DM / 8; // output column tiles

  DSC_TILE_FN ForwardMmaTiles() : QueryTiling{{}, BR, BC} {}
  void *out = nullptr; // kStats false
  int so = 0;
  float *lse = nullptr, *dsum = nullptr; // kStats true: [P * Tq] each

  struct Thread {
    float o[kTilesN][4]; // the warp's 16 x DM output, this lane's entries
    double d;            // kStats: the row thread's running sum for D
  };

  DSC_TILE_FN static uint16_t *half(float *sm, int offset) {
    return reinterpret_cast<uint16_t *>(sm + offset);
  }

  DSC_TILE_FN void prologue(int, int64_t tile, int t, Thread &th,
                            float *sm) const {
    const int64_t p = pairOf(tile), i0 = firstRow(tile);
    loadTile16<IO, BR>(a.q, a.rows(p, i0, a.Tq, a.D), a.Tq - i0, a.D,
                       roundUp(a.D, 16), half(sm, kQ), LQ, t);
    if constexpr (kStats)
      loadTile16<IO, BR>(a.g, a.rows(p, i0, a.Tq, a.Dv), a.Tq - i0, a.Dv,
                         roundUp(a.Dv, 16), half(sm, kG), LQ, t);
    DSC_TILE_UNROLL
    for (int n = 0; n < kTilesN; ++n)
      for (int i = 0; i < 4; ++i)
        th.o[n][i] = 0;
    th.d = 0;
    if (t < BR) {
      sm[kM + t] = -INFINITY;
      sm[kL + t] = 0;
    }
    if (steps(tile) > 0)
      loadKeys(tile, 0, t, sm);
  }

  /// Step `step`'s K and V tiles into buffer step % 2, asynchronously.
  DSC_TILE_FN void loadKeys(int64_t tile, int64_t step, int t,
                            float *sm) const {
    const int buffer = kKV * int(step & 1);
    loadKeyTiles<IO, BC>(a, pairOf(tile), step, half(sm, kK + buffer),
                         half(sm, kV + buffer), LK, t);
  }

  DSC_TILE_FN void body(int phase, int64_t tile, int64_t step, int t,
                        Thread &th, float *sm) const {
    const int64_t i0 = firstRow(tile), j0 = step * BC;
    const int warp = t / 32, lane = t % 32, buffer = kKV * int(step & 1);
    if (phase == 0) { // this step's K and V have arrived
      if (kStats && step > 0 && t < BR)
        updateRow(sm, t); // the previous step's
      awaitTileLoads();
    } else if (phase == 1) {      // the warp's scores Q K^T (and g . v: G V^T)
      if (step + 1 < steps(tile)) // the other buffer was last read before
        loadKeys(tile, step + 1, t, sm); // the block's previous barrier
      const uint16_t *q = half(sm, kQ) + 16 * warp * LQ,
                     *k = half(sm, kK + buffer), *v = half(sm, kV + buffer);
      const int64_t chunks = roundUp(a.D, 16) / 16,
                    vChunks = roundUp(a.Dv, 16) / 16;
      // Two key tiles at a time: each A tile (Q's, g's) loaded once for
      // both products.
      for (int n0 = 0; n0 < BC / 8; n0 += 2) {
        float acc[2][4] = {}, dp[2][4] = {};
        for (int64_t kc = 0; kc < chunks; ++kc) { // B(k, n) = K[n][k]
          FragmentA fq;
          fq.load(q + 16 * kc, LQ, 1, lane);
          for (int j = 0; j < 2; ++j)
            mmaFragment<kBF16>(acc[j], fq, k + 8 * (n0 + j) * LK + 16 * kc, 1,
                               LK, lane);
        }
        if constexpr (kStats) { // B(k, n) = V[n][k]
          const uint16_t *g = half(sm, kG) + 16 * warp * LQ;
          for (int64_t kc = 0; kc < vChunks; ++kc) {
            FragmentA fg;
            fg.load(g + 16 * kc, LQ, 1, lane);
            for (int j = 0; j < 2; ++j)
              mmaFragment<kBF16>(dp[j], fg, v + 8 * (n0 + j) * LK + 16 * kc, 1,
                                 LK, lane);
          }
        }
        for (int j = 0; j < 2; ++j)
          for (int i = 0; i < 4; ++i) {
            int r, c;
            accumulatorAt(lane, i, r, c);
            r += 16 * warp;
            c += 8 * (n0 + j);
            const bool seen = a.sees(i0 + r, j0 + c);
            sm[kS + r * SW + c] =
                seen ? mulRounded(a.scale, acc[j][i]) : -INFINITY;
            if constexpr (kStats)
              sm[kP + r * SW + c] = seen ? dp[j][i] : 0.0f;
          }
      }
    } else if (phase == 2) { // each half row's max
      const float *s = sm + kS + (t / 2) * SW + (t % 2) * kHalf;
      float m = -INFINITY;
      for (int c = 0; c < kHalf; ++c)
        m = s[c] > m ? s[c] : m;
      sm[kHM + t] = m;
    } else if (phase == 3) { // probabilities, two threads per row
      softmaxHalf(sm, t / 2, t % 2, th);
    } else {          // rescale, then add P V; the rows' running max and sum
      if (t % 2 == 0) // the row's first thread: a row of this warp
        updateRow(sm, t / 2);
      const uint16_t *pr = half(sm, kP) + 16 * warp * LP,
                     *v = half(sm, kV + buffer);
      DSC_TILE_UNROLL
      for (int n = 0; n < kTilesN; ++n)
        for (int i = 0; i < 4; ++i) {
          int r, c;
          accumulatorAt(lane, i, r, c);
          th.o[n][i] *= sm[kC + 16 * warp + r];
        }
      // Each P tile loaded once for every column tile of V (the sums per
      // output entry run over kc in order, as before).
      for (int kc = 0; kc < BC / 16; ++kc) {
        FragmentA fp;
        fp.load(pr + 16 * kc, LP, 1, lane);
        DSC_TILE_UNROLL
        for (int n = 0; n < kTilesN; ++n) // B(k, n) = V[k][n]
          if (8 * n < a.Dv)
            mmaFragment<kBF16>(th.o[n], fp, v + 16 * kc * LK + 8 * n, LK, 1,
                               lane);
      }
    }
  }

  /// Half h of row r's scores become probabilities relative to the row's
  /// new running max (rounded to 16 bits for their product; the statistics
  /// keep f32 and add P (g . v) in double, as the f32 program). The half's
  /// sum goes to kHS; thread h = 0 leaves the new max and the rescale
  /// factor of the row's old sums for updateRow (kM is still read here).
  DSC_TILE_FN void softmaxHalf(float *sm, int r, int h, Thread &th) const {
    const float *s = sm + kS + r * SW + h * kHalf;
    const float m = sm[kM + r];
    float mNew = m;
    mNew = sm[kHM + 2 * r] > mNew ? sm[kHM + 2 * r] : mNew;
    mNew = sm[kHM + 2 * r + 1] > mNew ? sm[kHM + 2 * r + 1] : mNew;
    float sum = 0, rescale = 1; // nothing seen yet: nothing changes
    if constexpr (kStats) {
      if (mNew != -INFINITY) {
        rescale = expf(m - mNew); // 0 while m is -inf
        double dSum = 0;
        const float *dp = sm + kP + r * SW + h * kHalf;
        for (int c = 0; c < kHalf; ++c) {
          const float e = expf(s[c] - mNew);
          sum += e;
          dSum += double(e) * dp[c];
        }
        th.d = th.d * rescale + dSum; // this half's share of D
      }
    } else {
      uint16_t *pr = half(sm, kP) + r * LP + h * kHalf;
      if (mNew == -INFINITY) {
        for (int c = 0; c < kHalf; ++c)
          pr[c] = 0;
      } else {
        rescale = expf(m - mNew);
        for (int c = 0; c < kHalf; ++c) {
          pr[c] = to16<kBF16>(expf(s[c] - mNew));
          sum += from16<kBF16>(pr[c]); // the weights the product uses
        }
      }
    }
    sm[kHS + 2 * r + h] = sum;
    if (h == 0) {
      sm[kMN + r] = mNew;
      sm[kC + r] = rescale;
    }
  }

  /// Row r's running max and sum after a step's softmaxHalf.
  DSC_TILE_FN void updateRow(float *sm, int r) const {
    sm[kM + r] = sm[kMN + r];
    sm[kL + r] =
        sm[kL + r] * sm[kC + r] + (sm[kHS + 2 * r] + sm[kHS + 2 * r + 1]);
  }

  DSC_TILE_FN void epilogue(int phase, int64_t tile, int t, Thread &th,
                            float *sm) const {
    const int64_t p = pairOf(tile), i0 = firstRow(tile);
    if constexpr (kStats) {
      // (Doubles in float storage: copied bytewise, not aliased.)
      if (phase == 0) { // the last step's row update; the halves' D shared
        if (t < BR && steps(tile) > 0)
          updateRow(sm, t);
        memcpy(sm + kD + 2 * t, &th.d, sizeof(double));
      } else if (t < BR && i0 + t < a.Tq) {
        double d0, d1;
        memcpy(&d0, sm + kD + 4 * t, sizeof(double));
        memcpy(&d1, sm + kD + 4 * t + 2, sizeof(double));
        const float l = sm[kL + t];
        const int64_t row = p * a.Tq + i0 + t;
        lse[row] = l > 0 ? sm[kM + t] + logf(l) : INFINITY;
        dsum[row] = l > 0 ? float((d0 + d1) / l) : 0.0f;
      }
    } else {
      const int warp = t / 32, lane = t % 32;
      DSC_TILE_UNROLL
      for (int n = 0; n < kTilesN; ++n)
        for (int i = 0; i < 4; ++i) {
          int r, c;
          accumulatorAt(lane, i, r, c);
          r += 16 * warp;
          c += 8 * n;
          const float l = sm[kL + r];
          if (i0 + r < a.Tq && c < a.Dv)
            IO::store(out, so, a.rows(p, i0 + r, a.Tq, a.Dv).base + c,
                      l > 0 ? th.o[n][i] / l : 0.0f);
        }
    }
  }
};

} // namespace dsc::rt::cuda::tiles

#endif // DSC_RUNTIME_BACKENDS_CUDA_ATTENTIONMMATILES_H
