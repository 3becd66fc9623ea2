//===- Attention.cpp - scaled dot-product attention, rotary embedding -----===//
//
// ds.attention per (batch, head): S = scale Q K^T by sgemm, a masked softmax
// over each row of S, O = P V by sgemm (causal: per block of query rows,
// against the keys the block sees). ds.attention_grad recomputes P the
// same way, then dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(P dP)) scale,
// dQ = dS K and dK = dS^T Q. With `causal`, query i sees keys
// j <= i + (Tk - Tq); a row that sees none is zero.
//
// The (batch, head) pairs are split over the kernel threads, each running
// single-threaded sgemms on [T, T] score blocks: for these small matrices
// that beats letting OpenBLAS thread each call. With seq_major operands
// ([B, T, H, D], a pair's rows H * D apart) each thread copies a pair's
// rows into its scratch first and its results back after: the same
// products on contiguous rows, bit for bit. (Reading the rows in place
// through the GEMMs' leading dimensions cost attention_grad 7-30% more on
// the small GPT, more than the copies, which stay in cache.) 16-bit
// operands (the kernels' 16-bit column) are widened into the same scratch
// a pair's rows at a time and the results rounded back from it: the f32
// kernel's arithmetic on the widened values, without whole-operand copies.
// All-bf16 operands on a CPU with AMX go to AttentionBf16.cpp instead.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/AttentionBf16.h"
#include "runtime/backends/cpu/Convert.h"
#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/backends/cpu/FastMath.h"
#include "runtime/backends/cpu/Widening.h"

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

namespace dsc::rt::cpu {
namespace {

using Dims = AttentionDims;

/// The checks and dims of both kernels; f32 operands only, unless
/// `sixteenBit` (the 16-bit column: f32, f16 or bf16 each, which the
/// kernel's contract has checked).
bool attentionDims(std::string &err, const KernelArgs &a, bool sixteenBit,
                   Dims &d, bool &causal, float &scale) {
  if (!sixteenBit && !expectAllF32(a, err))
    return false;
  double s;
  if (!checkAttention(a, d, causal, s, err))
    return false;
  scale = float(s);
  if (std::max({d.Tq, d.Tk, d.D, d.Dv}) > blasIntMax())
    return fail(err, "dims exceed the BLAS index range");
  return true;
}

// C = alpha op(A) op(B) + beta C with zero-sized dims handled.
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
          const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
          float *C, int64_t ldc) {
  if (M == 0 || N == 0)
    return;
  if (K == 0) {
    if (beta == 0)
      for (int64_t i = 0; i < M; ++i)
        std::memset(C + i * ldc, 0, size_t(N) * sizeof(float));
    return;
  }
  sgemm(ta, tb, M, N, K, alpha, A, std::max<int64_t>(lda, 1), B,
        std::max<int64_t>(ldb, 1), beta, C, ldc);
}

// Causal attention works on blocks of query rows, each against only the
// keys its last row sees: for Tq = Tk = 128 that is 3/4 of the full
// products.
constexpr int64_t kQueryBlock = 64;

struct QueryBlock {
  int64_t i0, i1, kv; // rows [i0, i1) see keys [0, kv) at most
};

std::vector<QueryBlock> queryBlocks(const Dims &d, bool causal) {
  if (!causal)
    return {{0, d.Tq, d.Tk}};
  std::vector<QueryBlock> blocks;
  for (int64_t i0 = 0; i0 < d.Tq; i0 += kQueryBlock) {
    int64_t i1 = std::min(d.Tq, i0 + kQueryBlock);
    blocks.push_back({i0, i1, d.visibleKeys(true, i1 - 1)});
  }
  return blocks;
}

// Turns the scores S [i1 - i0, kv] of a block into probabilities in place;
// masked keys get 0, a row that sees none is all 0.
void blockSoftmax(const Dims &d, bool causal, const QueryBlock &b, float *S) {
  for (int64_t i = b.i0; i < b.i1; ++i) {
    float *row = S + (i - b.i0) * b.kv;
    int64_t n = d.visibleKeys(causal, i);
    if (n > 0) {
      const float mx = maxOf(row, n);
      const float inv = float(1.0 / fm::expShifted(row, row, n, mx));
      for (int64_t j = 0; j < n; ++j)
        row[j] *= inv;
    }
    std::fill(row + n, row + b.kv, 0.0f);
  }
}

// Runs fn(pair, scratch) for every (batch, head) pair over the kernel
// threads, with OpenBLAS single-threaded meanwhile.
template <typename F>
void forEachPair(const Dims &d, int64_t scratchFloats, F fn) {
  auto run = [&](int64_t p0, int64_t p1) {
    std::vector<float> scratch(static_cast<size_t>(scratchFloats));
    for (int64_t p = p0; p < p1; ++p)
      fn(p, scratch.data());
  };
  const int64_t pairs = d.B * d.H;
  if (kernelThreads() > 1 && pairs > 1) {
    SingleThreadedBlas single;
    parallelFor(pairs, 1, run);
  } else {
    run(0, pairs);
  }
}

/// Whether a pair's rows of `t` are read or written in place: f32 in
/// [B, H, T, D], where they are contiguous floats.
bool inPlace(const Dims &d, const TensorRef &t) {
  return !d.seqMajor && t.dtype == DType::f32;
}

/// One input of one pair: its rows (T of `width`) as contiguous floats. In
/// [B, H, T, D] f32 they are the operand's own rows; otherwise a copy made
/// in the thread's scratch (seq_major rows gathered, 16-bit ones widened).
struct PairInput {
  const float *rows;

  PairInput(const Dims &d, const TensorRef &t, int64_t p, int64_t T,
            int64_t width, float *&scratch) {
    const int64_t first = d.rowOffset(p, 0, T, width);
    if (inPlace(d, t)) {
      rows = t.f32() + first;
      return;
    }
    const int64_t stride = d.rowStride(width);
    for (int64_t i = 0; i < T; ++i) {
      float *row = scratch + i * width;
      const float *wide =
          chunkAsF32(t.dtype, t.data, first + i * stride, width, row);
      if (wide != row)
        std::memcpy(row, wide, size_t(width) * sizeof(float));
    }
    rows = scratch;
    scratch += T * width;
  }
};

/// One output of one pair: where the kernel writes its rows (the output's
/// own, or a scratch copy that `out` stores back: gathered rows of
/// seq_major, rounded to a 16-bit output's dtype).
struct PairOutput {
  float *rows;
  const TensorRef *home;
  int64_t first, T, width, stride;

  PairOutput(const Dims &d, const TensorRef &t, int64_t p, int64_t T,
             int64_t width, float *&scratch)
      : home(&t), first(d.rowOffset(p, 0, T, width)), T(T), width(width),
        stride(d.rowStride(width)) {
    if (inPlace(d, t)) {
      rows = t.f32() + first;
      home = nullptr;
    } else {
      rows = scratch;
      scratch += T * width;
    }
  }
  void out() {
    if (!home)
      return;
    for (int64_t i = 0; i < T; ++i) {
      const float *row = rows + i * width;
      const int64_t at = first + i * stride;
      if (home->dtype == DType::f32)
        std::memcpy(home->f32() + at, row, size_t(width) * sizeof(float));
      else
        (home->dtype == DType::bf16 ? f32ToBf16 : f32ToF16)(
            row, static_cast<uint16_t *>(home->data) + at, width);
    }
  }
};

/// Scratch floats a pair's copies take: `floats` (every operand's rows),
/// or none when every operand is read and written in place.
int64_t copyFloats(const Dims &d, const KernelArgs &a, int64_t floats) {
  for (size_t i = 0; i < a.numInputs; ++i)
    if (!inPlace(d, a.inputs[i]))
      return floats;
  for (size_t i = 0; i < a.numOutputs; ++i)
    if (!inPlace(d, a.outputs[i]))
      return floats;
  return 0;
}

/// cos and sin of t * theta^(-2i/D) for positions t < T and pairs
/// i < D / 2 (sin negated for the inverse rotation), rounded from double.
struct RotaryTable {
  std::vector<float> cos, sin;
};

/// The table for (T, D, theta, inverse), built once per process: a step
/// rotates q and k and their gradients with the same few tables, and
/// building one costs 3 T D / 2 double pow/cos/sin calls (0.2 ms at T 128,
/// D 64), as much as the rotation itself. Entries are never freed (one
/// per shape and direction a plan uses).
const RotaryTable &rotaryTable(int64_t T, int64_t D, double theta,
                               bool inverse) {
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, int64_t, double, bool>,
                  std::unique_ptr<RotaryTable>>
      tables;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<RotaryTable> &table = tables[{T, D, theta, inverse}];
  if (table)
    return *table;
  table = std::make_unique<RotaryTable>();
  const int64_t half = D / 2;
  table->cos.resize(size_t(T * half));
  table->sin.resize(size_t(T * half));
  for (int64_t i = 0; i < half; ++i) {
    double freq = std::pow(theta, -2.0 * double(i) / double(D));
    for (int64_t t = 0; t < T; ++t) {
      double angle = double(t) * freq;
      table->cos[size_t(t * half + i)] = float(std::cos(angle));
      table->sin[size_t(t * half + i)] =
          float(inverse ? -std::sin(angle) : std::sin(angle));
    }
  }
  return *table;
}

bool runAttention(const KernelArgs &a, bool sixteenBit, std::string &err) {
  Dims d;
  bool causal;
  float scale;
  if (!attentionDims(err, a, sixteenBit, d, causal, scale) ||
      !checkAttentionOutput(a, err))
    return false;
  if (a.outputs[0].numel() == 0)
    return true;
  if (sixteenBit && bf16ProductsRunAttention(a, 3)) {
    bf16Attention(a, d, causal, scale);
    return true;
  }
  if (!blasReady(err))
    return false;
  const TensorRef &q = a.inputs[0], &k = a.inputs[1], &v = a.inputs[2];
  const std::vector<QueryBlock> blocks = queryBlocks(d, causal);
  const int64_t rows = causal ? std::min(d.Tq, kQueryBlock) : d.Tq;
  // q, o; k, v.
  const int64_t copies = copyFloats(d, a, (d.Tq + d.Tk) * (d.D + d.Dv));
  forEachPair(d, rows * d.Tk + copies, [&](int64_t p, float *S) {
    float *next = S + rows * d.Tk;
    PairInput Q(d, q, p, d.Tq, d.D, next), K(d, k, p, d.Tk, d.D, next),
        V(d, v, p, d.Tk, d.Dv, next);
    PairOutput O(d, a.outputs[0], p, d.Tq, d.Dv, next);
    for (const QueryBlock &b : blocks) {
      const int64_t m = b.i1 - b.i0;
      gemm(false, true, m, b.kv, d.D, scale, Q.rows + b.i0 * d.D, d.D, K.rows,
           d.D, 0.0f, S, b.kv);
      blockSoftmax(d, causal, b, S);
      gemm(false, false, m, d.Dv, b.kv, 1.0f, S, b.kv, V.rows, d.Dv, 0.0f,
           O.rows + b.i0 * d.Dv, d.Dv);
    }
    O.out();
  });
  return true;
}

bool runAttentionGrad(const KernelArgs &a, bool sixteenBit, std::string &err) {
  Dims d;
  bool causal;
  float scale;
  if (!attentionDims(err, a, sixteenBit, d, causal, scale) ||
      !checkAttentionGrad(a, err))
    return false;
  if (d.Tq == 0) { // no queries: no gradient reaches k and v (+0 in every
                   // float format is all zero bits)
    for (size_t o = 1; o < 3; ++o)
      std::memset(a.outputs[o].data, 0,
                  size_t(a.outputs[o].numel()) * dtypeSize(a.outputs[o].dtype));
    return true;
  }
  if (d.B * d.H == 0)
    return true;
  if (sixteenBit && bf16ProductsRunAttention(a, 4)) {
    bf16AttentionGrad(a, d, causal, scale);
    return true;
  }
  if (!blasReady(err))
    return false;
  const TensorRef &q = a.inputs[0], &k = a.inputs[1], &v = a.inputs[2],
                  &g = a.inputs[3];
  const std::vector<QueryBlock> blocks = queryBlocks(d, causal);
  const int64_t block = (causal ? std::min(d.Tq, kQueryBlock) : d.Tq) * d.Tk;
  // q, g, dq; k, v, dk, dv.
  const int64_t copies =
      copyFloats(d, a, d.Tq * (2 * d.D + d.Dv) + d.Tk * (2 * d.D + 2 * d.Dv));
  forEachPair(d, 2 * block + copies, [&](int64_t p, float *scratch) {
    float *P = scratch, *dS = scratch + block, *next = scratch + 2 * block;
    PairInput Qp(d, q, p, d.Tq, d.D, next), Kp(d, k, p, d.Tk, d.D, next),
        Vp(d, v, p, d.Tk, d.Dv, next), Gp(d, g, p, d.Tq, d.Dv, next);
    PairOutput dQp(d, a.outputs[0], p, d.Tq, d.D, next),
        dKp(d, a.outputs[1], p, d.Tk, d.D, next),
        dVp(d, a.outputs[2], p, d.Tk, d.Dv, next);
    const float *Q = Qp.rows, *K = Kp.rows, *V = Vp.rows, *G = Gp.rows;
    float *dQ = dQp.rows, *dK = dKp.rows, *dV = dVp.rows;
    // The last block sees every key, so going backwards its products set
    // all of dK and dV and the others add to their prefixes.
    for (size_t bi = blocks.size(); bi-- > 0;) {
      const QueryBlock &b = blocks[bi];
      const int64_t m = b.i1 - b.i0;
      const float beta = bi + 1 == blocks.size() ? 0.0f : 1.0f;
      const float *Qb = Q + b.i0 * d.D, *Gb = G + b.i0 * d.Dv;
      gemm(false, true, m, b.kv, d.D, scale, Qb, d.D, K, d.D, 0.0f, P, b.kv);
      blockSoftmax(d, causal, b, P);
      gemm(true, false, b.kv, d.Dv, m, 1.0f, P, b.kv, Gb, d.Dv, beta, dV, d.Dv);
      gemm(false, true, m, b.kv, d.Dv, 1.0f, Gb, d.Dv, V, d.Dv, 0.0f, dS, b.kv);
      for (int64_t i = b.i0; i < b.i1; ++i) {
        const float *pr = P + (i - b.i0) * b.kv;
        float *sr = dS + (i - b.i0) * b.kv;
        const int64_t n = d.visibleKeys(causal, i);
        // dP - rowsum(P dP) cancels where P is large: keep it in double.
        const double dot =
            sumOf(n, [&](int64_t j) { return double(pr[j]) * sr[j]; });
        for (int64_t j = 0; j < n; ++j)
          sr[j] = float(double(pr[j]) * (double(sr[j]) - dot) * scale);
        std::fill(sr + n, sr + b.kv, 0.0f);
      }
      gemm(false, false, m, d.D, b.kv, 1.0f, dS, b.kv, K, d.D, 0.0f,
           dQ + b.i0 * d.D, d.D);
      gemm(true, false, b.kv, d.D, m, 1.0f, dS, b.kv, Qb, d.D, beta, dK, d.D);
    }
    dQp.out();
    dKp.out();
    dVp.out();
  });
  return true;
}

} // namespace

bool attentionBody(const KernelArgs &a, std::string &err) {
  return runAttention(a, false, err);
}
bool attentionGradBody(const KernelArgs &a, std::string &err) {
  return runAttentionGrad(a, false, err);
}
bool halfAttentionBody(const KernelArgs &a, std::string &err) {
  return runAttention(a, true, err);
}
bool halfAttentionGradBody(const KernelArgs &a, std::string &err) {
  return runAttentionGrad(a, true, err);
}

bool rotaryBody(const KernelArgs &a, std::string &err) {
  if (!expectAllF32(a, err))
    return false;
  const TensorRef &x = a.inputs[0], &y = a.outputs[0];
  bool inverse = false;
  double theta = 0;
  RotaryDims rd;
  if (!checkRotary(a, rd, inverse, theta, err))
    return false;
  const int64_t T = rd.T, D = rd.D, half = D / 2;
  if (x.numel() == 0)
    return true;
  const int64_t rows = x.numel() / D;
  const RotaryTable &table = rotaryTable(T, D, theta, inverse);
  const float *xp = x.f32();
  float *yp = y.f32();
  parallelFor(rows, std::max<int64_t>(1, 16384 / D),
              [&](int64_t r0, int64_t r1) {
                for (int64_t r = r0; r < r1; ++r) {
                  const float *xr = xp + r * D;
                  float *yr = yp + r * D;
                  const int64_t t = rd.positionOf(r);
                  const float *c = table.cos.data() + t * half;
                  const float *s = table.sin.data() + t * half;
                  // Pair (i, i + D/2) rotates as one complex number.
                  for (int64_t i = 0; i < half; ++i) {
                    float lo = xr[i], hi = xr[i + half];
                    yr[i] = lo * c[i] - hi * s[i];
                    yr[i + half] = hi * c[i] + lo * s[i];
                  }
                }
              });
  return true;
}

} // namespace dsc::rt::cpu
