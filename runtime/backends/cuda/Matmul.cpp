//===- Matmul.cpp - ds.matmul through cuBLASLt ----------------------------===//
//
// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, so each
// call hands cuBLASLt b as its A and a as its B with the same transpose
// flags and m = N, n = M. Operands are all f32 (TF32 only when the handles
// allow it, so f32 plans compute in full f32 as on the CPU), or all bf16 or
// all f16 with an output of the same type or f32; accumulation is f32.
// Like the CPU backend, an untransposed a against one b (a linear layer)
// folds a's batch into M; other batches run as one strided-batch call when
// the batch is one dim (or folds into one), else one call per batch.
// cuBLASLt's algorithm is asked for once per shape (the first, eager run of
// a program, before it is captured) and kept.
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CublasLt.h"
#include "runtime/backends/cuda/CudaHandles.h"
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/kernels/KernelChecks.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <tuple>

namespace dsc::rt::cuda {
namespace {

cudaDataType_t cudaTypeOf(DType t) {
  switch (t) {
  case DType::f16:
    return CUDA_R_16F;
  case DType::bf16:
    return CUDA_R_16BF;
  default:
    return CUDA_R_32F;
  }
}

// Only called once the backend exists, so cuBLASLt is loaded.
const CublasLtApi &api() {
  std::string unused;
  return *cublasLt(unused);
}

bool ltOk(cublasStatus_t status, std::string &err, const char *what) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return true;
  return fail(err, what, ": ", api().statusString(status));
}

/// One GEMM shape: column-major m x n = op(A) [m x k] op(B) [k x n], with a
/// strided batch.
struct Gemm {
  bool transA, transB; // cuBLASLt's A (our b) and B (our a)
  int64_t m, n, k, lda, ldb, ldc;
  int64_t batch, strideA, strideB, strideC;
  DType in, out;
  bool tf32;
  /// The operands' alignment in bytes (a power of two, at most 256):
  /// cuBLASLt assumes 256 unless told, and plan buffers are packed to
  /// their element size only.
  uint32_t alignA = 256, alignB = 256, alignC = 256;
  auto key() const {
    return std::make_tuple(transA, transB, m, n, k, lda, ldb, ldc, batch,
                           strideA, strideB, strideC, int(in), int(out), tf32,
                           alignA, alignB, alignC);
  }
};

/// The largest power of two <= 256 dividing the address and every batch
/// step's byte offset.
uint32_t alignmentOf(const void *p, int64_t strideBytes) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | uint64_t(strideBytes) | 256;
  return uint32_t(bits & (~bits + 1)); // the lowest set bit
}

/// The descriptors and the chosen algorithm of one Gemm.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

class PlanCache {
public:
  /// The plan for `g` on `lt` (made on first use); null with err.
  const Plan *get(cublasLtHandle_t lt, const Gemm &g, size_t workspace,
                  std::string &err) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto key = std::make_tuple(static_cast<void *>(lt), g.key());
    auto it = plans_.find(key);
    if (it != plans_.end())
      return &it->second;
    Plan p;
    if (!make(lt, g, workspace, p, err))
      return nullptr;
    return &plans_.emplace(key, p).first->second;
  }

private:
  static bool layout(cublasLtMatrixLayout_t &l, cudaDataType_t type,
                     int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                     int64_t stride, std::string &err) {
    if (!ltOk(api().layoutCreate(&l, type, uint64_t(rows), uint64_t(cols), ld),
              err, "cublasLtMatrixLayoutCreate"))
      return false;
    if (batch == 1)
      return true;
    int32_t count = int32_t(batch);
    return ltOk(api().layoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                         &count, sizeof count),
                err, "cublasLtMatrixLayoutSetAttribute") &&
           ltOk(api().layoutSetAttribute(
                    l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                    sizeof stride),
                err, "cublasLtMatrixLayoutSetAttribute");
  }

  static bool make(cublasLtHandle_t lt, const Gemm &g, size_t workspace,
                   Plan &p, std::string &err) {
    cublasComputeType_t compute = g.in == DType::f32 && g.tf32
                                      ? CUBLAS_COMPUTE_32F_FAST_TF32
                                      : CUBLAS_COMPUTE_32F;
    cublasOperation_t opA = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opB = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (!ltOk(api().descCreate(&p.desc, compute, CUDA_R_32F), err,
              "cublasLtMatmulDescCreate") ||
        !ltOk(api().descSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA,
                                     sizeof opA),
              err, "cublasLtMatmulDescSetAttribute") ||
        !ltOk(api().descSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB,
                                     sizeof opB),
              err, "cublasLtMatmulDescSetAttribute"))
      return false;
    const cudaDataType_t in = cudaTypeOf(g.in), out = cudaTypeOf(g.out);
    if (!layout(p.a, in, g.transA ? g.k : g.m, g.transA ? g.m : g.k, g.lda,
                g.batch, g.strideA, err) ||
        !layout(p.b, in, g.transB ? g.n : g.k, g.transB ? g.k : g.n, g.ldb,
                g.batch, g.strideB, err) ||
        !layout(p.c, out, g.m, g.n, g.ldc, g.batch, g.strideC, err))
      return false;
    cublasLtMatmulPreference_t pref = nullptr;
    if (!ltOk(api().preferenceCreate(&pref), err,
              "cublasLtMatmulPreferenceCreate"))
      return false;
    api().preferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                 &workspace, sizeof workspace);
    const cublasLtMatmulPreferenceAttributes_t aligns[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    const uint32_t values[] = {g.alignA, g.alignB, g.alignC, g.alignC};
    for (int i = 0; i < 4; ++i)
      api().preferenceSetAttribute(pref, aligns[i], &values[i],
                                   sizeof values[i]);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t status = api().algoGetHeuristic(
        lt, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
    api().preferenceDestroy(pref);
    if (!ltOk(status, err, "cublasLtMatmulAlgoGetHeuristic"))
      return false;
    if (found == 0)
      return fail(err, "cuBLASLt has no algorithm for this shape");
    p.algo = result.algo;
    return true;
  }

  std::mutex mutex_;
  std::map<std::tuple<void *, decltype(Gemm{}.key())>, Plan> plans_;
};

PlanCache &planCache() {
  static PlanCache *cache = new PlanCache(); // lives as long as the process
  return *cache;
}

bool dtypesOk(const TensorRef &a, const TensorRef &b, const TensorRef &out,
              std::string &err) {
  bool half = a.dtype == DType::f16 || a.dtype == DType::bf16;
  if ((a.dtype == DType::f32 || half) && b.dtype == a.dtype &&
      (out.dtype == a.dtype || (half && out.dtype == DType::f32)))
    return true;
  return fail(err, "unsupported dtypes ", dtypeName(a.dtype), ", ",
              dtypeName(b.dtype), " -> ", dtypeName(out.dtype),
              " (expected all f32, or a and b both f16 or both bf16 with an "
              "output of theirs or f32)");
}

bool runGemm(const KernelArgs &args, Gemm g, const void *a, const void *b,
             void *c, std::string &err) {
  const int64_t inSize = int64_t(dtypeSize(g.in)),
                outSize = int64_t(dtypeSize(g.out));
  g.alignA = alignmentOf(a, g.strideA * inSize);
  g.alignB = alignmentOf(b, g.strideB * inSize);
  g.alignC = alignmentOf(c, g.strideC * outSize);
  auto *h = static_cast<const CudaHandles *>(args.ctx->handles);
  auto handle = static_cast<cublasLtHandle_t>(h->lt);
  const Plan *p = planCache().get(handle, g, h->workspaceBytes, err);
  if (!p)
    return false;
  const float one = 1.0f, zero = 0.0f;
  return ltOk(api().matmul(handle, p->desc, &one, a, p->a, b, p->b, &zero, c,
                           p->c, c, p->c, &p->algo, h->workspace,
                           h->workspaceBytes,
                           static_cast<cudaStream_t>(args.ctx->stream)),
              err, "cublasLtMatmul");
}

} // namespace

bool matmulBody(const KernelArgs &args, std::string &err) {
  const TensorRef &a = args.inputs[0], &b = args.inputs[1];
  const TensorRef &out = args.outputs[0];
  MatmulShape s;
  if (!dtypesOk(a, b, out, err) || !checkMatmul(args, s, err))
    return false;
  if (!args.ctx || !args.ctx->handles)
    return fail(err, "needs the CUDA backend's cuBLASLt handle");
  if (out.numel() == 0)
    return true;
  const size_t inSize = dtypeSize(a.dtype), outSize = dtypeSize(out.dtype);
  if (s.K == 0) {
    return zeroOnStream(out.data, size_t(out.numel()) * outSize,
                        args.ctx->stream, err);
  }
  const bool tf32 =
      static_cast<const CudaHandles *>(args.ctx->handles)->allowTf32;
  // Column-major view: cuBLASLt's A is our b (N x K), its B our a (K x M).
  Gemm g{};
  g.transA = s.transB;
  g.transB = s.transA;
  g.m = s.N;
  g.n = s.M;
  g.k = s.K;
  g.lda = s.transB ? s.K : s.N;
  g.ldb = s.transA ? s.M : s.K;
  g.ldc = s.N;
  g.batch = 1;
  g.in = a.dtype;
  g.out = out.dtype;
  g.tf32 = tf32;
  const int64_t numBatchesB = b.numel() / (s.K * s.N);
  if (s.batchRank == 0)
    return runGemm(args, g, b.data, a.data, out.data, err);
  if (!s.transA && numBatchesB == 1) {
    g.n = s.M * s.numBatches; // every row of a against the one b
    return runGemm(args, g, b.data, a.data, out.data, err);
  }
  // The batch as (outer calls) x (one strided call over the innermost dim):
  // folding the innermost batch dims while their strides stay uniform.
  int inner = s.batchRank - 1;
  int64_t innerCount = s.batch[inner];
  const int64_t sa = s.strideA[inner], sb = s.strideB[inner];
  while (inner > 0 && s.strideA[inner - 1] == sa * innerCount &&
         s.strideB[inner - 1] == sb * innerCount) {
    --inner;
    innerCount *= s.batch[inner];
  }
  g.batch = innerCount;
  g.strideA = sb; // cuBLASLt's A is b
  g.strideB = sa;
  g.strideC = s.M * s.N;
  const auto *pa = static_cast<const char *>(a.data);
  const auto *pb = static_cast<const char *>(b.data);
  auto *pc = static_cast<char *>(out.data);
  int64_t idx[kMaxRank] = {0};
  int64_t offA = 0, offB = 0;
  const int64_t outer = s.numBatches / innerCount;
  for (int64_t i = 0; i < outer; ++i) {
    if (!runGemm(args, g, pb + offB * int64_t(inSize),
                 pa + offA * int64_t(inSize),
                 pc + i * innerCount * s.M * s.N * int64_t(outSize), err))
      return false;
    for (int d = inner - 1; d >= 0; --d) { // next outer batch, row-major
      offA += s.strideA[d];
      offB += s.strideB[d];
      if (++idx[d] < s.batch[d])
        break;
      offA -= s.strideA[d] * s.batch[d];
      offB -= s.strideB[d] * s.batch[d];
      idx[d] = 0;
    }
  }
  return true;
}

} // namespace dsc::rt::cuda
