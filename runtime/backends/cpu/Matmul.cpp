//===- Matmul.cpp - ds.matmul through cblas_sgemm (bf16: oneDNN) ---------===//
//
// a [..., M, K] ([..., K, M] with transpose_a), b [..., K, N] ([..., N, K]
// with transpose_b); batch dims broadcast. Without transpose_a, when b has
// no batch (a linear layer), the batch of a is folded into M: one sgemm over
// all rows. Otherwise one sgemm per output batch; OpenBLAS threads each.
// bf16 operands take the same GEMMs through oneDNN's bf16 matmul where the
// CPU runs it well (OneDnn.cpp), widened to sgemm otherwise.
//
// ds.matmul_bias and ds.matmul_bias_gelu run the same sgemm and then the
// bias (and GELU) as ds.add and ds.bias_gelu would, over the result in
// place: the same bits as unfused. (Folding the bias into sgemm's C with
// beta = 1 would add it before the K blocks' partial sums, not after.)
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/backends/cpu/Widening.h"

#include <algorithm>
#include <cstring>

namespace dsc::rt::cpu {
namespace {

/// The GEMMs of a checked product: gemm(rows, aOffset, bOffset, cOffset)
/// (offsets in elements) for each, C's rows N apart. Without transpose_a
/// and with one rhs matrix (a linear layer), one GEMM over every row of a;
/// otherwise one per output batch.
template <class Gemm>
bool eachGemm(const MatmulShape &m, const TensorRef &a, const TensorRef &b,
              std::string &err, Gemm gemm) {
  const int64_t M = m.M, N = m.N, K = m.K, numBatches = m.numBatches;
  const int64_t numBatchesB = b.numel() / (K * N);
  const int64_t limit = blasIntMax();
  if (!m.transA && numBatchesB == 1 && numBatches * M <= limit &&
      std::max({K, N}) <= limit)
    return gemm(numBatches * M, 0, 0, 0);
  if (std::max({M, N, K}) > limit)
    return fail(err, "a matrix of ", shapeStr(a), " x ", shapeStr(b),
                " exceeds the BLAS index range");
  int64_t idx[kMaxRank] = {0};
  int64_t offA = 0, offB = 0;
  for (int64_t i = 0; i < numBatches; ++i) {
    if (!gemm(M, offA, offB, i * M * N))
      return false;
    // Advance the batch index (row-major) and the operand offsets.
    for (int d = m.batchRank - 1; d >= 0; --d) {
      offA += m.strideA[d];
      offB += m.strideB[d];
      if (++idx[d] < m.batch[d])
        break;
      offA -= m.strideA[d] * m.batch[d];
      offB -= m.strideB[d] * m.batch[d];
      idx[d] = 0;
    }
  }
  return true;
}

} // namespace

bool matmulBody(const KernelArgs &args, std::string &err) {
  if (!expectAllF32(args, err))
    return false;
  MatmulShape m;
  if (!checkMatmul(args, m, err))
    return false;
  const TensorRef &a = args.inputs[0], &b = args.inputs[1];
  const TensorRef &out = args.outputs[0];
  float *c = out.f32();
  if (out.numel() == 0)
    return true;
  if (m.K == 0) {
    std::memset(c, 0, size_t(out.numel()) * sizeof(float));
    return true;
  }
  if (!blasReady(err))
    return false;
  const int64_t lda = m.transA ? m.M : m.K, ldb = m.transB ? m.K : m.N;
  return eachGemm(m, a, b, err,
                  [&](int64_t rows, int64_t offA, int64_t offB, int64_t offC) {
                    sgemm(m.transA, m.transB, rows, m.N, m.K, 1.0f,
                          a.f32() + offA, lda, b.f32() + offB, ldb, 0.0f,
                          c + offC, m.N);
                    return true;
                  });
}

bool halfMatmulBody(const KernelArgs &args, std::string &err) {
  const TensorRef &a = args.inputs[0], &b = args.inputs[1];
  const TensorRef &out = args.outputs[0];
  if (a.dtype != DType::bf16 || b.dtype != DType::bf16 ||
      (out.dtype != DType::bf16 && out.dtype != DType::f32) ||
      !nativeBf16Gemm())
    return runWidened(&matmulBody, args, err);
  MatmulShape m;
  if (!checkMatmul(args, m, err))
    return false;
  const size_t cBytes = out.dtype == DType::f32 ? 4 : 2;
  auto *c = static_cast<char *>(out.data);
  if (out.numel() == 0)
    return true;
  if (m.K == 0) {
    std::memset(c, 0, size_t(out.numel()) * cBytes);
    return true;
  }
  const auto *A = static_cast<const uint16_t *>(a.data);
  const auto *B = static_cast<const uint16_t *>(b.data);
  const int64_t lda = m.transA ? m.M : m.K, ldb = m.transB ? m.K : m.N;
  std::string why;
  if (eachGemm(m, a, b, why,
               [&](int64_t rows, int64_t offA, int64_t offB, int64_t offC) {
                 return gemmBf16(m.transA, m.transB, rows, m.N, m.K, A + offA,
                                 lda, B + offB, ldb, c + offC * cBytes,
                                 out.dtype, m.N, why);
               }))
    return true;
  // A shape oneDNN makes no primitive for (none seen) is widened instead:
  // every product it had written is written again.
  return runWidened(&matmulBody, args, err);
}

namespace {
/// The product into the first output (ds.matmul_bias_gelu's `sum`), then
/// `epilogue` (ds.add or ds.bias_gelu) over it in place.
bool productThen(Body epilogue, const KernelArgs &args, std::string &err) {
  MatmulShape m;
  if (!expectAllF32(args, err) || !checkMatmulBias(args, m, err) ||
      !matmulBody(matmulProductArgs(args, args.outputs), err))
    return false;
  TensorRef ins[2];
  return epilogue(matmulEpilogueArgs(args, ins), err);
}
} // namespace

bool matmulBiasBody(const KernelArgs &args, std::string &err) {
  return productThen(&addBody, args, err);
}

bool matmulBiasGeluBody(const KernelArgs &args, std::string &err) {
  return productThen(&biasGeluBody, args, err);
}

bool matmulGeluGradBody(const KernelArgs &args, std::string &err) {
  // The product lands in `grad`; ds.gelu_grad then scales it in place and
  // ds.reduce_sum sums its rows into dbias, in the same pass.
  MatmulShape m;
  if (!expectAllF32(args, err) || !checkMatmulGeluGrad(args, m, err) ||
      !matmulBody(matmulProductArgs(args, args.outputs), err))
    return false;
  TensorRef ins[2];
  if (args.outputs[1].numel() == 1) {
    // One column is a row reduction to reduce_sum, summed in another order.
    int64_t axes[kMaxRank];
    return geluGradBody(geluGradStepArgs(args, ins), err) &&
           reduceSumBody(biasGradStepArgs(args, axes), err);
  }
  return geluGradColumnSums(geluGradStepArgs(args, ins), args.outputs[1], err);
}

} // namespace dsc::rt::cpu
