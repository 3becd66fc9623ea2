//===- AttentionMmaGradTiles.h - attention's gradient on tensor cores -*- C++
//-*-===//
//
// The gradient programs of AttentionTiles.h for q, k, v and g all bf16 (or
// all f16), every product on tensor cores (WarpMma.h). They read each query
// row's log-sum-exp and D_i from ForwardMmaTiles' statistics form, whose
// scores and g . v come from the same products in the same order, so
// P = exp(scale q.k - lse) is the forward's to the bit and dP - D cancels
// where it should.
//
// dK and dV: a block owns 64 keys and walks the query tiles that see them.
// Its warps compute the tile's P and dS = scale P (dP - D) in registers and
// leave them in shared memory rounded to 16 bits (as flash attention does);
// then warp w accumulates keys 16 (w % 4).. and half w / 4 of the columns
// of dV += P^T g and dK += dS^T Q. dQ: a block owns 128 query rows, a warp
// 16, and walks the key tiles they see: dQ += dS K. No atomics, as the f32
// programs.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CUDA_ATTENTIONMMAGRADTILES_H
#define DSC_RUNTIME_BACKENDS_CUDA_ATTENTIONMMAGRADTILES_H

#include "runtime/backends/cuda/AttentionMmaTiles.h"

namespace dsc::rt::cuda::tiles {

/// Lane's four entries of the gradient's scores for 16 query rows (Q, G in
/// shared memory at q, g, row stride lq) against NB tiles of 8 keys each
/// (K, V at k, v, row stride lk; tile j 8 j rows on): p[j] = P, ds[j] = dS;
/// zero where the query does not see the key. lse and dsum are the 16
/// rows'. i0, j0: the first row's and key's positions. Each A tile (Q's,
/// G's) is loaded once for the NB products.
template <bool kBF16, int NB>
DSC_TILE_FN void gradScores(const Problem &a, int64_t i0, int64_t j0,
                            const uint16_t *q, const uint16_t *g, int lq,
                            const uint16_t *k, const uint16_t *v, int lk,
                            const float *lse, const float *dsum, int lane,
                            float (&p)[NB][4], float (&ds)[NB][4]) {
  float s[NB][4] = {}, dp[NB][4] = {};
  for (int64_t kc = 0; kc < roundUp(a.D, 16) / 16; ++kc) { // K[n][k]
    FragmentA fq;
    fq.load(q + 16 * kc, lq, 1, lane);
    for (int j = 0; j < NB; ++j)
      mmaFragment<kBF16>(s[j], fq, k + 8 * j * lk + 16 * kc, 1, lk, lane);
  }
  for (int64_t kc = 0; kc < roundUp(a.Dv, 16) / 16; ++kc) { // V[n][k]
    FragmentA fg;
    fg.load(g + 16 * kc, lq, 1, lane);
    for (int j = 0; j < NB; ++j)
      mmaFragment<kBF16>(dp[j], fg, v + 8 * j * lk + 16 * kc, 1, lk, lane);
  }
  for (int j = 0; j < NB; ++j)
    for (int i = 0; i < 4; ++i) {
      int r, c;
      accumulatorAt(lane, i, r, c);
      p[j][i] = ds[j][i] = 0;
      if (a.sees(i0 + r, j0 + 8 * j + c)) {
        p[j][i] = expf(mulRounded(a.scale, s[j][i]) - lse[r]);
        ds[j][i] = a.scale * p[j][i] * (dp[j][i] - dsum[r]);
      }
    }
}

/// gradScores for a program's warp: query rows rows.. and keys 8 n.. (two
/// tiles of 8) of the tiles in shared memory (Prog's kQ, kG, kK, kV, kLse,
/// kDsum, row stride L; qg floats further on for Q and G, kv for K and V:
/// the buffer of a double-buffered tile), stored 16-bit into dS (and P
/// when not null), rows of ls.
template <bool kBF16, class Prog>
DSC_TILE_FN void storeGradScores(const Prog &prog, float *sm, int qg, int kv,
                                 int64_t i0, int64_t j0, int rows, int n,
                                 int lane, uint16_t *P, uint16_t *dS, int ls) {
  constexpr int L = Prog::L;
  float pr[2][4], ds[2][4];
  gradScores<kBF16, 2>(
      prog.a, i0 + rows, j0 + 8 * n, Prog::half(sm, Prog::kQ + qg) + rows * L,
      Prog::half(sm, Prog::kG + qg) + rows * L, L,
      Prog::half(sm, Prog::kK + kv) + 8 * n * L,
      Prog::half(sm, Prog::kV + kv) + 8 * n * L, L, sm + Prog::kLse + rows,
      sm + Prog::kDsum + rows, lane, pr, ds);
  for (int j = 0; j < 2; ++j)
    for (int i = 0; i < 4; ++i) {
      int r, c;
      accumulatorAt(lane, i, r, c);
      if (P)
        P[(rows + r) * ls + 8 * (n + j) + c] = to16<kBF16>(pr[j][i]);
      dS[(rows + r) * ls + 8 * (n + j) + c] = to16<kBF16>(ds[j][i]);
    }
}

/// dK and dV, a block per 64 keys; head dims up to DM.
template <int DM, class IO, bool kBF16> struct GradKVMmaTiles : KeyTiling {
  static constexpr int BR = 64, BC = 64, L = DM + 8, LS = BC + 8;
  static constexpr int kHalfTiles = DM / 16; // column tiles per warp
  static constexpr int halves(int n) { return (n + 1) / 2; }
  // Shared memory, in floats: K, V (the block's keys), Q, g (the query
  // tile, twice: step s computes on buffer s % 2 while the next arrives in
  // the other, kQG floats further on), all 16-bit with rows of L; P and dS
  // (16-bit, BR x LS); lse, D.
  static constexpr int kQG = 2 * halves(BR * L);
  static constexpr int kK = 0, kV = kK + halves(BC * L),
                       kQ = kV + halves(BC * L), kG = kQ + halves(BR * L),
                       kP = kQ + 2 * kQG, kDS = kP + halves(BR * LS),
                       kLse = kDS + halves(BR * LS), kDsum = kLse + BR,
                       kSmemFloats = kDsum + BR;
  static constexpr int kPrologue = 1, kBody = 3, kEpilogue = 1;
  static_assert(kThreads == 256, "eight warps: 4 key groups x 2 halves");

  DSC_TILE_FN GradKVMmaTiles() : KeyTiling{{}, BR, BC} {}
  const float *lse = nullptr, *dsum = nullptr;
  void *dk = nullptr, *dv = nullptr;
  int sdk = 0, sdv = 0;

  struct Thread {
    float dk[kHalfTiles][4], dv[kHalfTiles][4];
  };

  DSC_TILE_FN static uint16_t *half(float *sm, int offset) {
    return reinterpret_cast<uint16_t *>(sm + offset);
  }

  DSC_TILE_FN void prologue(int, int64_t tile, int t, Thread &th,
                            float *sm) const {
    const int64_t p = pairOf(tile), j0 = firstKey(tile);
    loadTile16<IO, BC>(a.k, a.rows(p, j0, a.Tk, a.D), a.Tk - j0, a.D,
                       roundUp(a.D, 16), half(sm, kK), L, t);
    loadTile16<IO, BC>(a.v, a.rows(p, j0, a.Tk, a.Dv), a.Tk - j0, a.Dv,
                       roundUp(a.Dv, 16), half(sm, kV), L, t);
    DSC_TILE_UNROLL
    for (int n = 0; n < kHalfTiles; ++n)
      for (int i = 0; i < 4; ++i)
        th.dk[n][i] = th.dv[n][i] = 0;
    if (steps(tile) > 0)
      loadQueries(tile, 0, t, sm);
  }

  /// Step `step`'s Q and g tiles into buffer step % 2, asynchronously.
  DSC_TILE_FN void loadQueries(int64_t tile, int64_t step, int t,
                               float *sm) const {
    const int64_t i0 = firstQueryOf(tile) + step * BR, p = pairOf(tile);
    const int buffer = kQG * int(step & 1);
    loadTile16<IO, BR, true>(a.q, a.rows(p, i0, a.Tq, a.D), a.Tq - i0, a.D,
                             roundUp(a.D, 16), half(sm, kQ + buffer), L, t);
    loadTile16<IO, BR, true>(a.g, a.rows(p, i0, a.Tq, a.Dv), a.Tq - i0, a.Dv,
                             roundUp(a.Dv, 16), half(sm, kG + buffer), L, t);
    commitTileLoads();
  }

  DSC_TILE_FN void body(int phase, int64_t tile, int64_t step, int t,
                        Thread &th, float *sm) const {
    const int64_t p = pairOf(tile), j0 = firstKey(tile),
                  i0 = firstQueryOf(tile) + step * BR, row0 = p * a.Tq + i0;
    const int warp = t / 32, lane = t % 32, buffer = kQG * int(step & 1);
    if (phase == 0) { // this step's query tile has arrived; its statistics
      loadStats<BR>(lse, dsum, row0, a.Tq - i0, sm + kLse, sm + kDsum, t);
      awaitTileLoads();
    } else if (phase == 1) {      // P and dS: warp w, rows 16 (w % 4), 4 tiles
      if (step + 1 < steps(tile)) // the other buffer was last read before
        loadQueries(tile, step + 1, t, sm); // the block's previous barrier
      const int rows = 16 * (warp % 4);
      for (int n = 4 * (warp / 4); n < 4 * (warp / 4) + 4; n += 2)
        storeGradScores<kBF16>(*this, sm, buffer, 0, i0, j0, rows, n, lane,
                               half(sm, kP), half(sm, kDS), LS);
    } else { // dV += P^T g, dK += dS^T Q for keys 16 (w % 4).., half w / 4
      const int keys = 16 * (warp % 4), cols = 8 * kHalfTiles * (warp / 4);
      // Each A tile (P^T's, dS^T's) loaded once for the warp's column
      // tiles; every accumulator still sums over kc in order.
      for (int kc = 0; kc < BR / 16; ++kc) {
        // A(i, k) = P[16 kc + k][keys + i]; B(k, n) = g[16 kc + k][x + n]
        FragmentA fp, fds;
        fp.load(half(sm, kP) + 16 * kc * LS + keys, 1, LS, lane);
        fds.load(half(sm, kDS) + 16 * kc * LS + keys, 1, LS, lane);
        DSC_TILE_UNROLL
        for (int n = 0; n < kHalfTiles; ++n) {
          const int x = cols + 8 * n;
          if (x < a.Dv)
            mmaFragment<kBF16>(th.dv[n], fp,
                               half(sm, kG + buffer) + 16 * kc * L + x, L, 1,
                               lane);
          if (x < a.D)
            mmaFragment<kBF16>(th.dk[n], fds,
                               half(sm, kQ + buffer) + 16 * kc * L + x, L, 1,
                               lane);
        }
      }
    }
  }

  DSC_TILE_FN void epilogue(int, int64_t tile, int t, Thread &th,
                            float *) const {
    const int64_t p = pairOf(tile), j0 = firstKey(tile);
    const int warp = t / 32, lane = t % 32;
    const int keys = 16 * (warp % 4), cols = 8 * kHalfTiles * (warp / 4);
    DSC_TILE_UNROLL
    for (int n = 0; n < kHalfTiles; ++n)
      for (int i = 0; i < 4; ++i) {
        int r, c;
        accumulatorAt(lane, i, r, c);
        const int64_t j = j0 + keys + r, x = cols + 8 * n + c;
        if (j >= a.Tk)
          continue;
        if (x < a.D)
          IO::store(dk, sdk, a.rows(p, j, a.Tk, a.D).base + x, th.dk[n][i]);
        if (x < a.Dv)
          IO::store(dv, sdv, a.rows(p, j, a.Tk, a.Dv).base + x, th.dv[n][i]);
      }
  }
};

/// dQ, a block per 128 query rows (a warp per 16); tile sizes as the
/// forward's (MmaTiles).
template <class Cfg, class IO, bool kBF16> struct GradQMmaTiles : QueryTiling {
  static constexpr int BR = Cfg::BR, BC = Cfg::BC, DM = Cfg::DM, L = DM + 8,
                       LS = BC + 8, kTilesN = DM / 8;
  static constexpr int halves(int n) { return (n + 1) / 2; }
  // Shared memory, in floats: Q, g (the block's rows), K, V (a key tile,
  // twice: step s computes on buffer s % 2 while the next arrives in the
  // other, kKV floats further on), all 16-bit with rows of L; dS (16-bit,
  // BR x LS); lse, D.
  static constexpr int kKV = 2 * halves(BC * L);
  static constexpr int kQ = 0, kG = kQ + halves(BR * L),
                       kK = kG + halves(BR * L), kV = kK + halves(BC * L),
                       kDS = kK + 2 * kKV, kLse = kDS + halves(BR * LS),
                       kDsum = kLse + BR, kSmemFloats = kDsum + BR;
  static constexpr int kPrologue = 1, kBody = 3, kEpilogue = 1;
  static constexpr uint32_t kWarpBody = 0b010; // dS: the warp's own rows

  DSC_TILE_FN GradQMmaTiles() : QueryTiling{{}, BR, BC} {}
  const float *lse = nullptr, *dsum = nullptr;
  void *dq = nullptr;
  int sdq = 0;

  struct Thread {
    float dq[kTilesN][4];
  };

  DSC_TILE_FN static uint16_t *half(float *sm, int offset) {
    return reinterpret_cast<uint16_t *>(sm + offset);
  }

  DSC_TILE_FN void prologue(int, int64_t tile, int t, Thread &th,
                            float *sm) const {
    const int64_t p = pairOf(tile), i0 = firstRow(tile), row0 = p * a.Tq + i0;
    loadTile16<IO, BR>(a.q, a.rows(p, i0, a.Tq, a.D), a.Tq - i0, a.D,
                       roundUp(a.D, 16), half(sm, kQ), L, t);
    loadTile16<IO, BR>(a.g, a.rows(p, i0, a.Tq, a.Dv), a.Tq - i0, a.Dv,
                       roundUp(a.Dv, 16), half(sm, kG), L, t);
    loadStats<BR>(lse, dsum, row0, a.Tq - i0, sm + kLse, sm + kDsum, t);
    DSC_TILE_UNROLL
    for (int n = 0; n < kTilesN; ++n)
      for (int i = 0; i < 4; ++i)
        th.dq[n][i] = 0;
    if (steps(tile) > 0)
      loadKeys(tile, 0, t, sm);
  }

  /// Step `step`'s K and V tiles into buffer step % 2, asynchronously.
  DSC_TILE_FN void loadKeys(int64_t tile, int64_t step, int t,
                            float *sm) const {
    const int buffer = kKV * int(step & 1);
    loadKeyTiles<IO, BC>(a, pairOf(tile), step, half(sm, kK + buffer),
                         half(sm, kV + buffer), L, t);
  }

  DSC_TILE_FN void body(int phase, int64_t tile, int64_t step, int t,
                        Thread &th, float *sm) const {
    const int64_t i0 = firstRow(tile), j0 = step * BC;
    const int warp = t / 32, lane = t % 32, rows = 16 * warp,
              buffer = kKV * int(step & 1);
    if (phase == 0) { // this step's key tile has arrived
      awaitTileLoads();
    } else if (phase == 1) {      // the warp's dS
      if (step + 1 < steps(tile)) // the other buffer was last read before
        loadKeys(tile, step + 1, t, sm); // the block's previous barrier
      for (int n = 0; n < BC / 8; n += 2)
        storeGradScores<kBF16>(*this, sm, 0, buffer, i0, j0, rows, n, lane,
                               nullptr, half(sm, kDS), LS);
    } else { // dQ += dS K: A = dS rows, B(k, n) = K[16 kc + k][8 n' + n]
      // Each dS tile loaded once for every column tile of K.
      for (int kc = 0; kc < BC / 16; ++kc) {
        FragmentA fds;
        fds.load(half(sm, kDS) + rows * LS + 16 * kc, LS, 1, lane);
        DSC_TILE_UNROLL
        for (int n = 0; n < kTilesN; ++n)
          if (8 * n < a.D)
            mmaFragment<kBF16>(th.dq[n], fds,
                               half(sm, kK + buffer) + 16 * kc * L + 8 * n, L,
                               1, lane);
      }
    }
  }

  DSC_TILE_FN void epilogue(int, int64_t tile, int t, Thread &th,
                            float *) const {
    const int64_t p = pairOf(tile), i0 = firstRow(tile);
    const int warp = t / 32, lane = t % 32;
    DSC_TILE_UNROLL
    for (int n = 0; n < kTilesN; ++n)
      for (int i = 0; i < 4; ++i) {
        int r, c;
        accumulatorAt(lane, i, r, c);
        const int64_t i1 = i0 + 16 * warp + r, x = 8 * n + c;
        if (i1 < a.Tq && x < a.D)
          IO::store(dq, sdq, a.rows(p, i1, a.Tq, a.D).base + x, th.dq[n][i]);
      }
  }
};

} // namespace dsc::rt::cuda::tiles

#endif // DSC_RUNTIME_BACKENDS_CUDA_ATTENTIONMMAGRADTILES_H
