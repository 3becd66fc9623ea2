//===- LinearCrossEntropy.cpp - an LM head's loss and gradients in chunks -===//
//
// ds.linear_cross_entropy on the GPU, as the CPU backend runs it: chunk_rows
// rows of h at a time, their logits against the whole vocabulary by one
// cuBLASLt product into the chunk, the rows' loss terms and logit gradients
// in place by the cross-entropy row kernels (Lookup.cu), then dh's rows
// and dweight's share (accumulated with beta = 1 after the first chunk).
// The loss is summed chunk by chunk in f32, each chunk's terms in f64.
//
// A 16-bit head (h and weight f16 or bf16) takes the same steps on 16-bit
// operands with f32 sums: the chunk holds the logits and then g in the
// head's dtype, as the unfused ops' results are; dh's rows come out in it;
// dweight, f32, sums the chunks' products before any rounding.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/kernels/KernelChecks.h"

namespace dsc::rt::cuda {

namespace {

// D = 0: each chunk's logits are zeros (the chunk, zeroed once and rezeroed
// after each chunk's gradient overwrote it), their rows' terms summed.
bool lossOfZeroLogits(const KernelArgs &a, void *chunk, int64_t N, int64_t R,
                      int64_t V, float *loss, std::string &err) {
  const size_t bytes = size_t(R * V) * dtypeSize(a.outputs[3].dtype);
  for (int64_t c = 0; c < N / R; ++c)
    if ((c > 0 && !zeroOnStream(chunk, bytes, a.ctx->stream, err)) ||
        !lossAndGradChunk(a, chunk, c * R, R, V, loss, err))
      return false;
  return true;
}

} // namespace

bool linearCrossEntropyBody(const KernelArgs &a, std::string &err) {
  int64_t N, V, D;
  if (!checkLinearCrossEntropy(err, a, N, V, D) ||
      !expectIndexDType(err, a.inputs[2], "targets"))
    return false;
  if (!a.ctx)
    return fail(err, "needs the CUDA backend's stream");
  const int64_t ignore = a.intAttrs[0], R = a.intAttrs[1];
  const DType head = a.inputs[0].dtype;
  const int64_t width = int64_t(dtypeSize(head));
  const char *h = static_cast<const char *>(a.inputs[0].data);
  const void *w = a.inputs[1].data;
  float *loss = a.outputs[0].f32(), *dw = a.outputs[2].f32();
  char *dh = static_cast<char *>(a.outputs[1].data);
  void *chunk = a.outputs[3].data;
  void *stream = a.ctx->stream;
  if (!zeroOnStream(loss, sizeof(float), stream, err))
    return false;
  // No logits (N or V zero): zero products; every target was ignored.
  if (V == 0 || N == 0)
    return zeroOnStream(dh, size_t(N * D * width), stream, err) &&
           zeroOnStream(dw, size_t(V * D) * sizeof(float), stream, err);
  if (!validateLinearCrossEntropyTargets(a, V, ignore, err))
    return false;
  if (D == 0) // every logit 0, dh and dweight empty: the softmax's loss
    return zeroOnStream(chunk, size_t(R * V * width), stream, err) &&
           lossOfZeroLogits(a, chunk, N, R, V, loss, err);
  for (int64_t c = 0; c < N / R; ++c) {
    const char *hc = h + c * R * D * width;
    // {transA, transB, M, N, K, A, lda, B, ldb, beta, C, ldc, in, out}
    const RowMajorGemm logits{false, true, R,    V,     D, hc,   D,
                              w,     D,    0.0f, chunk, V, head, head};
    const RowMajorGemm rowsOfDh{
        false, false, R,   D, V, chunk, V, w, D, 0.0f, dh + c * R * D * width,
        D,     head,  head};
    const RowMajorGemm shareOfDw{true,  false, V,    D,         R,
                                 chunk, V,     hc,   D,         c ? 1.0f : 0.0f,
                                 dw,    D,     head, DType::f32};
    if (!gemmRowMajor(a, logits, err) ||
        !lossAndGradChunk(a, chunk, c * R, R, V, loss, err) ||
        !gemmRowMajor(a, rowsOfDh, err) || !gemmRowMajor(a, shareOfDw, err))
      return false;
  }
  return true;
}

} // namespace dsc::rt::cuda
