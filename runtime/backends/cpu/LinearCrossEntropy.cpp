//===- LinearCrossEntropy.cpp - an LM head's loss and gradients in chunks -===//
//
// ds.linear_cross_entropy: chunk_rows rows of h at a time, their logits
// against the whole vocabulary by one sgemm into the chunk, each row's
// loss term and logit gradient in place (the same arithmetic as
// ds.cross_entropy and ds.cross_entropy_grad, Lookup.cpp), then dh's rows
// and dweight's share by two more sgemms, dweight summing the chunks in
// order. The loss sums its rows in the blocks ds.cross_entropy uses; the
// products have other shapes than the unfused ones (a BLAS may take
// another path for them), and dweight sums the chunks in order: close to
// the unfused ops, not bitwise.
//
// A 16-bit head (h and weight f16 or bf16) runs as the CPU's widened
// kernels do (Widening.h): h and weight widened to f32 once, each chunk's
// logits and then its gradient rounded to the head's dtype where the
// unfused ops' results would be (stored in the chunk, computed on from
// the rounded values), dh's rows rounded, dweight summed in f32. Where
// bf16 products run natively (OneDnn.cpp), as the unfused ds.matmul's do,
// a bf16 head's products take the bf16 operands as they are: no widened
// copies of h and weight.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/Convert.h"
#include "runtime/backends/cpu/CpuCommon.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace dsc::rt::cpu {
namespace {

// A tensor as f32: its own data, or (16-bit) a widened copy in `wide`.
const float *asF32(const TensorRef &t, std::vector<float> &wide) {
  if (t.dtype == DType::f32)
    return t.f32();
  wide.resize(size_t(t.numel()));
  return chunkAsF32(t.dtype, t.data, 0, t.numel(), wide.data());
}

// n values rounded to `dtype` (f16 or bf16) into `narrow`, and `wide` set
// to the rounded values.
void roundThrough(DType dtype, float *wide, void *narrow, int64_t n) {
  auto *bits = static_cast<uint16_t *>(narrow);
  if (dtype == DType::bf16) {
    f32ToBf16(wide, bits, n);
    bf16ToF32(bits, wide, n);
  } else {
    f32ToF16(wide, bits, n);
    f16ToF32(bits, wide, n);
  }
}

// A chunk's three products: sgemm on f32 operands (a 16-bit head's widened
// once), or, for a bf16 head where bf16 products run natively (OneDnn.cpp),
// oneDNN on the bf16 operands themselves, h, weight and the chunk's g as
// stored (already rounded to bf16, so the same values either way).
struct ChunkProducts {
  int64_t R, V, D;
  const float *h = nullptr, *w = nullptr; // sgemm
  const uint16_t *hBits = nullptr, *wBits = nullptr, *gBits = nullptr;

  bool native() const { return hBits != nullptr; }
  // logits [R, V] = h_c weight^T
  bool logits(int64_t c, float *chunk, std::string &err) const {
    if (native())
      return gemmBf16(false, true, R, V, D, hBits + c * R * D, D, wBits, D,
                      chunk, DType::f32, V, err);
    sgemm(false, true, R, V, D, 1.0f, h + c * R * D, D, w, D, 0.0f, chunk, V);
    return true;
  }
  // dh_c [R, D] = g weight
  bool dh(const float *g, float *dh, std::string &err) const {
    if (native())
      return gemmBf16(false, false, R, D, V, gBits, V, wBits, D, dh, DType::f32,
                      D, err);
    sgemm(false, false, R, D, V, 1.0f, g, V, w, D, 0.0f, dh, D);
    return true;
  }
  // dweight (+)= g^T h_c, the first chunk writing it
  bool dw(int64_t c, const float *g, float *dw, std::string &err) const {
    if (native())
      return gemmBf16(true, false, V, D, R, gBits, V, hBits + c * R * D, D, dw,
                      DType::f32, D, err, c > 0);
    sgemm(true, false, V, D, R, 1.0f, g, V, h + c * R * D, D, c ? 1.0f : 0.0f,
          dw, D);
    return true;
  }
};

// One row of logits, replaced by its gradient coef (softmax - onehot(t));
// returns the row's loss term.
double lossAndGradRow(float *row, int64_t V, int64_t t, double coef) {
  const float xt = row[t];
  return crossEntropyGradRow(row, row, V, t, coef) - double(xt);
}

} // namespace

bool linearCrossEntropyBody(const KernelArgs &a, std::string &err) {
  int64_t N, V, D, count;
  float g;
  const TensorRef &h = a.inputs[0], &weight = a.inputs[1];
  const TensorRef &targets = a.inputs[2];
  const int64_t ignore = a.intAttrs[0], R = a.intAttrs[1];
  if (!checkLinearCrossEntropy(err, a, N, V, D) ||
      !expectIndexDType(err, targets, "targets") ||
      !scalarOperand(err, a.inputs[3], "grad", g) ||
      !countTargets(err, targets, V, ignore, count))
    return false;
  if (std::max({R, V, D}) > blasIntMax())
    return fail(err, "a chunk of ", R, " x ", V, " x ", D,
                " exceeds the BLAS index range");
  const DType head = h.dtype;
  const bool narrow = head != DType::f32;
  const size_t width = dtypeSize(head);
  char *dhOut = static_cast<char *>(a.outputs[1].data);
  char *chunkOut = static_cast<char *>(a.outputs[3].data);
  float *dw = a.outputs[2].f32();
  if (N > 0 && V == 0)
    std::memset(dhOut, 0, size_t(N * D) * width);
  if (N == 0)
    std::memset(dw, 0, size_t(V * D) * sizeof(float));
  if (N == 0 || V == 0) { // no logits: every target was ignored
    *a.outputs[0].f32() = 0.0f;
    return true;
  }
  // D = 0: every logit is 0 (the products have nothing to sum), dh and
  // dweight are empty, and the loss and g are still the softmax's.
  if (D > 0 && !blasReady(err))
    return false;
  // The f32 operands: the head's own buffers, widened copies, or (native
  // bf16 products) none; 16-bit heads compute each chunk in f32 buffers
  // rounded into the 16-bit outputs.
  ChunkProducts products{R, V, D};
  std::vector<float> hWide, wWide, chunkWide, dhWide;
  if (head == DType::bf16 && weight.dtype == DType::bf16 && nativeBf16Gemm()) {
    products.hBits = static_cast<const uint16_t *>(h.data);
    products.wBits = static_cast<const uint16_t *>(weight.data);
    products.gBits = reinterpret_cast<const uint16_t *>(chunkOut);
  } else {
    products.h = asF32(h, hWide);
    products.w = asF32(weight, wWide);
  }
  if (narrow) {
    chunkWide.resize(size_t(R * V));
    dhWide.resize(size_t(R * D));
  }
  float *chunk = narrow ? chunkWide.data() : a.outputs[3].f32();
  const double coef = count ? double(g) / double(count) : 0.0;
  std::vector<double> rowLoss(size_t(N), 0.0);
  for (int64_t c = 0; c < N / R; ++c) {
    if (D > 0) {
      if (!products.logits(c, chunk, err))
        return false;
    } else
      std::memset(chunk, 0, size_t(R * V) * sizeof(float));
    if (narrow) // the logits as ds.matmul's 16-bit result
      roundThrough(head, chunk, chunkOut, R * V);
    parallelFor(
        R, std::max<int64_t>(1, 16384 / V), [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r) {
            float *row = chunk + r * V;
            const int64_t t = indexAt(targets, c * R + r);
            if (t == ignore)
              std::memset(row, 0, size_t(V) * sizeof(float));
            else
              rowLoss[size_t(c * R + r)] = lossAndGradRow(row, V, t, coef);
          }
        });
    if (narrow) // g as ds.cross_entropy_grad's 16-bit result
      roundThrough(head, chunk, chunkOut, R * V);
    if (D == 0)
      continue;
    float *dh = narrow ? dhWide.data() : a.outputs[1].f32() + c * R * D;
    if (!products.dh(chunk, dh, err))
      return false;
    if (narrow)
      roundThrough(head, dh, dhOut + size_t(c * R * D) * width, R * D);
    if (!products.dw(c, chunk, dw, err))
      return false;
  }
  // Summed as ds.cross_entropy sums its rows (an ignored row's term is 0).
  const double total =
      sumInRowBlocks(N, [&](int64_t r) { return rowLoss[size_t(r)]; });
  *a.outputs[0].f32() = count ? float(total / double(count)) : 0.0f;
  return true;
}

} // namespace dsc::rt::cpu
