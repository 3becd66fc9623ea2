//===- Attention.cu - fused attention and its gradient, rotary
//-------------===//
//
// Attention without the T x T matrix: a warp per query row walks the keys
// its row sees with an online softmax (running max and sum, the output
// accumulator rescaled as the max grows), each lane holding its slice of
// the head dim in registers; dot products reduce across the warp. The
// gradient recomputes instead of storing: a first pass per query row gets
// the row's log-sum-exp and D_i = sum_j P_ij dP_ij, then dQ comes from a
// warp per query row and dK, dV from a warp per key row, each summing in a
// fixed order: no atomics, the same bits every run. Causal: query i sees
// keys j <= i + (Tk - Tq); a row that sees none is zero (CPU semantics,
// cpu/Attention.cpp).
//
// This is the simple, exact form, not yet the tensor-core kernel the
// benchmark needs (docs/cuda.md): K and V rows come through L1/L2 for
// every query row.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/DeviceSupport.cuh"

#include <cmath>

namespace dsc::rt::cuda {
namespace {

constexpr int kWarps = 8; // warps (rows) per block
constexpr int kMaxHeadDim = 256;

struct Attn {
  const void *q, *k, *v, *g;
  Storage sq, sk, sv, sg;
  int64_t pairs, Tq, Tk, D, Dv;
  bool causal;
  float scale;
};

__device__ __forceinline__ int64_t visible(const Attn &a, int64_t i) {
  if (!a.causal)
    return a.Tk;
  int64_t n = i + (a.Tk - a.Tq) + 1;
  return n < 0 ? 0 : n > a.Tk ? a.Tk : n;
}

__device__ __forceinline__ float warpSum(float v) {
  for (int off = 16; off > 0; off /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Lane l holds elements l, l + 32, ... of a row (N per lane, N * 32 >= dim).
template <int N>
__device__ void loadRow(const void *p, Storage s, int64_t base, int64_t dim,
                        float (&r)[N]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int t = 0; t < N; ++t) {
    int64_t e = lane + 32 * t;
    r[t] = e < dim ? load(p, s, base + e) : 0.0f;
  }
}

template <int N>
__device__ float dotRow(const float (&r)[N], const void *p, Storage s,
                        int64_t base, int64_t dim) {
  const int lane = threadIdx.x % 32;
  float acc = 0;
#pragma unroll
  for (int t = 0; t < N; ++t) {
    int64_t e = lane + 32 * t;
    if (e < dim)
      acc += r[t] * load(p, s, base + e);
  }
  return warpSum(acc);
}

// Global warp index over (pair, row) for `rows` rows per pair.
#define DSC_FOR_WARP_ROWS(pair, row, rows, pairs)                              \
  for (int64_t w_ = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;           \
       w_ < (pairs) * (rows); w_ += int64_t(gridDim.x) * kWarps)               \
    if (int64_t pair = w_ / (rows), row = w_ % (rows); true)

template <int N>
__global__ void attentionForward(Attn a, void *out, Storage so) {
  const int lane = threadIdx.x % 32;
  DSC_FOR_WARP_ROWS(p, i, a.Tq, a.pairs) {
    float q[N], acc[N];
    loadRow(a.q, a.sq, (p * a.Tq + i) * a.D, a.D, q);
#pragma unroll
    for (int t = 0; t < N; ++t)
      acc[t] = 0;
    float m = -INFINITY;
    double l = 0;
    const int64_t n = visible(a, i);
    for (int64_t j = 0; j < n; ++j) {
      const float s = a.scale * dotRow(q, a.k, a.sk, (p * a.Tk + j) * a.D, a.D);
      const float mNew = s > m ? s : m;
      const float correction = expf(m - mNew); // 0 for the first key
      const float e = expf(s - mNew);
      l = l * correction + e;
      m = mNew;
      const int64_t vb = (p * a.Tk + j) * a.Dv;
#pragma unroll
      for (int t = 0; t < N; ++t) {
        int64_t c = lane + 32 * t;
        float vv = c < a.Dv ? load(a.v, a.sv, vb + c) : 0.0f;
        acc[t] = acc[t] * correction + e * vv;
      }
    }
    const float inv = n > 0 ? float(1.0 / l) : 0.0f;
#pragma unroll
    for (int t = 0; t < N; ++t) {
      int64_t c = lane + 32 * t;
      if (c < a.Dv)
        store(out, so, (p * a.Tq + i) * a.Dv + c, acc[t] * inv);
    }
  }
}

// Per query row: lse = max + log(sum) and D = sum_j P_ij (g_i . v_j).
template <int N>
__global__ void attentionRowStats(Attn a, float *lse, double *dsum) {
  DSC_FOR_WARP_ROWS(p, i, a.Tq, a.pairs) {
    float q[N], g[N];
    loadRow(a.q, a.sq, (p * a.Tq + i) * a.D, a.D, q);
    loadRow(a.g, a.sg, (p * a.Tq + i) * a.Dv, a.Dv, g);
    const int64_t n = visible(a, i);
    float m = -INFINITY;
    double l = 0;
    for (int64_t j = 0; j < n; ++j) {
      const float s = a.scale * dotRow(q, a.k, a.sk, (p * a.Tk + j) * a.D, a.D);
      const float mNew = s > m ? s : m;
      l = l * expf(m - mNew) + expf(s - mNew);
      m = mNew;
    }
    const float rowLse = n > 0 ? m + float(log(l)) : INFINITY;
    double d = 0;
    for (int64_t j = 0; j < n; ++j) {
      const float s = a.scale * dotRow(q, a.k, a.sk, (p * a.Tk + j) * a.D, a.D);
      const float dp = dotRow(g, a.v, a.sv, (p * a.Tk + j) * a.Dv, a.Dv);
      d += double(expf(s - rowLse)) * dp;
    }
    if (threadIdx.x % 32 == 0) {
      lse[p * a.Tq + i] = rowLse;
      dsum[p * a.Tq + i] = d;
    }
  }
}

// dQ_i = scale sum_j P_ij (dP_ij - D_i) k_j.
template <int N>
__global__ void attentionGradQ(Attn a, const float *lse, const double *dsum,
                               void *dq, Storage sdq) {
  const int lane = threadIdx.x % 32;
  DSC_FOR_WARP_ROWS(p, i, a.Tq, a.pairs) {
    float q[N], g[N], acc[N];
    loadRow(a.q, a.sq, (p * a.Tq + i) * a.D, a.D, q);
    loadRow(a.g, a.sg, (p * a.Tq + i) * a.Dv, a.Dv, g);
#pragma unroll
    for (int t = 0; t < N; ++t)
      acc[t] = 0;
    const float rowLse = lse[p * a.Tq + i];
    const double d = dsum[p * a.Tq + i];
    const int64_t n = visible(a, i);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t kb = (p * a.Tk + j) * a.D;
      const float s = a.scale * dotRow(q, a.k, a.sk, kb, a.D);
      const float dp = dotRow(g, a.v, a.sv, (p * a.Tk + j) * a.Dv, a.Dv);
      const float ds =
          float(double(expf(s - rowLse)) * (double(dp) - d) * double(a.scale));
#pragma unroll
      for (int t = 0; t < N; ++t) {
        int64_t c = lane + 32 * t;
        if (c < a.D)
          acc[t] += ds * load(a.k, a.sk, kb + c);
      }
    }
#pragma unroll
    for (int t = 0; t < N; ++t) {
      int64_t c = lane + 32 * t;
      if (c < a.D)
        store(dq, sdq, (p * a.Tq + i) * a.D + c, acc[t]);
    }
  }
}

// Per key row j: dV_j = sum_i P_ij g_i, dK_j = scale sum_i P_ij (dP_ij -
// D_i) q_i, over the queries that see j.
template <int N>
__global__ void attentionGradKV(Attn a, const float *lse, const double *dsum,
                                void *dk, Storage sdk, void *dv, Storage sdv) {
  const int lane = threadIdx.x % 32;
  DSC_FOR_WARP_ROWS(p, j, a.Tk, a.pairs) {
    float kr[N], vr[N], accK[N], accV[N];
    loadRow(a.k, a.sk, (p * a.Tk + j) * a.D, a.D, kr);
    loadRow(a.v, a.sv, (p * a.Tk + j) * a.Dv, a.Dv, vr);
#pragma unroll
    for (int t = 0; t < N; ++t)
      accK[t] = accV[t] = 0;
    // Query i sees j when j < visible(i): i >= j - (Tk - Tq).
    int64_t first = a.causal ? j - (a.Tk - a.Tq) : 0;
    if (first < 0)
      first = 0;
    for (int64_t i = first; i < a.Tq; ++i) {
      const int64_t qb = (p * a.Tq + i) * a.D, gb = (p * a.Tq + i) * a.Dv;
      const float s = a.scale * dotRow(kr, a.q, a.sq, qb, a.D);
      const float dp = dotRow(vr, a.g, a.sg, gb, a.Dv);
      const float pij = expf(s - lse[p * a.Tq + i]);
      const float ds = float(double(pij) * (double(dp) - dsum[p * a.Tq + i]) *
                             double(a.scale));
#pragma unroll
      for (int t = 0; t < N; ++t) {
        int64_t c = lane + 32 * t;
        if (c < a.D)
          accK[t] += ds * load(a.q, a.sq, qb + c);
        if (c < a.Dv)
          accV[t] += pij * load(a.g, a.sg, gb + c);
      }
    }
#pragma unroll
    for (int t = 0; t < N; ++t) {
      int64_t c = lane + 32 * t;
      if (c < a.D)
        store(dk, sdk, (p * a.Tk + j) * a.D + c, accK[t]);
      if (c < a.Dv)
        store(dv, sdv, (p * a.Tk + j) * a.Dv + c, accV[t]);
    }
  }
}

unsigned warpGrid(int64_t warps) {
  int64_t blocks = (warps + kWarps - 1) / kWarps;
  return unsigned(blocks < 1 ? 1 : blocks > (1 << 20) ? (1 << 20) : blocks);
}

bool prepare(const KernelArgs &args, Attn &a, int &perLane, std::string &err) {
  AttentionDims d;
  bool causal;
  double scale;
  if (!expectFloatStorage(args, err) ||
      !checkAttention(args, d, causal, scale, err))
    return false;
  const int64_t dim = d.D > d.Dv ? d.D : d.Dv;
  if (dim > kMaxHeadDim)
    return fail(err, "head dims up to ", kMaxHeadDim,
                " on the CUDA backend, got ", dim);
  perLane = dim <= 32 ? 1 : dim <= 64 ? 2 : dim <= 128 ? 4 : 8;
  const TensorRef *in = args.inputs;
  a = Attn{in[0].data,     in[1].data,
           in[2].data,     args.numInputs > 3 ? in[3].data : nullptr,
           storage(in[0]), storage(in[1]),
           storage(in[2]), args.numInputs > 3 ? storage(in[3]) : kF32,
           d.B * d.H,      d.Tq,
           d.Tk,           d.D,
           d.Dv,           causal,
           float(scale)};
  return true;
}

#define DSC_BY_WIDTH(n, launch)                                                \
  switch (n) {                                                                 \
  case 1:                                                                      \
    launch(1);                                                                 \
    break;                                                                     \
  case 2:                                                                      \
    launch(2);                                                                 \
    break;                                                                     \
  case 4:                                                                      \
    launch(4);                                                                 \
    break;                                                                     \
  default:                                                                     \
    launch(8);                                                                 \
  }

__global__ void rotaryKernel(const void *x, Storage sx, void *y, Storage sy,
                             int64_t T, int64_t D, double theta, bool inverse,
                             int64_t pairs) {
  const int64_t half = D / 2;
  DSC_GRID_STRIDE(e, pairs) { // e over (row, i < half)
    const int64_t r = e / half, i = e % half, t = r % T;
    // cos and sin of t * theta^(-2i/D) in double, rounded to float, as the
    // CPU backend's table.
    const double angle = double(t) * pow(theta, -2.0 * double(i) / double(D));
    const float c = float(cos(angle));
    const float s = float(inverse ? -sin(angle) : sin(angle));
    const float lo = load(x, sx, r * D + i), hi = load(x, sx, r * D + i + half);
    store(y, sy, r * D + i, lo * c - hi * s);
    store(y, sy, r * D + i + half, hi * c + lo * s);
  }
}

} // namespace

bool attentionBody(const KernelArgs &args, std::string &err) {
  Attn a;
  int perLane;
  if (!prepare(args, a, perLane, err))
    return false;
  const TensorRef &out = args.outputs[0];
  if (!checkAttentionOutput(args, err))
    return false;
  if (out.numel() == 0)
    return true;
  cudaStream_t s = streamOf(args);
  const unsigned grid = warpGrid(a.pairs * a.Tq);
#define LAUNCH(N)                                                              \
  attentionForward<N><<<grid, 32 * kWarps, 0, s>>>(a, out.data, storage(out))
  DSC_BY_WIDTH(perLane, LAUNCH)
#undef LAUNCH
  return launched(err);
}

bool attentionGradBody(const KernelArgs &args, std::string &err) {
  Attn a;
  int perLane;
  if (!prepare(args, a, perLane, err) || !checkAttentionGrad(args, err))
    return false;
  const TensorRef *out = args.outputs;
  cudaStream_t s = streamOf(args);
  if (a.Tq == 0 || a.pairs == 0) { // no queries: no gradient reaches k, v
    for (int o = 1; o < 3; ++o)
      if (!zeroOnStream(out[o].data,
                        size_t(out[o].numel()) * dtypeSize(out[o].dtype), s,
                        err))
        return false;
    return launched(err);
  }
  const int64_t rows = a.pairs * a.Tq;
  const size_t lseBytes = (size_t(rows) * sizeof(float) + 255) / 256 * 256;
  void *scratch = nullptr;
  if (!scratchOf(args, lseBytes + size_t(rows) * sizeof(double), scratch, err))
    return false;
  auto *lse = static_cast<float *>(scratch);
  auto *dsum =
      reinterpret_cast<double *>(static_cast<char *>(scratch) + lseBytes);
#define LAUNCH(N)                                                              \
  attentionRowStats<N><<<warpGrid(rows), 32 * kWarps, 0, s>>>(a, lse, dsum);   \
  attentionGradQ<N><<<warpGrid(rows), 32 * kWarps, 0, s>>>(                    \
      a, lse, dsum, out[0].data, storage(out[0]));                             \
  attentionGradKV<N><<<warpGrid(a.pairs *a.Tk), 32 * kWarps, 0, s>>>(          \
      a, lse, dsum, out[1].data, storage(out[1]), out[2].data,                 \
      storage(out[2]))
  DSC_BY_WIDTH(perLane, LAUNCH)
#undef LAUNCH
  return launched(err);
}

bool rotaryBody(const KernelArgs &a, std::string &err) {
  bool inverse = false;
  double theta = 0;
  if (!expectFloatStorage(a, err) || !checkRotary(a, inverse, theta, err))
    return false;
  const TensorRef &x = a.inputs[0], &y = a.outputs[0];
  const int64_t n = x.numel();
  if (n == 0)
    return true;
  const int64_t T = x.dim(-2), D = x.dim(-1);
  rotaryKernel<<<gridFor(n / 2), kBlock, 0, streamOf(a)>>>(
      x.data, storage(x), y.data, storage(y), T, D, theta, inverse, n / 2);
  return launched(err);
}

} // namespace dsc::rt::cuda
