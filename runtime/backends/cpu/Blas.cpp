//===- Blas.cpp - f32 GEMMs: OpenBLAS, oneMKL or oneDNN, loaded at start -===//
//
// OpenBLAS picks its kernels once, when the library initializes, from the
// CPU it detects, and it may not know the CPU: OpenBLAS 0.3.21 (Debian 12)
// takes the Xeons of the benchmark machine for a "Prescott" and runs SSE3
// kernels at 40% of the AVX-512 ones' speed. OPENBLAS_CORETYPE overrides the
// detection but is read before main() runs when the library is linked, so
// the CPU backend does not link OpenBLAS: it sets OPENBLAS_CORETYPE from the
// instruction sets the CPU reports (unless the user set it) and then loads
// the library with dlopen. <cblas.h> only provides the prototypes.
//
// DSC_BLAS chooses what runs the f32 GEMMs. "auto" (the default) takes
// oneMKL's single dynamic library (libmkl_rt, e.g. the Python index's `mkl`
// wheel) on an Intel CPU where it can be found; oneDNN's f32 matmul on an
// AMD CPU with AVX-512; OpenBLAS otherwise. oneMKL's sgemm ran the plans'
// GEMMs at 1.04-1.35x OpenBLAS's rate on the Intel Xeons of the benchmark
// machines (with one shape at 0.94x) and 0.65-0.95x on an AMD EPYC;
// oneDNN's matmul at 1.01-1.13x OpenBLAS on an AMD EPYC with AVX-512 but
// 0.5x on a transposed shape of one with AVX2 only, and 0.6x at GPT-2's
// shapes on a Xeon (bench/RESULTS.md, "CPU GEMM libraries"). "openblas",
// "mkl" and "onednn" name one of them (a missing one is an error), a path
// any library exporting cblas_sgemm. oneMKL is looked for on the loader's
// path, then under $VIRTUAL_ENV/lib and $CONDA_PREFIX/lib, where `pip
// install mkl` (or dsc's `mkl` extra) and conda put it. It runs on GNU
// OpenMP's threads, the pool oneDNN's GEMMs use, with dsrun's short idle
// spin (OneDnn.cpp): its default Intel OpenMP would keep another pool
// spinning for 200 ms (KMP_BLOCKTIME) after each GEMM on the cores dsc's
// own kernels need next. With oneDNN, OpenBLAS is still loaded: it runs
// the products asked for on one thread from inside dsc's parallel loops
// (attention's blocks), where oneDNN would start a team per caller, and the
// scaled ones (alpha != 1) oneDNN's matmul would need another primitive for.
// Results differ between libraries in the last bits (another summation
// order), and are the same run to run.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/CpuCommon.h"

#if DSC_NO_CBLAS_H
// No OpenBLAS headers at build time: CBLAS's row-major sgemm as the LP64
// OpenBLAS library exports it (the values are CBLAS's).
enum CBLAS_ORDER { CblasRowMajor = 101 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112 };
using blasint = int;
extern "C" void cblas_sgemm(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE,
                            blasint, blasint, blasint, float, const float *,
                            blasint, const float *, blasint, float, float *,
                            blasint);
#else
#include <cblas.h>
#endif
#include <atomic>
#include <climits>
#include <cstdlib>
#include <dlfcn.h>
#include <iterator>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#ifndef DSC_OPENBLAS_PATH
#define DSC_OPENBLAS_PATH "libopenblas.so.0"
#endif

namespace dsc::rt::cpu {
namespace {

struct Blas {
  decltype(&cblas_sgemm) sgemm = nullptr;
  void (*setThreads)(int) = nullptr;
  int (*getThreads)() = nullptr;
  std::string error;
  /// What runs the GEMMs, and why ("oneMKL (auto: an Intel CPU)").
  std::string label;
  /// Multi-threaded products on oneDNN's f32 matmul, the CBLAS library's
  /// sgemm for the rest (see sgemm below).
  bool f32OnOneDnn = false;
};

// The OpenBLAS core whose kernels the CPU can run, best first.
const char *coreForThisCpu() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return "Haswell";
#endif
  return nullptr;
}

} // namespace

void prepareBlas() {
  static const bool once = [] {
    if (!std::getenv("OPENBLAS_CORETYPE"))
      if (const char *core = coreForThisCpu())
        setenv("OPENBLAS_CORETYPE", core, 0);
    // OpenBLAS's idle workers spin ~2^28 cycles after each GEMM; on few
    // cores that crowds out the kernels between GEMMs (bench/RESULTS.md:
    // steps at 112 or 135 ms depending on it). 2^20 cycles is ~0.4 ms.
    setenv("OPENBLAS_THREAD_TIMEOUT", "20", 0);
    return true;
  }();
  (void)once;
}

namespace {

bool intelCpu() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_is("intel");
#else
  return false;
#endif
}

/// An AMD CPU with AVX-512 (Zen 4 on): oneDNN's f32 matmul ran the plans'
/// shapes at 1.01-1.13x OpenBLAS's sgemm on one (bench/RESULTS.md), where
/// on the AVX2 EPYC it ran a transposed product at half the rate.
bool amdAvx512Cpu() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_is("amd") && __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

/// Where oneMKL's runtime library may be, in the order tried.
std::vector<std::string> mklCandidates() {
  const char *sonames[] = {"libmkl_rt.so.3", "libmkl_rt.so.2"};
  std::vector<std::string> names(std::begin(sonames), std::end(sonames));
  std::vector<std::string> dirs;
  for (const char *var : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (const char *dir = std::getenv(var); dir && *dir)
      dirs.push_back(std::string(dir) + "/lib");
  for (const std::string &dir : dirs)
    for (const char *soname : sonames)
      names.push_back(dir + "/" + soname);
  return names;
}

/// The first of `names` that loads, or null with what each said in `tried`.
void *openFirst(const std::vector<std::string> &names, std::string &tried) {
  for (const std::string &name : names) {
    if (void *lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL))
      return lib;
    const char *why = dlerror();
    tried += std::string(tried.empty() ? "" : "; ") + (why ? why : name);
  }
  return nullptr;
}

/// oneMKL's layers, set before its first other call: GNU OpenMP's threads
/// (Blas.cpp's header says why) and the integer width of <cblas.h>.
void configureMkl(void *lib) {
  shortenOpenMpSpin();
  using SetLayer = int (*)(int);
  constexpr int kThreadingGnu = 3, kInterfaceLp64 = 0, kInterfaceIlp64 = 1;
  if (auto set =
          reinterpret_cast<SetLayer>(dlsym(lib, "MKL_Set_Threading_Layer"))) {
    set(kThreadingGnu);
    shareOpenMpTeam(); // dsc's kernels join oneMKL's threads
  }
  if (auto set =
          reinterpret_cast<SetLayer>(dlsym(lib, "MKL_Set_Interface_Layer")))
    set(sizeof(blasint) >= 8 ? kInterfaceIlp64 : kInterfaceLp64);
}

/// The library DSC_BLAS asks for, opened, and its label; null with `error`.
/// `oneDnn`: load() runs the f32 products on oneDNN (OpenBLAS is opened for
/// the rest).
void *openChosen(const std::string &choice, bool oneDnn, std::string &label,
                 std::string &error) {
  const std::vector<std::string> openblas = {DSC_OPENBLAS_PATH,
                                             "libopenblas.so.0"};
  std::string tried;
  void *lib = nullptr;
  if (choice == "openblas") {
    label = "OpenBLAS (DSC_BLAS=openblas)";
    lib = openFirst(openblas, tried);
  } else if (choice == "mkl") {
    label = "oneMKL (DSC_BLAS=mkl)";
    if ((lib = openFirst(mklCandidates(), tried)))
      configureMkl(lib);
  } else if (choice == "onednn") {
    label = "oneDNN (DSC_BLAS=onednn), OpenBLAS on one thread";
    lib = openFirst(openblas, tried);
  } else if (choice == "auto") {
    if (oneDnn) {
      label = "oneDNN, OpenBLAS on one thread (auto: an AMD CPU with AVX-512)";
    } else if (!intelCpu()) {
      label = "OpenBLAS (auto: not an Intel CPU)";
    } else if ((lib = openFirst(mklCandidates(), tried))) {
      label = "oneMKL (auto: an Intel CPU)";
      configureMkl(lib);
      return lib;
    } else {
      label = "OpenBLAS (auto: an Intel CPU without oneMKL)";
    }
    tried.clear();
    lib = openFirst(openblas, tried);
  } else {
    label = "DSC_BLAS=" + choice;
    lib = openFirst({choice}, tried);
  }
  if (!lib)
    error = "cannot load " + label + ": " + tried;
  return lib;
}

Blas load() {
  Blas blas;
  prepareBlas();
  std::string choice;
  if (!blasChoiceFromEnv(choice, blas.error))
    return blas;
  // The one place that decides oneDNN's f32 products: asked for, or `auto`
  // on the CPUs where it won (amdAvx512Cpu).
  const bool wantOneDnn =
      choice == "onednn" || (choice == "auto" && amdAvx512Cpu());
  void *lib = openChosen(choice, wantOneDnn, blas.label, blas.error);
  if (!lib)
    return blas;
  blas.sgemm =
      reinterpret_cast<decltype(&cblas_sgemm)>(dlsym(lib, "cblas_sgemm"));
  // OpenBLAS's thread controls, or oneMKL's.
  for (const auto &[set, get] :
       {std::pair{"openblas_set_num_threads", "openblas_get_num_threads"},
        std::pair{"MKL_Set_Num_Threads", "MKL_Get_Max_Threads"}})
    if (!blas.setThreads) {
      blas.setThreads = reinterpret_cast<void (*)(int)>(dlsym(lib, set));
      blas.getThreads = reinterpret_cast<int (*)()>(dlsym(lib, get));
    }
  if (!blas.sgemm) {
    blas.error = blas.label + " has no cblas_sgemm";
    return blas;
  }
  if (wantOneDnn) {
    std::string why;
    blas.f32OnOneDnn = oneDnnF32Usable(why);
    if (!blas.f32OnOneDnn && choice == "onednn") {
      blas.sgemm = nullptr;
      blas.error = "cannot use oneDNN (DSC_BLAS=onednn): " + why;
      return blas;
    }
    if (!blas.f32OnOneDnn)
      blas.label =
          "OpenBLAS (auto: an AMD CPU with AVX-512, no oneDNN: " + why + ")";
  }
  // One small product: oneMKL loads its threading layer and its CPU's
  // kernel library (libmkl_gnu_thread, libmkl_avx512) at the first call,
  // and those pages should not count as a step's memory.
  float a[64] = {}, c[64] = {};
  blas.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 8, 8, 8, 1.0f, a, 8, a,
             8, 0.0f, c, 8);
  return blas;
}

const Blas &blas() {
  static const Blas instance = load();
  return instance;
}

} // namespace

bool blasChoiceFromEnv(std::string &choice, std::string &error) {
  const char *value = std::getenv("DSC_BLAS");
  choice = value && *value ? value : "auto";
  if (choice == "auto" || choice == "openblas" || choice == "mkl" ||
      choice == "onednn" || choice.find('/') != std::string::npos)
    return true;
  error = "DSC_BLAS: expected auto, openblas, mkl, onednn or a library's "
          "path "
          "(with a '/'), got '" +
          choice + "'";
  return false;
}

bool blasReady(std::string &err) {
  if (blas().sgemm)
    return true;
  err = blas().error;
  return false;
}

std::string blasLibrary() { return blas().sgemm ? blas().label : blas().error; }

int64_t blasIntMax() { return sizeof(blasint) >= 8 ? INT64_MAX : INT_MAX; }

namespace {
std::mutex singleThreadMutex;
std::atomic<int> singleThreadUsers{0};
int savedThreads = 0;
} // namespace

void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
           float alpha, const float *A, int64_t lda, const float *B,
           int64_t ldb, float beta, float *C, int64_t ldc) {
  // oneDNN takes the products that run on every thread; a product asked
  // for on one thread (attention's per-head blocks, called from parallel
  // loops) stays on the CBLAS library's, as does a scaled one.
  if (blas().f32OnOneDnn && alpha == 1.0f && (beta == 0.0f || beta == 1.0f) &&
      singleThreadUsers.load(std::memory_order_relaxed) == 0) {
    std::string why;
    if (gemmF32OneDnn(transA, transB, M, N, K, A, lda, B, ldb, C, ldc,
                      beta == 1.0f, why))
      return;
  }
  blas().sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
               transB ? CblasTrans : CblasNoTrans, blasint(M), blasint(N),
               blasint(K), alpha, A, blasint(lda), B, blasint(ldb), beta, C,
               blasint(ldc));
}

SingleThreadedBlas::SingleThreadedBlas() {
  std::lock_guard<std::mutex> lock(singleThreadMutex);
  if (singleThreadUsers++ == 0 && blas().getThreads && blas().setThreads) {
    savedThreads = blas().getThreads();
    if (savedThreads > 1)
      blas().setThreads(1);
  }
}

SingleThreadedBlas::~SingleThreadedBlas() {
  std::lock_guard<std::mutex> lock(singleThreadMutex);
  if (--singleThreadUsers == 0 && savedThreads > 1)
    blas().setThreads(savedThreads);
}

} // namespace dsc::rt::cpu
