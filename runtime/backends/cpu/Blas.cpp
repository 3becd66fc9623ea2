//===- Blas.cpp - OpenBLAS, loaded at first use ---------------------------===//
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
// DSC_BLAS chooses another CBLAS library: "mkl" loads oneMKL's single
// dynamic library (libmkl_rt, e.g. the Python index's mkl wheel on
// LD_LIBRARY_PATH), a path any library exporting cblas_sgemm. On the
// benchmark machine oneMKL's sgemm ran the plans' GEMMs 1.05-1.35x faster
// than OpenBLAS's (bench/RESULTS.md, "CPU GEMM libraries"); OpenBLAS stays
// the default because Debian ships it. Results differ from OpenBLAS's in
// the last bits (another summation order), and are the same run to run.
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
#include <climits>
#include <cstdlib>
#include <dlfcn.h>
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

Blas load() {
  Blas blas;
  prepareBlas();
  std::string choice, error;
  if (!blasChoiceFromEnv(choice, error)) {
    blas.error = error;
    return blas;
  }
  std::vector<std::string> names = {DSC_OPENBLAS_PATH, "libopenblas.so.0"};
  std::string label = "OpenBLAS";
  if (choice == "mkl") {
    names = {"libmkl_rt.so.2", "libmkl_rt.so.3", "libmkl_rt.so"};
    label = "oneMKL (DSC_BLAS=mkl)";
  } else if (choice != "openblas") {
    names = {choice};
    label = "DSC_BLAS=" + choice;
  }
  void *lib = nullptr;
  std::string tried;
  for (const std::string &name : names) {
    lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib)
      break;
    const char *why = dlerror();
    tried += std::string(tried.empty() ? "" : "; ") + (why ? why : name);
  }
  if (!lib) {
    blas.error = "cannot load " + label + ": " + tried;
    return blas;
  }
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
  if (!blas.sgemm)
    blas.error = label + " has no cblas_sgemm";
  return blas;
}

const Blas &blas() {
  static const Blas instance = load();
  return instance;
}

} // namespace

bool blasChoiceFromEnv(std::string &choice, std::string &error) {
  const char *value = std::getenv("DSC_BLAS");
  choice = value && *value ? value : "openblas";
  if (choice == "openblas" || choice == "mkl" ||
      choice.find('/') != std::string::npos)
    return true;
  error = "DSC_BLAS: expected openblas, mkl or a library's path (with a "
          "'/'), got '" +
          choice + "'";
  return false;
}

bool blasReady(std::string &err) {
  if (blas().sgemm)
    return true;
  err = blas().error;
  return false;
}

int64_t blasIntMax() { return sizeof(blasint) >= 8 ? INT64_MAX : INT_MAX; }

void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
           float alpha, const float *A, int64_t lda, const float *B,
           int64_t ldb, float beta, float *C, int64_t ldc) {
  blas().sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
               transB ? CblasTrans : CblasNoTrans, blasint(M), blasint(N),
               blasint(K), alpha, A, blasint(lda), B, blasint(ldb), beta, C,
               blasint(ldc));
}

namespace {
std::mutex singleThreadMutex;
int singleThreadUsers = 0, savedThreads = 0;
} // namespace

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
