//===- CublasLt.cpp - cuBLASLt, loaded when the backend starts ------------===//
#include "runtime/backends/cuda/CublasLt.h"

#include <dlfcn.h>

#ifndef DSC_CUBLASLT_PATH
#define DSC_CUBLASLT_PATH "libcublasLt.so"
#endif

namespace dsc::rt::cuda {
namespace {

struct Loaded {
  CublasLtApi api{};
  std::string error;
};

template <typename Fn>
bool bind(void *lib, const char *symbol, Fn &fn, std::string &error) {
  fn = reinterpret_cast<Fn>(dlsym(lib, symbol));
  if (!fn)
    error = std::string("cuBLASLt has no ") + symbol;
  return fn != nullptr;
}

Loaded load() {
  Loaded l;
  // The toolkit's library this was built against first, then the loader's
  // search path (a machine with the runtime libraries only).
  void *lib = dlopen(DSC_CUBLASLT_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    lib = dlopen("libcublasLt.so." DSC_CUDA_MAJOR, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    l.error = std::string("cannot load cuBLASLt: ") + dlerror();
    return l;
  }
  CublasLtApi &a = l.api;
  std::string &e = l.error;
  bool ok =
      bind(lib, "cublasLtCreate", a.create, e) &&
      bind(lib, "cublasLtDestroy", a.destroy, e) &&
      bind(lib, "cublasLtGetStatusString", a.statusString, e) &&
      bind(lib, "cublasLtMatmulDescCreate", a.descCreate, e) &&
      bind(lib, "cublasLtMatmulDescSetAttribute", a.descSetAttribute, e) &&
      bind(lib, "cublasLtMatrixLayoutCreate", a.layoutCreate, e) &&
      bind(lib, "cublasLtMatrixLayoutSetAttribute", a.layoutSetAttribute, e) &&
      bind(lib, "cublasLtMatmulPreferenceCreate", a.preferenceCreate, e) &&
      bind(lib, "cublasLtMatmulPreferenceSetAttribute",
           a.preferenceSetAttribute, e) &&
      bind(lib, "cublasLtMatmulPreferenceDestroy", a.preferenceDestroy, e) &&
      bind(lib, "cublasLtMatmulAlgoGetHeuristic", a.algoGetHeuristic, e) &&
      bind(lib, "cublasLtMatmul", a.matmul, e);
  if (!ok)
    a = CublasLtApi{};
  return l;
}

} // namespace

const CublasLtApi *cublasLt(std::string &err) {
  static const Loaded loaded = load();
  if (!loaded.error.empty()) {
    err = loaded.error;
    return nullptr;
  }
  return &loaded.api;
}

} // namespace dsc::rt::cuda
