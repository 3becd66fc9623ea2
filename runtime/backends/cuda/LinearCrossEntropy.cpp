//===- LinearCrossEntropy.cpp - an LM head's loss and gradients in chunks -===//
//
// ds.linear_cross_entropy on the GPU, as the CPU backend runs it: chunk_rows
// rows of h at a time, their logits against the whole vocabulary by one
// cuBLASLt product into the chunk, the rows' loss terms and logit gradients
// in place by the cross-entropy row kernels (Lookup.cu), then dh's rows
// and dweight's share (accumulated with beta = 1 after the first chunk).
// The loss is summed chunk by chunk in f32, each chunk's terms in f64.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/kernels/KernelChecks.h"

namespace dsc::rt::cuda {

bool linearCrossEntropyBody(const KernelArgs &a, std::string &err) {
  int64_t N, V, D;
  if (!checkLinearCrossEntropy(err, a, N, V, D) ||
      !expectIndexDType(err, a.inputs[2], "targets"))
    return false;
  if (!a.ctx)
    return fail(err, "needs the CUDA backend's stream");
  const int64_t ignore = a.intAttrs[0], R = a.intAttrs[1];
  const float *h = a.inputs[0].f32(), *w = a.inputs[1].f32();
  float *loss = a.outputs[0].f32(), *dh = a.outputs[1].f32();
  float *dw = a.outputs[2].f32(), *chunk = a.outputs[3].f32();
  void *stream = a.ctx->stream;
  if (!zeroOnStream(loss, sizeof(float), stream, err))
    return false;
  if (V == 0 || D == 0 || N == 0)
    return zeroOnStream(dh, size_t(N * D) * sizeof(float), stream, err) &&
           zeroOnStream(dw, size_t(V * D) * sizeof(float), stream, err);
  if (!validateLinearCrossEntropyTargets(a, V, ignore, err))
    return false;
  for (int64_t c = 0; c < N / R; ++c) {
    const float *hc = h + c * R * D;
    if (!gemmF32(a, {false, true, R, V, D, hc, D, w, D, 0.0f, chunk, V}, err) ||
        !lossAndGradChunk(a, chunk, c * R, R, V, loss, err) ||
        !gemmF32(
            a, {false, false, R, D, V, chunk, V, w, D, 0.0f, dh + c * R * D, D},
            err) ||
        !gemmF32(
            a, {true, false, V, D, R, chunk, V, hc, D, c ? 1.0f : 0.0f, dw, D},
            err))
      return false;
  }
  return true;
}

} // namespace dsc::rt::cuda
