//===- Matmul.cpp - ds.matmul through cblas_sgemm
//--------------------------===//
//
// a [..., M, K] ([..., K, M] with transpose_a), b [..., K, N] ([..., N, K]
// with transpose_b); batch dims broadcast. Without transpose_a, when b has
// no batch (a linear layer), the batch of a is folded into M: one sgemm over
// all rows. Otherwise one sgemm per output batch; OpenBLAS threads each.
//
// ds.matmul_bias and ds.matmul_bias_gelu run the same sgemm and then the
// bias (and GELU) as ds.add and ds.bias_gelu would, over the result in
// place: the same bits as unfused. (Folding the bias into sgemm's C with
// beta = 1 would add it before the K blocks' partial sums, not after.)
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/CpuCommon.h"

#include <algorithm>
#include <cstring>

namespace dsc::rt::cpu {

bool matmulBody(const KernelArgs &args, std::string &err) {
  if (!expectAllF32(args, err))
    return false;
  MatmulShape m;
  if (!checkMatmul(args, m, err))
    return false;
  const bool ta = m.transA, tb = m.transB;
  const int64_t M = m.M, N = m.N, K = m.K, numBatches = m.numBatches;
  const int batchRank = m.batchRank;
  const int64_t *batch = m.batch, *strideA = m.strideA, *strideB = m.strideB;
  const TensorRef &a = args.inputs[0], &b = args.inputs[1];
  const TensorRef &out = args.outputs[0];
  float *c = out.f32();
  if (out.numel() == 0)
    return true;
  if (K == 0) {
    std::memset(c, 0, size_t(out.numel()) * sizeof(float));
    return true;
  }
  if (!blasReady(err))
    return false;
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  const int64_t numBatchesB = b.numel() / (K * N);
  const int64_t limit = blasIntMax();
  // A 2-D rhs (or one whose batch dims are all 1) under an untransposed lhs:
  // every row of a against the same b.
  if (!ta && numBatchesB == 1 && numBatches * M <= limit &&
      std::max({K, N}) <= limit) {
    sgemm(false, tb, numBatches * M, N, K, 1.0f, a.f32(), lda, b.f32(), ldb,
          0.0f, c, N);
    return true;
  }
  if (std::max({M, N, K}) > limit)
    return fail(err, "a matrix of ", shapeStr(a), " x ", shapeStr(b),
                " exceeds the BLAS index range");
  int64_t idx[kMaxRank] = {0};
  int64_t offA = 0, offB = 0;
  for (int64_t i = 0; i < numBatches; ++i) {
    sgemm(ta, tb, M, N, K, 1.0f, a.f32() + offA, lda, b.f32() + offB, ldb, 0.0f,
          c + i * M * N, N);
    // Advance the batch index (row-major) and the operand offsets.
    for (int d = batchRank - 1; d >= 0; --d) {
      offA += strideA[d];
      offB += strideB[d];
      if (++idx[d] < batch[d])
        break;
      offA -= strideA[d] * batch[d];
      offB -= strideB[d] * batch[d];
      idx[d] = 0;
    }
  }
  return true;
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
  // ds.reduce_sum sums its rows into dbias.
  MatmulShape m;
  if (!expectAllF32(args, err) || !checkMatmulGeluGrad(args, m, err) ||
      !matmulBody(matmulProductArgs(args, args.outputs), err))
    return false;
  TensorRef ins[2];
  int64_t axes[kMaxRank];
  return geluGradBody(geluGradStepArgs(args, ins), err) &&
         reduceSumBody(biasGradStepArgs(args, axes), err);
}

} // namespace dsc::rt::cpu
