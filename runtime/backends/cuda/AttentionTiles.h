//===- AttentionTiles.h - tiled attention as block programs ---*- C++ -*-===//
//
// Attention on the CUDA backend, flash-attention style: a block of kThreads
// threads owns a tile of query rows (forward, dQ) or of key rows (dK, dV)
// of one (batch, head) pair, and walks the other side tile by tile through
// shared memory. Per pair of tiles it computes the BR x BC scores, the
// online softmax over the keys (running max and sum per row; what is
// accumulated so far is rescaled when the max grows) and the products with
// V, dO, Q or K, accumulated in registers. Nothing larger than one score
// tile exists; the T x T matrix never does.
//
// Each program is a list of phases, and every thread of the block runs a
// phase before the block meets at a barrier (__syncthreads), or only the
// warp at its own (__syncwarp) after the phases a program marks so
// (WarpSyncedBody). A phase reads what earlier phases wrote, never what
// another thread writes in the same phase. Written so, one text runs on the
// device (runTiles in Attention.cu) and on the host (emulateTiles below): the
// tiling, the causal masks, the tails and the absence of races within a phase
// are tested on machines without a GPU (test/unit/cuda/AttentionTilesTest.cpp
// runs the threads of each phase in opposite orders and wants the same bits).
//
// The gradient adds no floats atomically: the block that owns a key tile
// sums dK and dV over the query tiles in order, and a second program that
// owns a query tile sums dQ over the key tiles: the same bits every run.
// It recomputes instead of storing: the forward program, in its statistics
// form, gives each query row its log-sum-exp and D_i = dO_i . O_i.
//
// These programs run the products on the CUDA cores in f32 from shared
// memory; AttentionMmaTiles.h and AttentionMmaGradTiles.h run them on
// tensor cores for 16-bit operands (docs/cuda.md).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CUDA_ATTENTIONTILES_H
#define DSC_RUNTIME_BACKENDS_CUDA_ATTENTIONTILES_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(__CUDACC__)
#define DSC_TILE_FN __host__ __device__ __forceinline__
#else
#define DSC_TILE_FN inline
#endif
// Loops over a thread's accumulators: unrolled on the device, so the
// arrays stay in registers (indexed at run time they would be local
// memory).
#if defined(__CUDA_ARCH__)
#define DSC_TILE_UNROLL _Pragma("unroll")
#else
#define DSC_TILE_UNROLL
#endif

namespace dsc::rt::cuda::tiles {

constexpr int kThreads = 256;

/// Where a run of rows of one operand lies: row r's first element at
/// base + r * step.
struct RowsAt {
  int64_t base, step;
};

/// One ds.attention or ds.attention_grad: q [P, Tq, D], k [P, Tk, D],
/// v [P, Tk, Dv], g (the output's gradient) [P, Tq, Dv], P = batch * heads,
/// row-major; or, seqMajor, each [B, T, H, width] (a pair's rows H * width
/// apart). Storage codes are cuda::Storage's (the IO policy reads them).
struct Problem {
  const void *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr;
  int sq = 0, sk = 0, sv = 0, sg = 0;
  int64_t pairs = 0, Tq = 0, Tk = 0, D = 0, Dv = 0;
  int64_t heads = 1; // H: how pairs map to seqMajor rows
  bool causal = false, seqMajor = false;
  float scale = 1;

  /// Rows i, i + 1, ... (of T) of pair p, in an operand `width` wide.
  DSC_TILE_FN RowsAt rows(int64_t p, int64_t i, int64_t T,
                          int64_t width) const {
    if (!seqMajor)
      return {(p * T + i) * width, width};
    return {(((p / heads) * T + i) * heads + p % heads) * width, heads * width};
  }

  /// Query i sees key j (causal: j <= i + Tk - Tq, the CPU's rule).
  DSC_TILE_FN bool sees(int64_t i, int64_t j) const {
    return i < Tq && j < Tk && (!causal || j - i <= Tk - Tq);
  }
  /// Keys query i sees are j < keysSeen(i).
  DSC_TILE_FN int64_t keysSeen(int64_t i) const {
    if (!causal)
      return Tk;
    const int64_t n = i + (Tk - Tq) + 1;
    return n < 0 ? 0 : n > Tk ? Tk : n;
  }
  /// The first query that sees key j (Tq when none does).
  DSC_TILE_FN int64_t firstQuery(int64_t j) const {
    const int64_t f = causal ? j - (Tk - Tq) : 0;
    return f < 0 ? 0 : f > Tq ? Tq : f;
  }
};

/// Tile sizes: BR query rows, BC key rows, head dims up to DM.
template <int BR_, int BC_, int DM_> struct Tiles {
  static constexpr int BR = BR_, BC = BC_, DM = DM_;
  static constexpr int W = DM + 1;  // a Q/K/V/G row in shared memory: the
                                    // pad puts rows on different banks
  static constexpr int SW = BC + 1; // a score row
  static_assert(DM % 32 == 0 && (BR * DM) % kThreads == 0 &&
                    (BC * DM) % kThreads == 0,
                "a warp's entries share a row; every thread owns as many");
};

/// Head dims up to 64, 128 and 256 (0: more than any).
inline int tileWidth(int64_t dim) {
  return dim <= 64 ? 64 : dim <= 128 ? 128 : dim <= 256 ? 256 : 0;
}
using Tiles64 = Tiles<64, 64, 64>;
using Tiles128 = Tiles<32, 32, 128>;
using Tiles256 = Tiles<16, 16, 256>;

DSC_TILE_FN int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// a * b rounded, never fused into a following add: the forward stores the
/// scaled score and the gradient subtracts the log-sum-exp from it, and
/// both must see the same float (nvcc contracts a * b - c into an FMA).
DSC_TILE_FN float mulRounded(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
DSC_TILE_FN int64_t lesser(int64_t a, int64_t b) { return a < b ? a : b; }

/// Thread t's elements e = t, t + kThreads, ... of a tile `w` wide, as row
/// r and column c, stepped without dividing per element: the width is a
/// runtime head dim, and a 64-bit division per element cost more than the
/// load it addressed. A width of 0 (a head dim of 0) walks nothing.
struct TileWalk {
  int r, c;
  const int width, dr, dc;
  DSC_TILE_FN TileWalk(int64_t w, int t)
      : r(w > 0 ? t / int(w) : 1 << 30), c(w > 0 ? t % int(w) : 0),
        width(w > 0 ? int(w) : 1), dr(kThreads / width), dc(kThreads % width) {}
  DSC_TILE_FN void next() {
    r += dr;
    c += dc;
    if (c >= width) {
      c -= width;
      ++r;
    }
  }
};

/// dst[r * stride + c] = src row r of `at`, column c, for r < ROWS and
/// c < cols; rows at or past `rows` read as zero. Consecutive threads read
/// consecutive elements.
template <class IO, int ROWS>
DSC_TILE_FN void loadTile(const void *src, int s, RowsAt at, int64_t rows,
                          int64_t cols, float *dst, int stride, int t) {
  for (TileWalk w(cols, t); w.r < ROWS; w.next())
    dst[w.r * stride + w.c] =
        w.r < rows ? IO::load(src, s, at.base + w.r * at.step + w.c) : 0;
}

/// Per-row statistics of rows row0.. (INFINITY and 0 past `rows`: such a
/// row's probabilities are zero).
template <int ROWS>
DSC_TILE_FN void loadStats(const float *lse, const float *dsum, int64_t row0,
                           int64_t rows, float *lseTile, float *dsumTile,
                           int t) {
  if (t < ROWS) {
    lseTile[t] = t < rows ? lse[row0 + t] : INFINITY;
    dsumTile[t] = t < rows ? dsum[row0 + t] : 0.0f;
  }
}

DSC_TILE_FN float dot(const float *a, const float *b, int64_t n) {
  float acc = 0;
  for (int64_t d = 0; d < n; ++d)
    acc += a[d] * b[d];
  return acc;
}

/// The gradient's scores for query rows i0.. and key rows j0..:
/// P = exp(scale q.k - lse), dS = scale P (g.v - D); zero where the query
/// does not see the key. P is skipped when null.
template <class Cfg>
DSC_TILE_FN void scoreGrads(const Problem &a, int64_t i0, int64_t j0,
                            const float *Q, const float *G, const float *K,
                            const float *V, const float *lse, const float *dsum,
                            float *P, float *dS, int t) {
  for (int e = t; e < Cfg::BR * Cfg::BC; e += kThreads) {
    const int r = e / Cfg::BC, c = e % Cfg::BC;
    float p = 0, ds = 0;
    if (a.sees(i0 + r, j0 + c)) {
      p = expf(mulRounded(a.scale, dot(Q + r * Cfg::W, K + c * Cfg::W, a.D)) -
               lse[r]);
      const float dp = dot(G + r * Cfg::W, V + c * Cfg::W, a.Dv);
      ds = a.scale * p * (dp - dsum[r]);
    }
    if (P)
      P[r * Cfg::SW + c] = p;
    dS[r * Cfg::SW + c] = ds;
  }
}

/// Where a program's tiles lie when a block owns query rows (the forward,
/// dQ): a tile is tileRows query rows of one (batch, head) pair, and its
/// steps are the tiles of tileKeys keys those rows see (the last row sees
/// the most).
struct QueryTiling {
  Problem a;
  int tileRows = 0, tileKeys = 0;

  DSC_TILE_FN int64_t queryTiles() const { return ceilDiv(a.Tq, tileRows); }
  DSC_TILE_FN int64_t tiles() const { return a.pairs * queryTiles(); }
  DSC_TILE_FN int64_t pairOf(int64_t tile) const { return tile / queryTiles(); }
  DSC_TILE_FN int64_t firstRow(int64_t tile) const {
    return tile % queryTiles() * tileRows;
  }
  DSC_TILE_FN int64_t steps(int64_t tile) const {
    const int64_t last = lesser(firstRow(tile) + tileRows, a.Tq) - 1;
    return ceilDiv(a.keysSeen(last), tileKeys);
  }
};

/// When a block owns keys (dK, dV): a tile is tileKeys keys of one pair,
/// and its steps are the tiles of tileRows query rows from the first query
/// that sees its first key.
struct KeyTiling {
  Problem a;
  int tileRows = 0, tileKeys = 0;

  DSC_TILE_FN int64_t keyTiles() const { return ceilDiv(a.Tk, tileKeys); }
  DSC_TILE_FN int64_t tiles() const { return a.pairs * keyTiles(); }
  DSC_TILE_FN int64_t pairOf(int64_t tile) const { return tile / keyTiles(); }
  DSC_TILE_FN int64_t firstKey(int64_t tile) const {
    return tile % keyTiles() * tileKeys;
  }
  DSC_TILE_FN int64_t firstQueryOf(int64_t tile) const {
    return a.firstQuery(firstKey(tile));
  }
  DSC_TILE_FN int64_t steps(int64_t tile) const {
    return ceilDiv(a.Tq - firstQueryOf(tile), tileRows);
  }
};

/// The forward program. kStats false: writes the output [P, Tq, Dv].
/// kStats true: writes, per query row, the log-sum-exp (INFINITY when the
/// row sees no key) and D_i = sum_j P_ij (g_i . v_j), which the gradient
/// programs read. D_i is g_i . out_i, but summed from the very products
/// scoreGrads computes, so dP - D cancels exactly where it should (a row
/// that sees one key has P = 1 and no gradient reaches its query).
template <class Cfg, class IO, bool kStats> struct ForwardTiles : QueryTiling {
  static constexpr int BR = Cfg::BR, BC = Cfg::BC, DM = Cfg::DM, W = Cfg::W,
                       SW = Cfg::SW, kAcc = kStats ? 1 : BR * DM / kThreads;
  // Shared memory, in floats: Q tile, K tile, V tile, scores, and per row
  // the running max, the running sum and this step's rescale factor; for
  // the statistics also the g tile and g . v per score.
  static constexpr int kQ = 0, kK = kQ + BR * W, kV = kK + BC * W,
                       kS = kV + BC * W, kM = kS + BR * SW, kL = kM + BR,
                       kC = kL + BR, kG = kC + BR,
                       kDP = kG + (kStats ? BR * W : 0),
                       kSmemFloats = kDP + (kStats ? BR * SW : 0);
  static constexpr int kPrologue = 1, kBody = kStats ? 3 : 4, kEpilogue = 1;

  DSC_TILE_FN ForwardTiles() : QueryTiling{{}, BR, BC} {}
  void *out = nullptr; // kStats false
  int so = 0;
  float *lse = nullptr, *dsum = nullptr; // kStats true: [P * Tq] each

  struct Thread {
    float o[kAcc]; // entries t + k * kThreads of the BR x DM output tile
    // Statistics: thread r's row's running sum of P (g . v), in double as
    // the CPU's (dP - D cancels where P is large).
    double d;
  };

  DSC_TILE_FN void prologue(int, int64_t tile, int t, Thread &th,
                            float *sm) const {
    const int64_t p = pairOf(tile), i0 = firstRow(tile);
    loadTile<IO, BR>(a.q, a.sq, a.rows(p, i0, a.Tq, a.D), a.Tq - i0, a.D,
                     sm + kQ, W, t);
    if constexpr (kStats)
      loadTile<IO, BR>(a.g, a.sg, a.rows(p, i0, a.Tq, a.Dv), a.Tq - i0, a.Dv,
                       sm + kG, W, t);
    DSC_TILE_UNROLL
    for (int k = 0; k < kAcc; ++k)
      th.o[k] = 0;
    th.d = 0;
    if (t < BR) {
      sm[kM + t] = -INFINITY;
      sm[kL + t] = 0;
    }
  }

  DSC_TILE_FN void body(int phase, int64_t tile, int64_t step, int t,
                        Thread &th, float *sm) const {
    const int64_t p = pairOf(tile), i0 = firstRow(tile), j0 = step * BC;
    switch (phase) {
    case 0: // the key tile
      loadTile<IO, BC>(a.k, a.sk, a.rows(p, j0, a.Tk, a.D), a.Tk - j0, a.D,
                       sm + kK, W, t);
      loadTile<IO, BC>(a.v, a.sv, a.rows(p, j0, a.Tk, a.Dv), a.Tk - j0, a.Dv,
                       sm + kV, W, t);
      break;
    case 1: // scores, -inf where the query does not see the key; g . v
      for (int e = t; e < BR * BC; e += kThreads) {
        const int r = e / BC, c = e % BC;
        const bool seen = a.sees(i0 + r, j0 + c);
        sm[kS + r * SW + c] =
            seen ? mulRounded(a.scale,
                              dot(sm + kQ + r * W, sm + kK + c * W, a.D))
                 : -INFINITY;
        if constexpr (kStats)
          sm[kDP + r * SW + c] =
              seen ? dot(sm + kG + r * W, sm + kV + c * W, a.Dv) : 0.0f;
      }
      break;
    case 2: // the online softmax, a thread per row
      if (t < BR)
        softmaxStep(sm, t, th);
      break;
    default: // rescale, then add this tile's P V
      DSC_TILE_UNROLL
      for (int k = 0; k < kAcc; ++k) {
        const int e = t + k * kThreads, r = e / DM, x = e % DM;
        if (x >= a.Dv)
          continue;
        float acc = th.o[k] * sm[kC + r];
        for (int c = 0; c < BC; ++c)
          acc += sm[kS + r * SW + c] * sm[kV + c * W + x];
        th.o[k] = acc;
      }
    }
  }

  /// Row r's scores become probabilities relative to the new running max;
  /// the running sums and the factor for what was accumulated follow.
  DSC_TILE_FN void softmaxStep(float *sm, int r, Thread &th) const {
    float *s = sm + kS + r * SW;
    const float m = sm[kM + r];
    float mNew = m;
    for (int c = 0; c < BC; ++c)
      mNew = s[c] > mNew ? s[c] : mNew;
    float l = sm[kL + r], rescale = 1;
    if (mNew == -INFINITY) { // nothing seen yet
      for (int c = 0; c < BC; ++c)
        s[c] = 0;
    } else {
      rescale = expf(m - mNew); // 0 while m is -inf
      float sum = 0;
      double dSum = 0;
      for (int c = 0; c < BC; ++c) {
        s[c] = expf(s[c] - mNew);
        sum += s[c];
        if constexpr (kStats)
          dSum += double(s[c]) * sm[kDP + r * SW + c];
      }
      l = l * rescale + sum;
      if constexpr (kStats)
        th.d = th.d * rescale + dSum;
    }
    sm[kM + r] = mNew;
    sm[kL + r] = l;
    sm[kC + r] = rescale;
  }

  DSC_TILE_FN void epilogue(int, int64_t tile, int t, Thread &th,
                            float *sm) const {
    const int64_t p = pairOf(tile), i0 = firstRow(tile);
    if constexpr (kStats) {
      if (t < BR && i0 + t < a.Tq) {
        const float l = sm[kL + t];
        const int64_t row = p * a.Tq + i0 + t;
        lse[row] = l > 0 ? sm[kM + t] + logf(l) : INFINITY;
        dsum[row] = l > 0 ? float(th.d / l) : 0.0f;
      }
    } else {
      DSC_TILE_UNROLL
      for (int k = 0; k < kAcc; ++k) {
        const int e = t + k * kThreads, r = e / DM, x = e % DM;
        const int64_t i = i0 + r;
        if (x < a.Dv && i < a.Tq) {
          const float l = sm[kL + r];
          IO::store(out, so, a.rows(p, i, a.Tq, a.Dv).base + x,
                    l > 0 ? th.o[k] / l : 0.0f);
        }
      }
    }
  }
};

/// dQ = sum over keys of dS K, a block per query tile.
template <class Cfg, class IO> struct GradQTiles : QueryTiling {
  static constexpr int BR = Cfg::BR, BC = Cfg::BC, DM = Cfg::DM, W = Cfg::W,
                       SW = Cfg::SW, kAcc = BR * DM / kThreads;
  static constexpr int kQ = 0, kG = kQ + BR * W, kK = kG + BR * W,
                       kV = kK + BC * W, kDS = kV + BC * W,
                       kLse = kDS + BR * SW, kDsum = kLse + BR,
                       kSmemFloats = kDsum + BR;
  static constexpr int kPrologue = 1, kBody = 3, kEpilogue = 1;

  DSC_TILE_FN GradQTiles() : QueryTiling{{}, BR, BC} {}
  const float *lse = nullptr, *dsum = nullptr;
  void *dq = nullptr;
  int sdq = 0;

  struct Thread {
    float dq[kAcc];
  };

  DSC_TILE_FN void prologue(int, int64_t tile, int t, Thread &th,
                            float *sm) const {
    const int64_t p = pairOf(tile), i0 = firstRow(tile), row0 = p * a.Tq + i0;
    loadTile<IO, BR>(a.q, a.sq, a.rows(p, i0, a.Tq, a.D), a.Tq - i0, a.D,
                     sm + kQ, W, t);
    loadTile<IO, BR>(a.g, a.sg, a.rows(p, i0, a.Tq, a.Dv), a.Tq - i0, a.Dv,
                     sm + kG, W, t);
    loadStats<BR>(lse, dsum, row0, a.Tq - i0, sm + kLse, sm + kDsum, t);
    DSC_TILE_UNROLL
    for (int k = 0; k < kAcc; ++k)
      th.dq[k] = 0;
  }

  DSC_TILE_FN void body(int phase, int64_t tile, int64_t step, int t,
                        Thread &th, float *sm) const {
    const int64_t p = pairOf(tile), i0 = firstRow(tile), j0 = step * BC;
    if (phase == 0) {
      loadTile<IO, BC>(a.k, a.sk, a.rows(p, j0, a.Tk, a.D), a.Tk - j0, a.D,
                       sm + kK, W, t);
      loadTile<IO, BC>(a.v, a.sv, a.rows(p, j0, a.Tk, a.Dv), a.Tk - j0, a.Dv,
                       sm + kV, W, t);
    } else if (phase == 1) {
      scoreGrads<Cfg>(a, i0, j0, sm + kQ, sm + kG, sm + kK, sm + kV, sm + kLse,
                      sm + kDsum, nullptr, sm + kDS, t);
    } else {
      DSC_TILE_UNROLL
      for (int k = 0; k < kAcc; ++k) {
        const int e = t + k * kThreads, r = e / DM, x = e % DM;
        if (x >= a.D)
          continue;
        float acc = th.dq[k];
        for (int c = 0; c < BC; ++c)
          acc += sm[kDS + r * SW + c] * sm[kK + c * W + x];
        th.dq[k] = acc;
      }
    }
  }

  DSC_TILE_FN void epilogue(int, int64_t tile, int t, Thread &th,
                            float *) const {
    const int64_t p = pairOf(tile), i0 = firstRow(tile);
    DSC_TILE_UNROLL
    for (int k = 0; k < kAcc; ++k) {
      const int e = t + k * kThreads, r = e / DM, x = e % DM;
      if (x < a.D && i0 + r < a.Tq)
        IO::store(dq, sdq, a.rows(p, i0 + r, a.Tq, a.D).base + x, th.dq[k]);
    }
  }
};

/// dK = sum over queries of dS^T Q and dV = P^T g, a block per key tile,
/// from the first query that sees the tile on.
template <class Cfg, class IO> struct GradKVTiles : KeyTiling {
  static constexpr int BR = Cfg::BR, BC = Cfg::BC, DM = Cfg::DM, W = Cfg::W,
                       SW = Cfg::SW, kAcc = BC * DM / kThreads;
  static constexpr int kK = 0, kV = kK + BC * W, kQ = kV + BC * W,
                       kG = kQ + BR * W, kP = kG + BR * W, kDS = kP + BR * SW,
                       kLse = kDS + BR * SW, kDsum = kLse + BR,
                       kSmemFloats = kDsum + BR;
  static constexpr int kPrologue = 1, kBody = 3, kEpilogue = 1;

  DSC_TILE_FN GradKVTiles() : KeyTiling{{}, BR, BC} {}
  const float *lse = nullptr, *dsum = nullptr;
  void *dk = nullptr, *dv = nullptr;
  int sdk = 0, sdv = 0;

  struct Thread {
    float dk[kAcc], dv[kAcc]; // entries of the BC x DM tiles
  };

  DSC_TILE_FN void prologue(int, int64_t tile, int t, Thread &th,
                            float *sm) const {
    const int64_t p = pairOf(tile), j0 = firstKey(tile);
    loadTile<IO, BC>(a.k, a.sk, a.rows(p, j0, a.Tk, a.D), a.Tk - j0, a.D,
                     sm + kK, W, t);
    loadTile<IO, BC>(a.v, a.sv, a.rows(p, j0, a.Tk, a.Dv), a.Tk - j0, a.Dv,
                     sm + kV, W, t);
    DSC_TILE_UNROLL
    for (int k = 0; k < kAcc; ++k)
      th.dk[k] = th.dv[k] = 0;
  }

  DSC_TILE_FN void body(int phase, int64_t tile, int64_t step, int t,
                        Thread &th, float *sm) const {
    const int64_t p = pairOf(tile), j0 = firstKey(tile),
                  i0 = firstQueryOf(tile) + step * BR, row0 = p * a.Tq + i0;
    if (phase == 0) {
      loadTile<IO, BR>(a.q, a.sq, a.rows(p, i0, a.Tq, a.D), a.Tq - i0, a.D,
                       sm + kQ, W, t);
      loadTile<IO, BR>(a.g, a.sg, a.rows(p, i0, a.Tq, a.Dv), a.Tq - i0, a.Dv,
                       sm + kG, W, t);
      loadStats<BR>(lse, dsum, row0, a.Tq - i0, sm + kLse, sm + kDsum, t);
    } else if (phase == 1) {
      scoreGrads<Cfg>(a, i0, j0, sm + kQ, sm + kG, sm + kK, sm + kV, sm + kLse,
                      sm + kDsum, sm + kP, sm + kDS, t);
    } else {
      DSC_TILE_UNROLL
      for (int k = 0; k < kAcc; ++k) {
        const int e = t + k * kThreads, c = e / DM, x = e % DM;
        if (x < a.D) {
          float acc = th.dk[k];
          for (int r = 0; r < BR; ++r)
            acc += sm[kDS + r * SW + c] * sm[kQ + r * W + x];
          th.dk[k] = acc;
        }
        if (x < a.Dv) {
          float acc = th.dv[k];
          for (int r = 0; r < BR; ++r)
            acc += sm[kP + r * SW + c] * sm[kG + r * W + x];
          th.dv[k] = acc;
        }
      }
    }
  }

  DSC_TILE_FN void epilogue(int, int64_t tile, int t, Thread &th,
                            float *) const {
    const int64_t p = pairOf(tile), j0 = firstKey(tile);
    DSC_TILE_UNROLL
    for (int k = 0; k < kAcc; ++k) {
      const int e = t + k * kThreads, c = e / DM, x = e % DM;
      if (j0 + c >= a.Tk)
        continue;
      if (x < a.D)
        IO::store(dk, sdk, a.rows(p, j0 + c, a.Tk, a.D).base + x, th.dk[k]);
      if (x < a.Dv)
        IO::store(dv, sdv, a.rows(p, j0 + c, a.Tk, a.Dv).base + x, th.dv[k]);
    }
  }
};

/// Host emulation: which phase is running (emulateTiles counts them), so
/// an emulated product may be reused within a phase, where no thread
/// writes its operands.
inline uint64_t &emulatedPhase() {
  static uint64_t phase = 0;
  return phase;
}

/// The order in which the host runs a phase's threads.
enum class ThreadOrder { Ascending, Descending };

/// The body phases after which a program's warps meet only their own
/// lanes (__syncwarp), not the block: bit ph of Prog::kWarpBody, 0 when a
/// program does not declare it. In such a phase a warp reads only what its
/// own lanes wrote since the last block barrier (and what the block wrote
/// before it); the phase after a run of them ends in a block barrier.
template <class Prog, class = void> struct WarpSyncedBody {
  static constexpr uint32_t mask = 0;
};
template <class Prog>
struct WarpSyncedBody<Prog, std::void_t<decltype(Prog::kWarpBody)>> {
  static constexpr uint32_t mask = Prog::kWarpBody;
  static_assert(!(mask >> (Prog::kBody - 1) & 1),
                "the last body phase ends in a block barrier");
};
constexpr int kWarps = kThreads / 32;

/// Runs a program on the host as a device block would, tile after tile:
/// each phase for every thread in `order`, then the next phase. Phases
/// that end in a warp's barrier (WarpSyncedBody) run warp by warp instead,
/// each warp through all of them up to the next block barrier, warps in
/// `order`: a read of another warp's writes there sees them in one order
/// and not in the other. Shared memory and the threads' registers start
/// each tile as all-ones bits (NaN as f32, bf16 and f16), so a read of
/// something no phase wrote shows in the results.
template <class Prog> void emulateTiles(const Prog &prog, ThreadOrder order) {
  using Thread = typename Prog::Thread;
  static_assert(sizeof(Thread) % sizeof(float) == 0, "registers are floats");
  constexpr uint32_t warpSynced = WarpSyncedBody<Prog>::mask;
  float nan;
  const uint32_t ones = ~0u;
  std::memcpy(&nan, &ones, sizeof nan);
  std::vector<float> smem(size_t(Prog::kSmemFloats));
  std::vector<Thread> threads(kThreads);
  const bool up = order == ThreadOrder::Ascending;
  auto eachThread = [&](int first, int count, auto &&run) {
    for (int n = 0; n < count; ++n) {
      const int t = first + (up ? n : count - 1 - n);
      run(t, threads[size_t(t)]);
    }
  };
  for (int64_t tile = 0; tile < prog.tiles(); ++tile) {
    std::fill(smem.begin(), smem.end(), nan);
    std::fill_n(reinterpret_cast<float *>(threads.data()),
                threads.size() * sizeof(Thread) / sizeof(float), nan);
    for (int ph = 0; ph < Prog::kPrologue; ++ph, ++emulatedPhase())
      eachThread(0, kThreads, [&](int t, Thread &th) {
        prog.prologue(ph, tile, t, th, smem.data());
      });
    for (int64_t step = 0, n = prog.steps(tile); step < n; ++step)
      for (int ph = 0; ph < Prog::kBody;) {
        int last = ph; // phases ph..last, the last ending in a block barrier
        while (warpSynced >> last & 1)
          ++last;
        for (int w = 0; w < (last > ph ? kWarps : 1); ++w) {
          const int warp = up ? w : kWarps - 1 - w;
          for (int q = ph; q <= last; ++q, ++emulatedPhase())
            eachThread(last > ph ? 32 * warp : 0, last > ph ? 32 : kThreads,
                       [&](int t, Thread &th) {
                         prog.body(q, tile, step, t, th, smem.data());
                       });
        }
        ph = last + 1;
      }
    for (int ph = 0; ph < Prog::kEpilogue; ++ph, ++emulatedPhase())
      eachThread(0, kThreads, [&](int t, Thread &th) {
        prog.epilogue(ph, tile, t, th, smem.data());
      });
  }
}

} // namespace dsc::rt::cuda::tiles

#endif // DSC_RUNTIME_BACKENDS_CUDA_ATTENTIONTILES_H
