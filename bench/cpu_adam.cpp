//===- cpu_adam.cpp - CPU AdamW throughput over flat shards ---------------===//
//
//   build/bench/dsc-bench-adam [ELEMENTS...]   (default 1M 16M 128M)
//
// The host optimizer of offload (through the CPU kernel table, as dsrun
// calls it) on one flat shard of each size, updated in place: ds.adamw over
// fp32 parameters, gradients and moments, and ds.adamw_round (mixed
// precision: fp16 gradients in, the fp32 master updated and rounded into an
// fp16 parameter in the same pass). Prints one line per (kernel, size) with
// the best of 5 updates after one warm-up, in elements per second, as JSON
// lines that bench/cpu_adam.sh puts beside PyTorch's (torch_adam.py).
//
//===----------------------------------------------------------------------===//
#include "bench/BenchTensor.h"
#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/backends/cpu/CpuKernels.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace dsc::rt;

namespace {

using Flat = dsc::bench::Tensor;

Flat filled(int64_t n, float first, float step) {
  Flat f{{n}, std::vector<float>(size_t(n))};
  for (int64_t i = 0; i < n; ++i)
    f.data[size_t(i)] = first + step * float(i % 1024);
  return f;
}

/// Best of 5 timed updates after a warm-up (which touches fresh pages), or
/// -1 after printing why a call failed.
double bestSeconds(int64_t n, bool round) {
  const char *name = round ? "ds.adamw_round" : "ds.adamw";
  const KernelInfo *adam = findCpuKernel(name);
  if (!adam) {
    std::fprintf(stderr, "dsc-bench-adam: no %s kernel\n", name);
    return -1;
  }
  Flat p = filled(n, 0.5f, 1e-4f), g = filled(n, -0.01f, 2e-5f),
       m = filled(n, 0, 0), v = filled(n, 0, 0);
  Flat lr{{}, {1e-3f}}, step{{}, {1}}, scale{{}, {1}};
  // fp16 bits: the gradient and the rounded parameter.
  std::vector<uint16_t> g16(static_cast<size_t>(n), 0x2000);
  std::vector<uint16_t> p16(static_cast<size_t>(n));
  TensorRef g16Ref = g.ref(), p16Ref = p.ref();
  g16Ref.data = g16.data();
  g16Ref.dtype = DType::f16;
  p16Ref.data = p16.data();
  p16Ref.dtype = DType::f16;
  std::vector<TensorRef> in = {p.ref(),    round ? g16Ref : g.ref(),
                               m.ref(),    v.ref(),
                               lr.ref(),   step.ref(),
                               scale.ref()};
  std::vector<TensorRef> out = {p.ref(), m.ref(), v.ref()};
  if (round)
    out.push_back(p16Ref);
  std::vector<int64_t> ints;
  std::vector<double> floats = {0.9, 0.999, 1e-8, 0.01}; // betas, eps, wd
  KernelContext ctx;
  KernelArgs args = makeKernelArgs(in, out, ints, floats, &ctx);
  double best = 1e30;
  for (int r = 0; r < 6; ++r) {
    step.data[0] = float(r + 1);
    auto t0 = std::chrono::steady_clock::now();
    std::string error;
    if (!adam->fn(args, error)) {
      std::fprintf(stderr, "dsc-bench-adam: %s\n", error.c_str());
      return -1;
    }
    double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    if (r > 0)
      best = std::min(best, s);
  }
  return best;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<int64_t> sizes;
  for (int i = 1; i < argc; ++i)
    sizes.push_back(std::atoll(argv[i]));
  if (sizes.empty())
    sizes = {1 << 20, 16 << 20, 128 << 20};
  for (bool round : {false, true})
    for (int64_t n : sizes) {
      if (n < 1) {
        std::fprintf(stderr, "dsc-bench-adam: sizes must be >= 1\n");
        return 2;
      }
      double s = bestSeconds(n, round);
      if (s < 0)
        return 1;
      std::printf("{\"impl\": \"dsc %s\", \"elements\": %lld, "
                  "\"seconds\": %.6f, \"elements_per_s\": %.4g, "
                  "\"threads\": %d}\n",
                  round ? "ds.adamw_round (f16 g, f16 p out)" : "ds.adamw",
                  static_cast<long long>(n), s, double(n) / s,
                  cpu::kernelThreads());
    }
  return 0;
}
