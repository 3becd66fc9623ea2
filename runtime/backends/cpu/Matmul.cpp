//===- Matmul.cpp - ds.matmul through cblas_sgemm
//--------------------------===//
//
// a [..., M, K] ([..., K, M] with transpose_a), b [..., K, N] ([..., N, K]
// with transpose_b); batch dims broadcast. Without transpose_a, when b has
// no batch (a linear layer), the batch of a is folded into M: one sgemm over
// all rows. Otherwise one sgemm per output batch; OpenBLAS threads each.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/CpuCommon.h"

#include <algorithm>
#include <cstring>

namespace dsc::rt::cpu {

bool matmulBody(const KernelArgs &args, std::string &err) {
  if (!expectAllF32(args, err))
    return false;
  const TensorRef &a = args.inputs[0], &b = args.inputs[1];
  const TensorRef &out = args.outputs[0];
  const int64_t ta = args.intAttrs[0], tb = args.intAttrs[1];
  if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1))
    return fail(err, "transpose flags must be 0 or 1, got ", ta, " and ", tb);
  if (a.rank < 2 || b.rank < 2)
    return fail(err, "operands need rank >= 2, got ", shapeStr(a), " and ",
                shapeStr(b));
  int64_t M = a.dim(-2), K = a.dim(-1), Kb = b.dim(-2), N = b.dim(-1);
  if (ta)
    std::swap(M, K);
  if (tb)
    std::swap(Kb, N);
  if (K != Kb)
    return fail(err, "contraction dims differ: a ", shapeStr(a),
                ta ? " (transposed)" : "", " vs b ", shapeStr(b),
                tb ? " (transposed)" : "");
  // Broadcast batch dims; the output must be batch + [M, N].
  const int batchRank = std::max(a.rank, b.rank) - 2;
  int64_t batch[kMaxRank], strideA[kMaxRank], strideB[kMaxRank];
  int64_t numBatches = 1, accA = M * K, accB = K * N;
  for (int d = batchRank - 1; d >= 0; --d) {
    int ia = d - (batchRank - (a.rank - 2)),
        ib = d - (batchRank - (b.rank - 2));
    int64_t da = ia >= 0 ? a.shape[ia] : 1, db = ib >= 0 ? b.shape[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return fail(err, "batch dims of ", shapeStr(a), " and ", shapeStr(b),
                  " do not broadcast");
    batch[d] = da == 1 ? db : da;
    strideA[d] = da == 1 ? 0 : accA;
    strideB[d] = db == 1 ? 0 : accB;
    accA *= da;
    accB *= db;
    numBatches *= batch[d];
  }
  bool shapeOk = out.rank == batchRank + 2 && out.dim(-2) == M &&
                 out.dim(-1) == N &&
                 std::equal(batch, batch + batchRank, out.shape);
  if (!shapeOk) {
    std::vector<int64_t> want(batch, batch + batchRank);
    want.push_back(M);
    want.push_back(N);
    return fail(err, "output has shape ", shapeStr(out), " but ", shapeStr(a),
                " x ", shapeStr(b), " gives ",
                listStr(want.data(), want.size()));
  }
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

} // namespace dsc::rt::cpu
