//===- CublasLt.h - cuBLASLt, loaded when the backend starts ----*- C++ -*-===//
//
// libcublasLt is ~500 MB of GPU code: linked, it costs every process that
// links the CUDA backend (dsrun, the tests, the Python module) ~0.1 s and
// ~200 MB of resident memory at start, GPU or not, and dsrun's peak memory
// is something users compare with dsc's prediction. So it is opened with
// dlopen by the first CUDA backend created, as the CPU backend opens
// OpenBLAS; the prototypes come from <cublasLt.h>.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CUDA_CUBLASLT_H
#define DSC_RUNTIME_BACKENDS_CUDA_CUBLASLT_H

#include <cublasLt.h>

#include <string>

namespace dsc::rt::cuda {

struct CublasLtApi {
  decltype(&cublasLtCreate) create;
  decltype(&cublasLtDestroy) destroy;
  decltype(&cublasLtGetStatusString) statusString;
  decltype(&cublasLtMatmulDescCreate) descCreate;
  decltype(&cublasLtMatmulDescSetAttribute) descSetAttribute;
  decltype(&cublasLtMatrixLayoutCreate) layoutCreate;
  decltype(&cublasLtMatrixLayoutSetAttribute) layoutSetAttribute;
  decltype(&cublasLtMatmulPreferenceCreate) preferenceCreate;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preferenceSetAttribute;
  decltype(&cublasLtMatmulPreferenceDestroy) preferenceDestroy;
  decltype(&cublasLtMatmulAlgoGetHeuristic) algoGetHeuristic;
  decltype(&cublasLtMatmul) matmul;
};

/// The library's entry points, loaded on the first call; null with one line
/// in `err` when it cannot be loaded.
const CublasLtApi *cublasLt(std::string &err);

} // namespace dsc::rt::cuda

#endif // DSC_RUNTIME_BACKENDS_CUDA_CUBLASLT_H
