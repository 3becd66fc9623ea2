//===- CublasLt.cpp - cuBLASLt, loaded when the backend starts ------------===//
#include "runtime/backends/cuda/CublasLt.h"

#include "runtime/backends/cuda/SharedLibrary.h"

#ifndef DSC_CUBLASLT_PATH
#define DSC_CUBLASLT_PATH "libcublasLt.so"
#endif

namespace dsc::rt::cuda {
namespace {

struct Loaded {
  CublasLtApi api{};
  std::string error;
};

Loaded load() {
  Loaded l;
  // The toolkit's library this was built against first, then the loader's
  // search path (a machine with the runtime libraries only).
  void *lib = openLibrary({DSC_CUBLASLT_PATH, "libcublasLt.so." DSC_CUDA_MAJOR},
                          "cuBLASLt", l.error);
  if (!lib)
    return l;
  CublasLtApi &a = l.api;
  std::string &e = l.error;
  bool ok = bindSymbol(lib, "cublasLtCreate", a.create, "cuBLASLt", e) &&
            bindSymbol(lib, "cublasLtDestroy", a.destroy, "cuBLASLt", e) &&
            bindSymbol(lib, "cublasLtGetStatusString", a.statusString,
                       "cuBLASLt", e) &&
            bindSymbol(lib, "cublasLtMatmulDescCreate", a.descCreate,
                       "cuBLASLt", e) &&
            bindSymbol(lib, "cublasLtMatmulDescSetAttribute",
                       a.descSetAttribute, "cuBLASLt", e) &&
            bindSymbol(lib, "cublasLtMatrixLayoutCreate", a.layoutCreate,
                       "cuBLASLt", e) &&
            bindSymbol(lib, "cublasLtMatrixLayoutSetAttribute",
                       a.layoutSetAttribute, "cuBLASLt", e) &&
            bindSymbol(lib, "cublasLtMatmulPreferenceCreate",
                       a.preferenceCreate, "cuBLASLt", e) &&
            bindSymbol(lib, "cublasLtMatmulPreferenceSetAttribute",
                       a.preferenceSetAttribute, "cuBLASLt", e) &&
            bindSymbol(lib, "cublasLtMatmulPreferenceDestroy",
                       a.preferenceDestroy, "cuBLASLt", e) &&
            bindSymbol(lib, "cublasLtMatmulAlgoGetHeuristic",
                       a.algoGetHeuristic, "cuBLASLt", e) &&
            bindSymbol(lib, "cublasLtMatmul", a.matmul, "cuBLASLt", e);
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
