//===- gemm_libs.cpp - fp32 and bf16 GEMM rates of the CPU BLAS libraries -===//
//
// Issue 32's measurement: the GEMM shapes of dsc's plans (the small GPT's
// forward and both gradients, and GPT-2 124M's at one sequence), timed with
// each library this machine can load: OpenBLAS and BLIS (Debian), oneDNN
// (Debian's libdnnl), oneMKL (the Python index's mkl wheel). The BLAS
// libraries all export cblas_sgemm, so each is opened with dlopen
// (RTLD_LOCAL | RTLD_DEEPBIND) and called through its own symbol; oneDNN is
// linked (its matmul primitive for bf16, dnnl_sgemm for fp32). bf16: oneDNN's
// matmul (bf16 x bf16 -> f32) and MKL's cblas_gemm_bf16bf16f32; OpenBLAS
// 0.3.21 and BLIS 0.9 have none.
//
//   c++ -O2 -std=c++17 bench/gemm_libs.cpp -o gemm_libs -ldnnl -ldl
//   OMP_NUM_THREADS=2 LD_LIBRARY_PATH=<mkl libs> ./gemm_libs [--mkl PATH]
//   [--threads N]
//
// Prints a Markdown table: per shape, GFLOP/s of each library (best of the
// repetitions that fit in about 0.3 s, after one warm-up call).
//
//===----------------------------------------------------------------------===//
#include <dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <dlfcn.h>

namespace {

enum { kRowMajor = 101, kNoTrans = 111, kTrans = 112 };

using Sgemm = void (*)(int, int, int, int, int, int, float, const float *, int,
                       const float *, int, float, float *, int);
using MklBf16Gemm = void (*)(int, int, int, int, int, int, float,
                             const uint16_t *, int, const uint16_t *, int,
                             float, float *, int);
using SetThreads = void (*)(int);

struct Shape {
  const char *what;
  int m, n, k;
  bool transA, transB; ///< A stored [k, m] (dW = X^T dY); B stored [n, k]
};

/// C[m, n] = op(A) op(B), the plan's three products per linear layer.
const Shape kShapes[] = {
    {"small GPT qkv (1024 x 256 -> 768)", 1024, 768, 256, false, false},
    {"small GPT fc (1024 x 256 -> 1024)", 1024, 1024, 256, false, false},
    {"small GPT proj (1024 x 1024 -> 256)", 1024, 256, 1024, false, false},
    {"small GPT fc dX (dY W^T)", 1024, 256, 1024, false, true},
    {"small GPT fc dW (X^T dY)", 256, 1024, 1024, true, false},
    {"GPT-2 fc (1024 x 768 -> 3072)", 1024, 3072, 768, false, false},
    {"GPT-2 fc dW (X^T dY)", 768, 3072, 1024, true, false},
    {"GPT-2 lm_head (1024 x 768 -> 50257)", 1024, 50257, 768, false, true},
};

double seconds(const std::function<void()> &f) {
  auto t = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

/// Best time of repetitions within about 0.3 s, after a warm-up call.
double best(const std::function<void()> &f) {
  f();
  double bestS = 1e30, total = 0;
  for (int r = 0; r < 50 && (r < 3 || total < 0.3); ++r) {
    double s = seconds(f);
    bestS = std::min(bestS, s);
    total += s;
  }
  return bestS;
}

uint16_t toBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

struct Blas {
  std::string name;
  void *lib = nullptr;
  Sgemm sgemm = nullptr;
  MklBf16Gemm bf16 = nullptr;
};

Blas openBlas(const std::string &name, const std::string &path,
              const char *setThreads, int threads) {
  Blas b{name};
  b.lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!b.lib) {
    std::fprintf(stderr, "gemm_libs: %s: %s\n", name.c_str(), dlerror());
    return b;
  }
  b.sgemm = reinterpret_cast<Sgemm>(dlsym(b.lib, "cblas_sgemm"));
  b.bf16 =
      reinterpret_cast<MklBf16Gemm>(dlsym(b.lib, "cblas_gemm_bf16bf16f32"));
  if (auto set = reinterpret_cast<SetThreads>(dlsym(b.lib, setThreads)))
    set(threads);
  return b;
}

/// oneDNN's matmul primitive, bf16 or f32 operands, f32 result.
double dnnlMatmul(const Shape &s, dnnl::memory::data_type t,
                  const std::vector<float> &a, const std::vector<float> &b) {
  using namespace dnnl;
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  using tag = memory::format_tag;
  const memory::dims ad = {s.m, s.k}, bd = {s.k, s.n}, cd = {s.m, s.n};
  memory::desc amd(ad, t, s.transA ? tag::ba : tag::ab);
  memory::desc bmd(bd, t, s.transB ? tag::ba : tag::ab);
  memory::desc cmd(cd, memory::data_type::f32, tag::ab);
  // oneDNN 2.x (Debian 12's 2.6): an op descriptor, then the primitive's.
  // A CPU without a bf16 path (AVX2 only) has no primitive: rate 0, "-".
  matmul::primitive_desc pd;
  try {
    pd = matmul::primitive_desc(matmul::desc(amd, bmd, cmd), eng);
  } catch (const dnnl::error &) {
    return 0;
  }
  memory am(amd, eng), bm(bmd, eng), cm(cmd, eng);
  auto fill = [&](memory &m, const std::vector<float> &v) {
    if (t == memory::data_type::f32) {
      std::memcpy(m.get_data_handle(), v.data(), v.size() * 4);
    } else {
      auto *p = static_cast<uint16_t *>(m.get_data_handle());
      for (size_t i = 0; i < v.size(); ++i)
        p[i] = toBf16(v[i]);
    }
  };
  fill(am, a);
  fill(bm, b);
  matmul mm(pd);
  return best([&] {
    mm.execute(
        strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    strm.wait();
  });
}

} // namespace

int main(int argc, char **argv) {
  std::string mkl = "libmkl_rt.so.3";
  int threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--mkl"))
      mkl = argv[i + 1];
    else if (!std::strcmp(argv[i], "--threads"))
      threads = std::atoi(argv[i + 1]);
  }
  std::vector<Blas> libs = {
      openBlas("OpenBLAS 0.3.21",
               "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
               "openblas_set_num_threads", threads),
      openBlas("BLIS 0.9", "/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4",
               "bli_thread_set_num_threads", threads),
      openBlas("oneMKL", mkl, "MKL_Set_Num_Threads", threads),
  };
  std::printf("| shape (M x N x K) | OpenBLAS f32 | BLIS f32 | oneMKL f32 | "
              "oneDNN f32 | oneDNN bf16 | oneMKL bf16 |\n|---|---|---|---|---|"
              "---|---|\n");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const Shape &s : kShapes) {
    std::vector<float> a(size_t(s.m) * s.k), b(size_t(s.k) * s.n),
        c(size_t(s.m) * s.n);
    for (float &x : a)
      x = u(rng);
    for (float &x : b)
      x = u(rng);
    const double flops = 2.0 * s.m * s.n * s.k;
    auto rate = [&](double sec) { return sec > 0 ? flops / sec / 1e9 : 0; };
    std::printf("| %s (%d x %d x %d) |", s.what, s.m, s.n, s.k);
    // Row-major op(A) [m, k]: stored [m, k] (lda k) or [k, m] (lda m).
    const int lda = s.transA ? s.m : s.k, ldb = s.transB ? s.k : s.n;
    for (const Blas &l : libs) {
      if (!l.sgemm) {
        std::printf(" - |");
        continue;
      }
      double sec = best([&] {
        l.sgemm(kRowMajor, s.transA ? kTrans : kNoTrans,
                s.transB ? kTrans : kNoTrans, s.m, s.n, s.k, 1, a.data(), lda,
                b.data(), ldb, 0, c.data(), s.n);
      });
      std::printf(" %.1f |", rate(sec));
    }
    for (auto t : {dnnl::memory::data_type::f32, dnnl::memory::data_type::bf16})
      if (double r = rate(dnnlMatmul(s, t, a, b)); r > 0)
        std::printf(" %.1f |", r);
      else
        std::printf(" - |");
    const Blas &m = libs[2];
    if (m.bf16) {
      std::vector<uint16_t> a16(a.size()), b16(b.size());
      for (size_t i = 0; i < a.size(); ++i)
        a16[i] = toBf16(a[i]);
      for (size_t i = 0; i < b.size(); ++i)
        b16[i] = toBf16(b[i]);
      double sec = best([&] {
        m.bf16(kRowMajor, s.transA ? kTrans : kNoTrans,
               s.transB ? kTrans : kNoTrans, s.m, s.n, s.k, 1, a16.data(), lda,
               b16.data(), ldb, 0, c.data(), s.n);
      });
      std::printf(" %.1f |\n", rate(sec));
    } else {
      std::printf(" - |\n");
    }
    std::fflush(stdout);
  }
  return 0;
}
