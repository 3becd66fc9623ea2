//===- cpu_adam.cpp - CPU AdamW throughput over flat shards ---------------===//
//
//   build/bench/dsc-bench-adam [ELEMENTS...]   (default 1M 16M 128M)
//
// The host optimizer of offload (through the CPU kernel table, as dsrun
// calls it) on one flat shard of each size, updated in place: ds.adamw over
// fp32 parameters, gradients and moments, and ds.adamw_round (mixed
// precision: fp16 gradients in, the fp32 master updated and rounded into an
// fp16 parameter in the same pass). Prints one line per (kernel, size) with
// the best of 5 updates after one warm-up, in elements per second and in
// the bytes it moves per second (28 a element either way: p, g, m, v read,
// p, m, v written; the rounding kernel reads a 2-byte gradient and writes a
// 2-byte parameter too), as JSON lines that bench/cpu_adam.sh puts beside
// PyTorch's (torch_adam.py). Then this machine's memory bandwidth, STREAM's
// way, over the same sizes and threads (the kernels' parallelFor, their
// grain): copy (a = b, 8 bytes a element) and triad (a = b + s c, 12), as
// STREAM counts them (not the write-allocate read of `a`), and an in-place
// update (a = a + s b, 12 bytes, no write-allocate: Adam's own pattern);
// each Adam kernel's bytes per second as a share of the in-place rate.
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

constexpr int64_t kGrain = 1 << 18; // the optimizer kernels' (Optimizer.cpp)
constexpr double kAdamBytesPerElement = 28;

enum class Stream { copy, triad, inPlace };

/// STREAM's copy (a = b) or triad (a = b + 3 c), or an in-place update
/// (a = a + 3 b), over n floats: the best of 5 passes after a warm-up, in
/// bytes per second as STREAM counts them.
double streamBytesPerSecond(int64_t n, Stream kind) {
  std::vector<float> a(size_t(n), 0.f), b(size_t(n), 1.f), c(size_t(n), 2.f);
  double best = 1e30;
  for (int r = 0; r < 6; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    cpu::parallelFor(n, kGrain, [&](int64_t lo, int64_t hi) {
      float *out = a.data();
      const float *x = b.data(), *y = c.data();
      if (kind == Stream::triad)
        for (int64_t i = lo; i < hi; ++i)
          out[i] = x[i] + 3.f * y[i];
      else if (kind == Stream::inPlace)
        for (int64_t i = lo; i < hi; ++i)
          out[i] += 3.f * x[i];
      else
        for (int64_t i = lo; i < hi; ++i)
          out[i] = x[i];
    });
    double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    if (r > 0)
      best = std::min(best, s);
  }
  // Keep the result observable so the loops are not dropped.
  if (a[size_t(n / 2)] < 0)
    std::fprintf(stderr, "impossible\n");
  return double(n) * (kind == Stream::copy ? 8 : 12) / best;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<int64_t> sizes;
  for (int i = 1; i < argc; ++i)
    sizes.push_back(std::atoll(argv[i]));
  if (sizes.empty())
    sizes = {1 << 20, 16 << 20, 128 << 20};
  for (int64_t n : sizes)
    if (n < 1) {
      std::fprintf(stderr, "dsc-bench-adam: sizes must be >= 1\n");
      return 2;
    }
  for (int64_t n : sizes) {
    double inPlace = 0;
    for (auto [kind, label] : {std::pair{Stream::copy, "stream copy"},
                               {Stream::triad, "stream triad"},
                               {Stream::inPlace, "in-place a += s b"}}) {
      const double rate = streamBytesPerSecond(n, kind);
      if (kind == Stream::inPlace)
        inPlace = rate;
      std::printf("{\"impl\": \"%s\", \"elements\": %lld, "
                  "\"gb_per_s\": %.2f, \"threads\": %d}\n",
                  label, static_cast<long long>(n), rate / 1e9,
                  cpu::kernelThreads());
    }
    for (bool round : {false, true}) {
      double s = bestSeconds(n, round);
      if (s < 0)
        return 1;
      const double bytes = double(n) * kAdamBytesPerElement / s;
      std::printf("{\"impl\": \"dsc %s\", \"elements\": %lld, "
                  "\"seconds\": %.6f, \"elements_per_s\": %.4g, "
                  "\"gb_per_s\": %.2f, \"of_in_place\": %.2f, "
                  "\"threads\": %d}\n",
                  round ? "ds.adamw_round (f16 g, f16 p out)" : "ds.adamw",
                  static_cast<long long>(n), s, double(n) / s, bytes / 1e9,
                  bytes / inPlace, cpu::kernelThreads());
    }
  }
  return 0;
}
