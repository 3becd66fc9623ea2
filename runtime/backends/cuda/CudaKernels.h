//===- CudaKernels.h - the CUDA backend's kernel table ----------*- C++ -*-===//
//
// Internal to runtime/backends/cuda. Each kernel is a host function that
// checks its arguments (the same checks and lines as the CPU backend,
// runtime/kernels/KernelChecks.h), then enqueues its work on
// KernelContext::stream and returns: the executor, not the kernel, waits.
// Float operands may be f32, f16 or bf16 each, computed in f32.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CUDA_CUDAKERNELS_H
#define DSC_RUNTIME_BACKENDS_CUDA_CUDAKERNELS_H

#include "runtime/backends/Backend.h"
#include "runtime/kernels/Kernel.h"

#include <string>
#include <string_view>

namespace dsc::rt::cuda {

/// Every variant of `name` (empty when the CUDA backend has none yet).
KernelVariants cudaKernelVariants(std::string_view name);

// Kernel bodies, one file per family; errors without the "ds.x: " prefix.
// Elementwise.cu
bool addBody(const KernelArgs &, std::string &);
bool subBody(const KernelArgs &, std::string &);
bool mulBody(const KernelArgs &, std::string &);
bool divBody(const KernelArgs &, std::string &);
bool minimumBody(const KernelArgs &, std::string &);
bool maximumBody(const KernelArgs &, std::string &);
bool equalBody(const KernelArgs &, std::string &);
bool negBody(const KernelArgs &, std::string &);
bool expBody(const KernelArgs &, std::string &);
bool logBody(const KernelArgs &, std::string &);
bool tanhBody(const KernelArgs &, std::string &);
bool sqrtBody(const KernelArgs &, std::string &);
bool rsqrtBody(const KernelArgs &, std::string &);
bool reluBody(const KernelArgs &, std::string &);
bool siluBody(const KernelArgs &, std::string &);
bool geluBody(const KernelArgs &, std::string &);
bool reluGradBody(const KernelArgs &, std::string &);
bool siluGradBody(const KernelArgs &, std::string &);
bool geluGradBody(const KernelArgs &, std::string &);
bool biasGeluBody(const KernelArgs &, std::string &);
bool overflowGuardBody(const KernelArgs &, std::string &);
// Cast.cu
bool castBody(const KernelArgs &, std::string &);
bool copyBody(const KernelArgs &, std::string &);
bool fillBody(const KernelArgs &, std::string &);
// Random.cu
bool dropoutBody(const KernelArgs &, std::string &);
// Norms.cu
bool layerNormBody(const KernelArgs &, std::string &);
bool addLayerNormBody(const KernelArgs &, std::string &);
bool layerNormGradBody(const KernelArgs &, std::string &);
bool rmsNormBody(const KernelArgs &, std::string &);
bool rmsNormGradBody(const KernelArgs &, std::string &);
bool softmaxBody(const KernelArgs &, std::string &);
bool softmaxGradBody(const KernelArgs &, std::string &);
// Lookup.cu
bool embeddingBody(const KernelArgs &, std::string &);
bool embeddingGradBody(const KernelArgs &, std::string &);
bool crossEntropyBody(const KernelArgs &, std::string &);
bool crossEntropyGradBody(const KernelArgs &, std::string &);
// Shape.cu
bool transposeBody(const KernelArgs &, std::string &);
bool sliceBody(const KernelArgs &, std::string &);
bool padBody(const KernelArgs &, std::string &);
bool broadcastBody(const KernelArgs &, std::string &);
bool concatBody(const KernelArgs &, std::string &);
bool splitBody(const KernelArgs &, std::string &);
bool iotaBody(const KernelArgs &, std::string &);
// Reduce.cu
bool reduceSumBody(const KernelArgs &, std::string &);
bool reduceMeanBody(const KernelArgs &, std::string &);
bool reduceMaxBody(const KernelArgs &, std::string &);
// Optimizer.cu
bool adamwBody(const KernelArgs &, std::string &);
bool adamwRoundBody(const KernelArgs &, std::string &);
// Attention.cu
bool attentionBody(const KernelArgs &, std::string &);
bool attentionGradBody(const KernelArgs &, std::string &);
bool rotaryBody(const KernelArgs &, std::string &);
// Comm.cpp
bool commAllReduceBody(const KernelArgs &, std::string &);
bool commReduceScatterBody(const KernelArgs &, std::string &);
bool commAllGatherBody(const KernelArgs &, std::string &);
bool commBroadcastBody(const KernelArgs &, std::string &);
bool distShardBody(const KernelArgs &, std::string &);
/// data[i] *= scale on `stream` (Cast.cu), rounding once in the dtype.
bool scaleOnStream(void *data, DType dtype, int64_t n, float scale,
                   void *stream, std::string &err);
/// Zeroes `bytes` at `data` on `stream` (Cast.cu), device or pinned host.
bool zeroOnStream(void *data, size_t bytes, void *stream, std::string &err);
/// *word = value on `stream` once the work before it is done (Cast.cu);
/// `word` may be mapped pinned host memory, which the host then reads.
bool writeWordOnStream(uint32_t *word, uint32_t value, void *stream,
                       std::string &err);
// Matmul.cpp
bool matmulBody(const KernelArgs &, std::string &);
bool matmulBiasBody(const KernelArgs &, std::string &);
bool matmulBiasGeluBody(const KernelArgs &, std::string &);
bool matmulGeluGradBody(const KernelArgs &, std::string &);

} // namespace dsc::rt::cuda

#endif // DSC_RUNTIME_BACKENDS_CUDA_CUDAKERNELS_H
