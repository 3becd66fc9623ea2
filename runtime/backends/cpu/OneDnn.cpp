//===- OneDnn.cpp - bf16 GEMMs through oneDNN's matmul, loaded at first use
//===//
//
// Debian's OpenBLAS 0.3.21 has no bf16 GEMM, so a bf16 plan's products ran
// as f32 sgemm on widened copies. oneDNN's matmul multiplies bf16 operands
// with f32 accumulation, on AMX tiles where the CPU has them: 1370-2410
// GFLOP/s on two cores of a Xeon with AMX-BF16 against 350-410 for the best
// f32 GEMM (bench/RESULTS.md, "bf16 GEMMs on AMX"). Without AMX its bf16
// path (AVX512-BF16's dot products) depends on the core: 0.55x the f32
// GEMMs on a Xeon that showed no AMX, where one 512-bit bf16 dot product a
// cycle does the work of two f32 FMAs, but 1.8-2.2x OpenBLAS's sgemm on an
// AMD EPYC (Zen 4's two a cycle). An AVX2 machine has none. So by default
// (DSC_BF16_GEMM=auto) a CPU takes it where oneDNN runs it with AMX, or on
// AVX512-BF16 of an AMD CPU; `onednn` takes it wherever oneDNN has a bf16
// matmul, `widen` never.
//
// Like OpenBLAS (Blas.cpp) the library is loaded with dlopen, not linked:
// a machine without it (or a build without its headers) still runs every
// plan, widened. Only oneDNN 2.x's C API is used (Debian 12 ships 2.6);
// a library without those entry points counts as absent.
//
// A product's result is the f32 sum of exact bf16 x bf16 products, as the
// widened sgemm's, in another order: it differs from it in the last bits
// (within one bf16 rounding of the output) and is the same run to run.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/Bf16DotProducts.h"
#include "runtime/backends/cpu/CpuCommon.h"

#include <cstdlib>
#include <dlfcn.h>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#if __has_include(<oneapi/dnnl/dnnl.h>)
#include <oneapi/dnnl/dnnl.h>
#define DSC_HAVE_ONEDNN_HEADERS 1
#endif

#ifndef DSC_ONEDNN_PATH
#define DSC_ONEDNN_PATH "libdnnl.so.2"
#endif

namespace dsc::rt::cpu {

void shortenOpenMpSpin() {
  // Debian's oneDNN (and oneMKL as Blas.cpp loads it) runs on GNU OpenMP,
  // whose idle threads spin 300000 rounds after each GEMM by default,
  // taking the cores from the kernels between GEMMs (as OpenBLAS's do,
  // Blas.cpp). 10000 rounds: the small GPT's bf16 step 65.6-69.6 ms against
  // 74-81 ms (1000: 69-73, passive waiting: 72 ms; bench/RESULTS.md). Read
  // when libgomp loads, so set before dlopen, unless the user chose a
  // policy.
  if (!std::getenv("OMP_WAIT_POLICY"))
    setenv("GOMP_SPINCOUNT", "10000", 0);
}

bool bf16GemmChoiceFromEnv(std::string &choice, std::string &error) {
  const char *value = std::getenv("DSC_BF16_GEMM");
  choice = value && *value ? value : "auto";
  if (choice == "auto" || choice == "onednn" || choice == "widen")
    return true;
  error = "DSC_BF16_GEMM: expected auto, onednn or widen, got '" + choice + "'";
  return false;
}

#ifdef DSC_HAVE_ONEDNN_HEADERS
namespace {

struct OneDnn {
  decltype(&dnnl_engine_create) engineCreate = nullptr;
  decltype(&dnnl_stream_create) streamCreate = nullptr;
  decltype(&dnnl_memory_desc_init_by_strides) descByStrides = nullptr;
  decltype(&dnnl_matmul_desc_init) matmulDesc = nullptr;
  decltype(&dnnl_primitive_desc_create) pdCreate = nullptr;
  decltype(&dnnl_primitive_desc_destroy) pdDestroy = nullptr;
  decltype(&dnnl_primitive_create) primitiveCreate = nullptr;
  decltype(&dnnl_primitive_execute) execute = nullptr;
  decltype(&dnnl_memory_create) memoryCreate = nullptr;
  decltype(&dnnl_memory_destroy) memoryDestroy = nullptr;
  decltype(&dnnl_stream_wait) streamWait = nullptr;
  decltype(&dnnl_stream_destroy) streamDestroy = nullptr;
  decltype(&dnnl_get_effective_cpu_isa) effectiveIsa = nullptr;
  decltype(&dnnl_primitive_attr_create) attrCreate = nullptr;
  decltype(&dnnl_primitive_attr_destroy) attrDestroy = nullptr;
  decltype(&dnnl_primitive_attr_set_post_ops) attrSetPostOps = nullptr;
  decltype(&dnnl_post_ops_create) postOpsCreate = nullptr;
  decltype(&dnnl_post_ops_destroy) postOpsDestroy = nullptr;
  decltype(&dnnl_post_ops_append_sum) appendSum = nullptr;
  dnnl_engine_t engine = nullptr;
  bool amx = false;
  bool avx512Bf16 = false; // bf16 dot products, with or without AMX
  std::string error;       // why it is not usable
};

template <class F> bool bind(void *lib, F &f, const char *name) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

OneDnn load() {
  OneDnn d;
  shortenOpenMpSpin();
  void *lib = dlopen(DSC_ONEDNN_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    lib = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    d.error = std::string("cannot load oneDNN: ") + (why ? why : "");
    return d;
  }
  if (!bind(lib, d.engineCreate, "dnnl_engine_create") ||
      !bind(lib, d.streamCreate, "dnnl_stream_create") ||
      !bind(lib, d.descByStrides, "dnnl_memory_desc_init_by_strides") ||
      !bind(lib, d.matmulDesc, "dnnl_matmul_desc_init") ||
      !bind(lib, d.pdCreate, "dnnl_primitive_desc_create") ||
      !bind(lib, d.pdDestroy, "dnnl_primitive_desc_destroy") ||
      !bind(lib, d.primitiveCreate, "dnnl_primitive_create") ||
      !bind(lib, d.execute, "dnnl_primitive_execute") ||
      !bind(lib, d.memoryCreate, "dnnl_memory_create") ||
      !bind(lib, d.memoryDestroy, "dnnl_memory_destroy") ||
      !bind(lib, d.streamWait, "dnnl_stream_wait") ||
      !bind(lib, d.streamDestroy, "dnnl_stream_destroy") ||
      !bind(lib, d.effectiveIsa, "dnnl_get_effective_cpu_isa") ||
      !bind(lib, d.attrCreate, "dnnl_primitive_attr_create") ||
      !bind(lib, d.attrDestroy, "dnnl_primitive_attr_destroy") ||
      !bind(lib, d.attrSetPostOps, "dnnl_primitive_attr_set_post_ops") ||
      !bind(lib, d.postOpsCreate, "dnnl_post_ops_create") ||
      !bind(lib, d.postOpsDestroy, "dnnl_post_ops_destroy") ||
      !bind(lib, d.appendSum, "dnnl_post_ops_append_sum")) {
    d.error = "oneDNN at " DSC_ONEDNN_PATH " lacks the 2.x matmul API";
    return d;
  }
  if (d.engineCreate(&d.engine, dnnl_cpu, 0) != dnnl_success) {
    d.error = "oneDNN: no CPU engine";
    return d;
  }
  const unsigned isa = d.effectiveIsa();
  d.amx = (isa & dnnl_cpu_isa_avx512_core_amx) ==
          unsigned(dnnl_cpu_isa_avx512_core_amx);
  d.avx512Bf16 = (isa & dnnl_cpu_isa_avx512_core_bf16) ==
                 unsigned(dnnl_cpu_isa_avx512_core_bf16);
  return d;
}

const OneDnn &oneDnn() {
  static const OneDnn instance = load();
  return instance;
}

// One primitive per product shape, made at first use and kept for the
// process (a plan has a few dozen shapes; making one costs milliseconds).
// (transA, transB, M, N, K, lda, ldb, ldc, A's and B's dnnl type, C's,
// accumulate)
using GemmKey = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int64_t, int, int, bool>;

struct GemmPrimitive {
  dnnl_primitive_t primitive = nullptr;
  dnnl_memory_desc_t a{}, b{}, c{};
};

bool makePrimitive(const GemmKey &key, GemmPrimitive &p, std::string &err) {
  const OneDnn &d = oneDnn();
  const auto [transA, transB, M, N, K, lda, ldb, ldc, abType, cType,
              accumulate] = key;
  const char *what = abType == dnnl_bf16 ? "bf16" : "f32";
  // Row-major op(A) [M, K], op(B) [K, N], C [M, N]; a transposed operand is
  // the same matrix with its strides swapped.
  const dnnl_dims_t aDims = {M, K}, bDims = {K, N}, cDims = {M, N};
  const dnnl_dims_t aStrides = {transA ? 1 : lda, transA ? lda : 1};
  const dnnl_dims_t bStrides = {transB ? 1 : ldb, transB ? ldb : 1};
  const dnnl_dims_t cStrides = {ldc, 1};
  dnnl_matmul_desc_t op;
  dnnl_primitive_desc_t pd = nullptr;
  // Accumulating: C += op(A) op(B), oneDNN's "sum" post-op.
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_post_ops_t postOps = nullptr;
  bool described = d.descByStrides(&p.a, 2, aDims, dnnl_data_type_t(abType),
                                   aStrides) == dnnl_success &&
                   d.descByStrides(&p.b, 2, bDims, dnnl_data_type_t(abType),
                                   bStrides) == dnnl_success &&
                   d.descByStrides(&p.c, 2, cDims, dnnl_data_type_t(cType),
                                   cStrides) == dnnl_success &&
                   d.matmulDesc(&op, &p.a, &p.b, nullptr, &p.c) == dnnl_success;
  if (described && accumulate)
    described = d.attrCreate(&attr) == dnnl_success &&
                d.postOpsCreate(&postOps) == dnnl_success &&
                d.appendSum(postOps, 1.0f) == dnnl_success &&
                d.attrSetPostOps(attr, postOps) == dnnl_success;
  described = described &&
              d.pdCreate(&pd, &op, attr, d.engine, nullptr) == dnnl_success;
  if (postOps)
    d.postOpsDestroy(postOps);
  if (attr)
    d.attrDestroy(attr);
  if (!described)
    return fail(err, "oneDNN has no ", what, " matmul for ", M, " x ", N, " x ",
                K);
  const bool made = d.primitiveCreate(&p.primitive, pd) == dnnl_success;
  d.pdDestroy(pd);
  if (!made)
    return fail(err, "oneDNN could not make a ", what, " matmul for ", M, " x ",
                N, " x ", K);
  return true;
}

const GemmPrimitive *primitiveFor(const GemmKey &key, std::string &err) {
  static std::mutex mutex;
  // Never destroyed: the primitives live as long as the process, and a
  // map freed at exit would leave them unreachable (LeakSanitizer).
  static auto &cache = *new std::map<GemmKey, GemmPrimitive>;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end())
    return &it->second;
  GemmPrimitive p;
  if (!makePrimitive(key, p, err))
    return nullptr;
  return &cache.emplace(key, p).first->second;
}

/// The small product whose primitive tells whether oneDNN multiplies
/// operands of `abType` on this CPU.
GemmKey probeKey(int abType) {
  return {false, false, 16, 16, 16, 16, 16, 16, abType, dnnl_f32, false};
}

// Whether oneDNN is loaded and makes a bf16 matmul on this CPU (a small
// probe product), and what it runs on or why it cannot.
struct Bf16Path {
  bool usable = false;
  bool fast = false; // faster than widening to sgemm: what auto takes
  std::string label;
};

const Bf16Path &bf16Path() {
  static const Bf16Path path = [] {
    Bf16Path p;
    const OneDnn &d = oneDnn();
    std::string err;
    if (!d.engine)
      p.label = d.error;
    else if (!primitiveFor(probeKey(dnnl_bf16), err))
      p.label = err + " on this CPU";
    else {
      p.usable = true;
      // The vendor rule is the dot products' (Bf16DotProducts.h).
      const bool amdBf16 = d.avx512Bf16 && dotProductsPay();
      p.fast = d.amx || amdBf16;
      p.label = d.amx     ? "oneDNN (AMX)"
                : amdBf16 ? "oneDNN (AVX512-BF16, AMD)"
                          : "oneDNN (no AMX)";
    }
    return p;
  }();
  return path;
}

} // namespace

bool nativeBf16Gemm() {
  static const bool native = [] {
    std::string choice, error;
    if (!bf16GemmChoiceFromEnv(choice, error) || choice == "widen")
      return false;
    return bf16Path().usable && (choice == "onednn" || bf16Path().fast);
  }();
  return native;
}

std::string bf16GemmLibrary() { return bf16Path().label; }

namespace {

/// Runs the product `key` describes over A, B and C on this thread's stream.
bool runMatmul(const GemmKey &key, const void *A, const void *B, void *C,
               std::string &err) {
  const OneDnn &d = oneDnn();
  shareOpenMpTeam(); // dsc's kernels join oneDNN's threads
  const GemmPrimitive *p = primitiveFor(key, err);
  if (!p)
    return false;
  // A stream per calling thread (oneDNN's CPU streams are not shared),
  // destroyed when the thread ends.
  struct ThreadStream {
    dnnl_stream_t stream = nullptr;
    ~ThreadStream() {
      if (stream)
        oneDnn().streamDestroy(stream);
    }
  };
  thread_local ThreadStream mine;
  dnnl_stream_t &stream = mine.stream;
  if (!stream && d.streamCreate(&stream, d.engine, dnnl_stream_default_flags) !=
                     dnnl_success)
    return fail(err, "oneDNN: cannot make a stream");
  dnnl_memory_t a = nullptr, b = nullptr, c = nullptr;
  bool ok = d.memoryCreate(&a, &p->a, d.engine, const_cast<void *>(A)) ==
                dnnl_success &&
            d.memoryCreate(&b, &p->b, d.engine, const_cast<void *>(B)) ==
                dnnl_success &&
            d.memoryCreate(&c, &p->c, d.engine, C) == dnnl_success;
  if (ok) {
    const dnnl_exec_arg_t args[] = {
        {DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
    ok = d.execute(p->primitive, stream, 3, args) == dnnl_success &&
         d.streamWait(stream) == dnnl_success;
  }
  for (dnnl_memory_t m : {a, b, c})
    if (m)
      d.memoryDestroy(m);
  if (!ok)
    return fail(err, "oneDNN's matmul failed for ", std::get<2>(key), " x ",
                std::get<3>(key), " x ", std::get<4>(key));
  return true;
}

} // namespace

bool gemmBf16(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
              const uint16_t *A, int64_t lda, const uint16_t *B, int64_t ldb,
              void *C, DType cType, int64_t ldc, std::string &err,
              bool accumulate) {
  const int cDnnl = cType == DType::bf16 ? int(dnnl_bf16) : int(dnnl_f32);
  return runMatmul(
      {transA, transB, M, N, K, lda, ldb, ldc, dnnl_bf16, cDnnl, accumulate}, A,
      B, C, err);
}

bool oneDnnF32Usable(std::string &why) {
  static const std::string reason = [] {
    std::string err;
    if (!oneDnn().engine)
      return oneDnn().error;
    if (!primitiveFor(probeKey(dnnl_f32), err))
      return err;
    return std::string();
  }();
  why = reason;
  return reason.empty();
}

bool gemmF32OneDnn(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                   const float *A, int64_t lda, const float *B, int64_t ldb,
                   float *C, int64_t ldc, bool accumulate, std::string &err) {
  return runMatmul(
      {transA, transB, M, N, K, lda, ldb, ldc, dnnl_f32, dnnl_f32, accumulate},
      A, B, C, err);
}

#else // no oneDNN headers at build time: every bf16 GEMM is widened

bool nativeBf16Gemm() { return false; }

std::string bf16GemmLibrary() { return "built without oneDNN's headers"; }

bool gemmBf16(bool, bool, int64_t, int64_t, int64_t, const uint16_t *, int64_t,
              const uint16_t *, int64_t, void *, DType, int64_t,
              std::string &err, bool) {
  return fail(err, "built without oneDNN: no bf16 GEMM");
}

bool oneDnnF32Usable(std::string &why) {
  why = "built without oneDNN's headers";
  return false;
}

bool gemmF32OneDnn(bool, bool, int64_t, int64_t, int64_t, const float *,
                   int64_t, const float *, int64_t, float *, int64_t, bool,
                   std::string &err) {
  return fail(err, "built without oneDNN: no f32 matmul");
}

#endif

} // namespace dsc::rt::cpu
