//===- cpu_kernels.cpp - time the CPU kernels at GPT-2 training shapes ----===//
//
//   build/bench/dsc-bench-kernels [REPS]
//
// Best-of-REPS (default 20) wall time of the kernels that dominate a small
// GPT-2 step (bench/gpt2_cpu.sh's model: B=8, T=128, C=256, 4 heads of 64),
// called directly through the CPU kernel table on uniform random inputs,
// one line per kernel with its GFLOP/s where that means something. For
// comparing kernel changes on one machine in one run; bench/RESULTS.md
// says why single numbers on shared machines need care. BENCH_COLD=1 sweeps
// 64 MiB before each call, so the operands come from memory as a training
// step's mostly do; BENCH_ONLY=ds.NAME times that kernel only (its lines
// print 0 for the rest), for `perf record`. On a CPU with AMX or
// AVX512-BF16 the last lines time bf16 attention's small GEMMs alone (tiles,
// dot products), on one thread, at the products' shapes of a T 512 head
// (BENCH_ONLY=products for those only).
//
//===----------------------------------------------------------------------===//
#include "bench/BenchTensor.h"
#include "runtime/backends/cpu/AmxTiles.h"
#include "runtime/backends/cpu/Bf16DotProducts.h"
#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/backends/cpu/CpuKernels.h"
#include "runtime/kernels/FusedProgram.h"
#include "runtime/kernels/KernelSignature.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace dsc::rt;

namespace {

using dsc::bench::Tensor;

Tensor uniform(std::mt19937_64 &rng, std::vector<int64_t> shape) {
  Tensor t{std::move(shape), {}};
  int64_t n = 1;
  for (int64_t d : t.shape)
    n *= d;
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  t.data.resize(size_t(n));
  for (float &x : t.data)
    x = dist(rng);
  return t;
}

/// Best wall time in ms of `reps` calls of kernel `name`; exits on failure.
double bestMs(int reps, const char *name, std::vector<Tensor *> ins,
              std::vector<Tensor *> outs, std::vector<int64_t> ints = {},
              std::vector<double> floats = {}) {
  std::vector<TensorRef> in, out;
  std::vector<DType> inTypes, outTypes;
  for (Tensor *t : ins) {
    in.push_back(t->ref());
    inTypes.push_back(in.back().dtype);
  }
  for (Tensor *t : outs) {
    out.push_back(t->ref());
    outTypes.push_back(out.back().dtype);
  }
  // The variant the operands' dtypes select, as a Session picks it.
  const KernelInfo *k = nullptr;
  for (const KernelInfo &v : cpuKernelVariants(name))
    if (!k && signatureMatches(v.dtypes, {inTypes.data(), inTypes.size()},
                               {outTypes.data(), outTypes.size()}))
      k = &v;
  if (!k) {
    std::fprintf(stderr, "dsc-bench-kernels: no kernel %s\n", name);
    std::exit(1);
  }
  KernelContext ctx;
  KernelArgs args = makeKernelArgs(in, out, ints, floats, &ctx);
  double best = 1e30;
  if (const char *only = std::getenv("BENCH_ONLY");
      only && std::string(only) != name)
    return 0;
  static std::vector<char> flush(64 << 20);
  const bool cold = std::getenv("BENCH_COLD") != nullptr;
  for (int r = 0; r < reps; ++r) {
    if (cold)
      for (size_t i = 0; i < flush.size(); i += 64)
        flush[i]++;
    auto t0 = std::chrono::steady_clock::now();
    std::string error;
    if (!k->fn(args, error)) {
      std::fprintf(stderr, "dsc-bench-kernels: %s\n", error.c_str());
      std::exit(1);
    }
    best = std::min(best, std::chrono::duration<double, std::milli>(
                              std::chrono::steady_clock::now() - t0)
                              .count());
  }
  return best;
}

/// The gradient norm's square and whole sum, and a bias gradient's add and
/// column sums: the two unfused kernels against one fused group each.
void benchFusedSums(int reps, std::mt19937_64 &rng, Tensor &ra, Tensor &rb,
                    Tensor &rc) {
  const int64_t C = 256;
  // The gradient norm's square and sum of a [768, 256] gradient: ds.mul
  // then ds.reduce_sum, and the two as one fused group (its program: Mul,
  // then ReduceSum of it, as phase fused writes it). Warm, as every line
  // here: the group saves the squares' write and read, which in a step
  // leave the caches.
  using Op = dsc::rt::fused::Opcode;
  Tensor gw = uniform(rng, {3 * C, C}), gsq = gw, gsum = uniform(rng, {});
  const double mulMs = bestMs(reps, "ds.mul", {&gw, &gw}, {&gsq});
  std::printf("mul + reduce_sum [768,256] -> []    %8.3f ms\n",
              mulMs + bestMs(reps, "ds.reduce_sum", {&gsq}, {&gsum}, {0, 1}));
  std::printf("fused square-sum [768,256] -> []    %8.3f ms\n",
              bestMs(reps, "ds.fused_elementwise", {&gw}, {&gsum},
                     {2, int64_t(Op::Mul), 0, 0, 0, int64_t(Op::ReduceSum), 1,
                      -1, 0, 2}));
  // A bias gradient: the sum of two gradients and its column sums (which
  // phase fused leaves unfused: this is why).
  Tensor bsum = uniform(rng, {C});
  const double addMs = bestMs(reps, "ds.add", {&ra, &rb}, {&rc});
  std::printf("add + reduce_sum [8,128,256] -> [256] %6.3f ms\n",
              addMs + bestMs(reps, "ds.reduce_sum", {&rc}, {&bsum}, {0, 1}));
  std::printf("fused add + column sums             %8.3f ms\n",
              bestMs(reps, "ds.fused_elementwise", {&ra, &rb}, {&rc, &bsum},
                     {2, int64_t(Op::Add), 0, 1, 0, int64_t(Op::ReduceSum), 2,
                      -1, 0, 2, 3}));
}

/// The small bf16 GEMMs of 16-bit attention (AmxTiles.h's tiles,
/// Bf16DotProducts.h's AVX512-BF16 dot products: each this CPU has) at
/// attention's shapes (M x N x K: a 64-row block's scores against 512 keys,
/// its P V, and a larger product for scale), one thread, best of `reps`, in
/// GFLOP/s. BENCH_ONLY=products runs these alone.
void benchBf16Products(int reps) {
  const char *only = std::getenv("BENCH_ONLY");
  if (only && std::string(only) != "products")
    return;
  struct Engine {
    const char *name;
    bool usable;
    dsc::rt::cpu::Bf16Product multiply;
  };
  struct Shape {
    int64_t M, N, K;
  };
  for (Engine e :
       {Engine{"amx tiles", dsc::rt::cpu::amxUsable(), dsc::rt::cpu::amxGemm},
        Engine{"dot bf16 ", dsc::rt::cpu::dotProductsUsable(),
               dsc::rt::cpu::dotGemm}}) {
    if (!e.usable)
      continue;
    for (Shape s : {Shape{64, 512, 64}, Shape{64, 64, 512}, Shape{512, 64, 64},
                    Shape{1024, 1024, 256}}) {
      std::vector<uint16_t> A(size_t(s.M * s.K), 0x3F80), // 1.0
          B(size_t(s.K * s.N), 0x3F00);                   // 0.5
      std::vector<float> C(size_t(s.M * s.N));
      double best = 1e30;
      for (int r = 0; r < reps; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        e.multiply(s.M, s.N, s.K, A.data(), s.K, B.data(), s.N, C.data(), s.N,
                   false);
        best = std::min(best, std::chrono::duration<double, std::milli>(
                                  std::chrono::steady_clock::now() - t0)
                                  .count());
      }
      std::printf("%s %4lld x %4lld x %4lld, 1 thread %6.3f ms %7.1f "
                  "GFLOP/s\n",
                  e.name, (long long)s.M, (long long)s.N, (long long)s.K, best,
                  2.0 * double(s.M * s.N * s.K) / best / 1e6);
    }
  }
}

} // namespace

int main(int argc, char **argv) {
  int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  std::mt19937_64 rng(1);
  const int64_t B = 8, T = 128, C = 256, H = 4, D = 64;

  Tensor x = uniform(rng, {B, T, C}), w = uniform(rng, {3 * C, C}),
         y = uniform(rng, {B, T, 3 * C});
  double mm = bestMs(reps, "ds.matmul", {&x, &w}, {&y}, {0, 1});
  std::printf("matmul [%ld, %ld] x [%ld, %ld]^T  %8.3f ms  %6.1f GFLOP/s\n",
              long(B * T), long(C), long(3 * C), long(C), mm,
              2.0 * B * T * C * 3 * C / mm / 1e6);
  std::printf("  (f32 GEMMs: %s; bf16 GEMMs: %s)\n",
              dsc::rt::cpu::blasLibrary().c_str(),
              dsc::rt::cpu::nativeBf16Gemm()
                  ? dsc::rt::cpu::bf16GemmLibrary().c_str()
                  : "widened to f32");

  Tensor q = uniform(rng, {B, H, T, D}), k = uniform(rng, {B, H, T, D}),
         v = uniform(rng, {B, H, T, D}), g = uniform(rng, {B, H, T, D});
  Tensor o = q, dq = q, dk = q, dv = q;
  double flops = 4.0 * B * H * T * T * D / 2; // causal: half the scores
  double fwd =
      bestMs(reps, "ds.attention", {&q, &k, &v}, {&o}, {1, 0}, {0.125});
  double bwd = bestMs(reps, "ds.attention_grad", {&q, &k, &v, &g},
                      {&dq, &dk, &dv}, {1, 0}, {0.125});
  std::printf("attention B=8 H=4 T=128 D=64 causal  %8.3f ms  %6.1f GFLOP/s\n",
              fwd, flops / fwd / 1e6);
  std::printf("attention_grad                      %8.3f ms  %6.1f GFLOP/s\n",
              bwd, 2.5 * flops / bwd / 1e6);
  // The same on seq_major operands [B, T, H, D] (ds-fold-attention-layout).
  Tensor qs = uniform(rng, {B, T, H, D}), ks = uniform(rng, {B, T, H, D}),
         vs = uniform(rng, {B, T, H, D}), gs = uniform(rng, {B, T, H, D});
  Tensor os = qs, dqs = qs, dks = qs, dvs = qs;
  std::printf(
      "attention seq_major                 %8.3f ms\n",
      bestMs(reps, "ds.attention", {&qs, &ks, &vs}, {&os}, {1, 1}, {0.125}));
  std::printf("attention_grad seq_major            %8.3f ms\n",
              bestMs(reps, "ds.attention_grad", {&qs, &ks, &vs, &gs},
                     {&dqs, &dks, &dvs}, {1, 1}, {0.125}));

  Tensor bias = uniform(rng, {3 * C});
  double mmBias = bestMs(reps, "ds.matmul_bias", {&x, &w, &bias}, {&y}, {0, 1});
  std::printf("matmul_bias, the same product       %8.3f ms  %6.1f GFLOP/s\n",
              mmBias, 2.0 * B * T * C * 3 * C / mmBias / 1e6);

  Tensor h = uniform(rng, {B, T, 4 * C}), hg = h, hd = h;
  std::printf("gelu [8,128,1024]                   %8.3f ms\n",
              bestMs(reps, "ds.gelu", {&h}, {&hg}, {0}));
  std::printf("gelu tanh [8,128,1024]              %8.3f ms\n",
              bestMs(reps, "ds.gelu", {&h}, {&hg}, {1}));
  std::printf("gelu_grad tanh [8,128,1024]         %8.3f ms\n",
              bestMs(reps, "ds.gelu_grad", {&h, &hg}, {&hd}, {1}));
  // Bias gradients: [B, T, C] summed over B and T.
  Tensor colSum = uniform(rng, {C}), colSum3 = uniform(rng, {3 * C});
  std::printf("reduce_sum [8,128,256] -> [256]     %8.3f ms\n",
              bestMs(reps, "ds.reduce_sum", {&x}, {&colSum}, {0, 1}));
  std::printf("reduce_sum [8,128,768] -> [768]     %8.3f ms\n",
              bestMs(reps, "ds.reduce_sum", {&y}, {&colSum3}, {0, 1}));
  Tensor lw = uniform(rng, {C}), lb = uniform(rng, {C}), ly = x;
  std::printf("layer_norm [8,128,256]              %8.3f ms\n",
              bestMs(reps, "ds.layer_norm", {&x, &lw, &lb}, {&ly}, {}, {1e-5}));
  Tensor lgx = x, lgw = lw, lgb = lb;
  std::printf("layer_norm_grad                     %8.3f ms\n",
              bestMs(reps, "ds.layer_norm_grad", {&x, &lw, &x},
                     {&lgx, &lgw, &lgb}, {}, {1e-5}));
  Tensor ra = uniform(rng, {B, T, C}), rb = uniform(rng, {B, T, C}), rc = ra;
  std::printf("add [8,128,256]                     %8.3f ms\n",
              bestMs(reps, "ds.add", {&ra, &rb}, {&rc}));
  benchFusedSums(reps, rng, ra, rb, rc);

  // The same kernels on bf16 operands (the 16-bit variants a bf16 plan
  // runs: native products where oneDNN runs on AMX, the rest widened).
  std::printf("-- bf16\n");
  Tensor x16 = asBf16(x), w16 = asBf16(w), y16 = asBf16(y);
  double mm16 = bestMs(reps, "ds.matmul", {&x16, &w16}, {&y16}, {0, 1});
  std::printf("matmul, the same product            %8.3f ms  %6.1f GFLOP/s\n",
              mm16, 2.0 * B * T * C * 3 * C / mm16 / 1e6);
  Tensor q16 = asBf16(q), k16 = asBf16(k), v16 = asBf16(v), g16 = asBf16(g);
  Tensor o16 = q16, dq16 = q16, dk16 = q16, dv16 = q16;
  Tensor qs16 = asBf16(qs), rs16 = qs16;
  std::printf("rotary [8,4,128,64]                 %8.3f ms\n",
              bestMs(reps, "ds.rotary", {&q16}, {&o16}, {0, 0}, {1e4}));
  std::printf("rotary seq_major [8,128,4,64]       %8.3f ms\n",
              bestMs(reps, "ds.rotary", {&qs16}, {&rs16}, {0, 1}, {1e4}));
  std::printf("attention                           %8.3f ms\n",
              bestMs(reps, "ds.attention", {&q16, &k16, &v16}, {&o16}, {1, 0},
                     {0.125}));
  std::printf("attention_grad                      %8.3f ms\n",
              bestMs(reps, "ds.attention_grad", {&q16, &k16, &v16, &g16},
                     {&dq16, &dk16, &dv16}, {1, 0}, {0.125}));
  // The MLP's fused products: [1024, 256] x [1024, 256]^T + GELU, and the
  // gradient through them ([1024, 256] x [256, 1024] -> GELU' -> row sum).
  // The weight is scaled so that the pre-activations are ~N(0, 1), as a
  // model's are: with [-1, 1] weights most of them passed 10, where GELU's
  // exponential is subnormal and the CPU's microcode assists made the
  // epilogue ~2x slower than training sees.
  Tensor fcW32 = uniform(rng, {4 * C, C});
  for (float &v : fcW32.data)
    v *= 0.1875f; // 16 x (1/sqrt(3)) x (0.1875/sqrt(3)) = 1.0
  Tensor fcW = asBf16(fcW32), fcB = asBf16(uniform(rng, {4 * C}));
  Tensor h16 = asBf16(h), hg16 = h16, hd16 = h16;
  std::printf("matmul_bias_gelu [1024,256]x[1024,256]^T %8.3f ms\n",
              bestMs(reps, "ds.matmul_bias_gelu", {&x16, &fcW, &fcB},
                     {&hg16, &hd16}, {0, 1, 1}));
  Tensor dy16 = asBf16(uniform(rng, {B, T, C})),
         pw16 = asBf16(uniform(rng, {4 * C, C}));
  Tensor db16 = fcB;
  std::printf("matmul_gelu_grad [1024,256]x[1024,256]^T %8.3f ms\n",
              bestMs(reps, "ds.matmul_gelu_grad", {&dy16, &pw16, &h16},
                     {&hd16, &db16}, {0, 1, 1}));
  // The same product alone: what the two fused lines above add to it.
  std::printf("matmul [1024,256]x[1024,256]^T      %8.3f ms\n",
              bestMs(reps, "ds.matmul", {&x16, &fcW}, {&hg16}, {0, 1}));
  std::printf("gelu tanh                           %8.3f ms\n",
              bestMs(reps, "ds.gelu", {&h16}, {&hg16}, {1}));
  std::printf("gelu_grad tanh                      %8.3f ms\n",
              bestMs(reps, "ds.gelu_grad", {&h16, &hg16}, {&hd16}, {1}));
  Tensor hsum16 = asBf16(uniform(rng, {4 * C}));
  std::printf("reduce_sum [1024,1024] -> [1024]    %8.3f ms\n",
              bestMs(reps, "ds.reduce_sum", {&h16}, {&hsum16}, {0, 1}));
  Tensor ra16 = asBf16(ra), rb16 = asBf16(rb), rc16 = ra16;
  std::printf("add [8,128,256]                     %8.3f ms\n",
              bestMs(reps, "ds.add", {&ra16, &rb16}, {&rc16}));
  std::printf("fused add [8,128,256]               %8.3f ms\n",
              bestMs(reps, "ds.fused_elementwise", {&ra16, &rb16}, {&rc16},
                     {1, 0, 0, 1, 1, 2}));
  std::printf("add bias [8,128,1024] + [1024]      %8.3f ms\n",
              bestMs(reps, "ds.add", {&h16, &fcB}, {&hg16}));
  std::printf("bias_gelu [8,128,1024] + [1024]     %8.3f ms\n",
              bestMs(reps, "ds.bias_gelu", {&h16, &fcB}, {&hg16, &hd16}, {1}));
  std::printf(
      "matmul_bias [1024,256]x[1024,256]^T %8.3f ms\n",
      bestMs(reps, "ds.matmul_bias", {&x16, &fcW, &fcB}, {&hg16}, {0, 1}));
  Tensor lx16 = asBf16(x), lgx16 = lx16, lgw16 = lw, lgb16 = lb;
  std::printf("layer_norm_grad                     %8.3f ms\n",
              bestMs(reps, "ds.layer_norm_grad", {&lx16, &lw, &lx16},
                     {&lgx16, &lgw16, &lgb16}, {}, {1e-5}));
  std::printf("  (kernel loops: %s)\n", dsc::rt::cpu::cpuPoolLabel().c_str());
  benchBf16Products(reps);
  return 0;
}
