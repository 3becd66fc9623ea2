//===- Attention.cu - fused attention and its gradient, rotary ------------===//
//
// Attention runs the tiled block programs of AttentionTiles.h (which says
// how they work and how they are tested without a GPU): runTiles is their
// device driver, a barrier after every phase. The forward is one program;
// the gradient is three: the forward's statistics form (each query row's
// log-sum-exp and D_i), dK and dV by key tile, dQ by query tile. When the
// operands are all bf16 or all f16 and the head dims at most 128 they are
// the tensor-core programs (AttentionMmaTiles.h, AttentionMmaGradTiles.h),
// else the f32 ones. Causal:
// query i sees keys j <= i + (Tk - Tq); a row that sees none is zero (CPU
// semantics, cpu/Attention.cpp).
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/AttentionMmaGradTiles.h"
#include "runtime/backends/cuda/AttentionMmaTiles.h"
#include "runtime/backends/cuda/AttentionTiles.h"
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/backends/cuda/DeviceSupport.cuh"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string>
#include <type_traits>

namespace dsc::rt::cuda {
namespace {

/// The tile programs' global memory access: cuda::Storage's load and
/// store. Host-and-device because the programs are; the host never runs
/// them with this policy.
struct DeviceIO {
  __host__ __device__ static float load(const void *p, int s, int64_t i) {
#ifdef __CUDA_ARCH__
    return cuda::load(p, Storage(s), i);
#else
    return 0;
#endif
  }
  __host__ __device__ static void store(void *p, int s, int64_t i, float v) {
#ifdef __CUDA_ARCH__
    cuda::store(p, Storage(s), i, v);
#endif
  }
  /// The bits of a 16-bit operand (the tensor-core program's).
  __host__ __device__ static uint16_t load16(const void *p, int64_t i) {
    return static_cast<const uint16_t *>(p)[i];
  }
};

/// A tile program on the device: a block per tile (grid-striding past 2^20
/// tiles), its shared memory dynamic, a barrier after every phase. Two
/// blocks per SM where shared memory allows (registers capped at 128 per
/// thread; the programs take 40 to 126 KiB a block, so the largest run one
/// per SM): one block's barrier stalls are the other's turn.
///
/// After a body phase of Prog::kWarpBody only the warp meets (where
/// warpSync; else every phase ends in a block barrier, which
/// DSC_CUDA_ATTENTION_SYNC=block asks for, to measure the difference).
template <class Prog>
__global__ void __launch_bounds__(tiles::kThreads, 2)
    runTiles(Prog prog, bool warpSync) {
  constexpr uint32_t warpSynced = tiles::WarpSyncedBody<Prog>::mask;
  extern __shared__ float smem[];
  typename Prog::Thread th;
  const int t = int(threadIdx.x);
  for (int64_t tile = blockIdx.x; tile < prog.tiles(); tile += gridDim.x) {
#pragma unroll
    for (int ph = 0; ph < Prog::kPrologue; ++ph) {
      prog.prologue(ph, tile, t, th, smem);
      __syncthreads();
    }
    const int64_t steps = prog.steps(tile);
    for (int64_t step = 0; step < steps; ++step) {
#pragma unroll
      for (int ph = 0; ph < Prog::kBody; ++ph) {
        prog.body(ph, tile, step, t, th, smem);
        if (warpSync && (warpSynced >> ph & 1))
          __syncwarp();
        else
          __syncthreads();
      }
    }
#pragma unroll
    for (int ph = 0; ph < Prog::kEpilogue; ++ph) {
      prog.epilogue(ph, tile, t, th, smem);
      __syncthreads();
    }
  }
}

/// DSC_CUDA_ATTENTION_SYNC: "warp" (unset: the default) or "block" (every
/// phase of the attention programs ends in a block barrier).
bool warpSyncedPhases(bool &warpSync, std::string &err) {
  static const char *const value = std::getenv("DSC_CUDA_ATTENTION_SYNC");
  const std::string v = value ? value : "warp";
  if (v != "warp" && v != "block")
    return fail(err, "DSC_CUDA_ATTENTION_SYNC must be warp or block, got '", v,
                "'");
  warpSync = v == "warp";
  return true;
}

template <class Prog>
bool launchTiles(const Prog &prog, cudaStream_t s, std::string &err) {
  const int64_t n = prog.tiles();
  bool warpSync = true;
  if (n == 0)
    return true;
  if (!warpSyncedPhases(warpSync, err))
    return false;
  constexpr int bytes = int(sizeof(float)) * Prog::kSmemFloats;
  // Past 48 KiB a kernel must ask for its shared memory, once per device
  // (at a program's first run, which is not captured into a graph).
  static std::atomic<uint64_t> optedIn{0}; // a bit per device ordinal
  int device = 0;
  cudaGetDevice(&device);
  const uint64_t bit = uint64_t(1) << (device & 63);
  if (!(optedIn.load() & bit)) {
    const cudaError_t opted = cudaFuncSetAttribute(
        runTiles<Prog>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (opted != cudaSuccess)
      return fail(err, "cannot give the attention kernel ", bytes,
                  " bytes of shared memory: ", cudaGetErrorString(opted));
    optedIn.fetch_or(bit);
  }
  const int64_t grid = n < (int64_t(1) << 20) ? n : (int64_t(1) << 20);
  runTiles<Prog><<<unsigned(grid), tiles::kThreads, bytes, s>>>(prog, warpSync);
  return launched(err);
}

bool prepare(const KernelArgs &args, tiles::Problem &a, int &width,
             std::string &err) {
  AttentionDims d;
  bool causal;
  double scale;
  if (!expectFloatStorage(args, err) ||
      !checkAttention(args, d, causal, scale, err))
    return false;
  const int64_t dim = d.D > d.Dv ? d.D : d.Dv;
  width = tiles::tileWidth(dim);
  if (width == 0)
    return fail(err, "head dims up to 256 on the CUDA backend, got ", dim);
  const TensorRef *in = args.inputs;
  a.q = in[0].data;
  a.k = in[1].data;
  a.v = in[2].data;
  a.g = args.numInputs > 3 ? in[3].data : nullptr;
  a.sq = storage(in[0]);
  a.sk = storage(in[1]);
  a.sv = storage(in[2]);
  a.sg = args.numInputs > 3 ? storage(in[3]) : kF32;
  a.pairs = d.B * d.H;
  a.heads = d.H;
  a.seqMajor = d.seqMajor;
  a.Tq = d.Tq;
  a.Tk = d.Tk;
  a.D = d.D;
  a.Dv = d.Dv;
  a.causal = causal;
  a.scale = float(scale);
  return true;
}

/// Calls run.template operator()<Cfg>() with the tile sizes for `width`.
template <class Run> bool byWidth(int width, Run &&run) {
  switch (width) {
  case 64:
    return run(tiles::Tiles64{});
  case 128:
    return run(tiles::Tiles128{});
  default:
    return run(tiles::Tiles256{});
  }
}

/// Calls run(cfg, bf16) with the tensor-core tile sizes for `width` (64 or
/// 128) and std::true_type for bf16 operands, std::false_type for f16.
template <class Run> bool byMmaConfig(int width, int storage, Run &&run) {
  using BF16 = std::true_type;
  using F16 = std::false_type;
  if (width == 64)
    return storage == kBF16 ? run(tiles::MmaTiles64{}, BF16{})
                            : run(tiles::MmaTiles64{}, F16{});
  return storage == kBF16 ? run(tiles::MmaTiles128{}, BF16{})
                          : run(tiles::MmaTiles128{}, F16{});
}

__global__ void rotaryKernel(const void *x, Storage sx, void *y, Storage sy,
                             RotaryDims d, double theta, bool inverse,
                             int64_t pairs) {
  const int64_t D = d.D, half = D / 2;
  DSC_GRID_STRIDE(e, pairs) { // e over (row, i < half)
    const int64_t r = e / half, i = e % half, t = (r / d.heads) % d.T;
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
  tiles::Problem a;
  int width;
  if (!prepare(args, a, width, err) || !checkAttentionOutput(args, err))
    return false;
  const TensorRef &out = args.outputs[0];
  if (out.numel() == 0)
    return true;
  // q, k and v all bf16 or all f16: the products on tensor cores.
  const int mmaWidth = tiles::mmaTileWidth(a.D > a.Dv ? a.D : a.Dv);
  if (a.sq != kF32 && a.sk == a.sq && a.sv == a.sq && mmaWidth != 0) {
    auto run = [&](auto cfg, auto bf16) {
      tiles::ForwardMmaTiles<decltype(cfg), DeviceIO, decltype(bf16)::value>
          prog;
      prog.a = a;
      prog.out = out.data;
      prog.so = storage(out);
      return launchTiles(prog, streamOf(args), err);
    };
    return byMmaConfig(mmaWidth, a.sq, run);
  }
  return byWidth(width, [&](auto cfg) {
    tiles::ForwardTiles<decltype(cfg), DeviceIO, false> prog;
    prog.a = a;
    prog.out = out.data;
    prog.so = storage(out);
    return launchTiles(prog, streamOf(args), err);
  });
}

bool attentionGradBody(const KernelArgs &args, std::string &err) {
  tiles::Problem a;
  int width;
  if (!prepare(args, a, width, err) || !checkAttentionGrad(args, err))
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
  // Each query row's log-sum-exp and D_i, in the stream's scratch.
  const int64_t rows = a.pairs * a.Tq;
  const size_t statBytes = (size_t(rows) * sizeof(float) + 255) / 256 * 256;
  void *scratch = nullptr;
  if (!scratchOf(args, 2 * statBytes, scratch, err))
    return false;
  auto *lse = static_cast<float *>(scratch);
  auto *dsum =
      reinterpret_cast<float *>(static_cast<char *>(scratch) + statBytes);
  // The three programs, bound to this call's operands and statistics.
  auto launchGrad = [&](auto stats, auto kv, auto q) {
    stats.a = kv.a = q.a = a;
    stats.lse = lse; // written by the statistics, read by the other two
    stats.dsum = dsum;
    kv.lse = q.lse = lse;
    kv.dsum = q.dsum = dsum;
    kv.dk = out[1].data;
    kv.sdk = storage(out[1]);
    kv.dv = out[2].data;
    kv.sdv = storage(out[2]);
    q.dq = out[0].data;
    q.sdq = storage(out[0]);
    return launchTiles(stats, s, err) && launchTiles(kv, s, err) &&
           launchTiles(q, s, err);
  };
  // q, k, v and g all bf16 or all f16: every product on tensor cores.
  const int mmaWidth = tiles::mmaTileWidth(a.D > a.Dv ? a.D : a.Dv);
  if (a.sq != kF32 && a.sk == a.sq && a.sv == a.sq && a.sg == a.sq &&
      mmaWidth != 0)
    return byMmaConfig(mmaWidth, a.sq, [&](auto cfg, auto bf16) {
      using Cfg = decltype(cfg);
      constexpr bool kBF16 = decltype(bf16)::value;
      return launchGrad(tiles::ForwardMmaTiles<Cfg, DeviceIO, kBF16, true>{},
                        tiles::GradKVMmaTiles<Cfg::DM, DeviceIO, kBF16>{},
                        tiles::GradQMmaTiles<Cfg, DeviceIO, kBF16>{});
    });
  return byWidth(width, [&](auto cfg) {
    using Cfg = decltype(cfg);
    return launchGrad(tiles::ForwardTiles<Cfg, DeviceIO, true>{},
                      tiles::GradKVTiles<Cfg, DeviceIO>{},
                      tiles::GradQTiles<Cfg, DeviceIO>{});
  });
}

bool rotaryBody(const KernelArgs &a, std::string &err) {
  bool inverse = false;
  double theta = 0;
  RotaryDims d;
  if (!expectFloatStorage(a, err) || !checkRotary(a, d, inverse, theta, err))
    return false;
  const TensorRef &x = a.inputs[0], &y = a.outputs[0];
  const int64_t n = x.numel();
  if (n == 0)
    return true;
  rotaryKernel<<<gridFor(n / 2), kBlock, 0, streamOf(a)>>>(
      x.data, storage(x), y.data, storage(y), d, theta, inverse, n / 2);
  return launched(err);
}

} // namespace dsc::rt::cuda
