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
// ds.matmul_bias and ds.matmul_bias_gelu use cuBLASLt's epilogues where one
// call computes the whole output: BIAS (the bias is cuBLASLt's per-row
// vector, rows being our N) and, for the tanh GELU, GELU_AUX_BIAS (D the
// GELU, the aux matrix the pre-activation `sum`, its leading dimension a
// multiple of 8). The epilogue adds the bias to the f32 accumulator before
// rounding, where the CPU rounds the product first: a difference of one
// rounding in 16-bit plans. Elsewhere (batched products, erf GELU, a shape
// cuBLASLt has no epilogue algorithm for) the product is written first and
// ds.add's or ds.bias_gelu's kernel finishes it in place.
//
// ds.matmul_gelu_grad is the product, then ds.gelu_grad's and
// ds.reduce_sum's kernels. Not cuBLASLt's DGELU_BGRAD epilogue: on the
// H200 (CUDA 13.0, 2026-12-04) its GELU derivative was off by up to 5e-5
// relative, where dsc's kernels are within a few ulp of the float64
// reference (the conformance suite's GeluGradEpilogueMatchesItsThreeSteps).
//
//===----------------------------------------------------------------------===//
#include "runtime/backends/cuda/CublasLt.h"
#include "runtime/backends/cuda/CudaHandles.h"
#include "runtime/backends/cuda/CudaKernels.h"
#include "runtime/kernels/KernelChecks.h"

#include <cuda_runtime_api.h>

#include <cstdio>

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
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  int64_t auxLd = 0; // the aux matrix's leading dimension, in elements
  /// The operands' alignment in bytes (a power of two, at most 256):
  /// cuBLASLt assumes 256 unless told, and plan buffers are packed to
  /// their element size only.
  uint32_t alignA = 256, alignB = 256, alignC = 256;
  uint32_t alignBias = 256, alignAux = 256;
  auto key() const {
    return std::make_tuple(transA, transB, m, n, k, lda, ldb, ldc, batch,
                           strideA, strideB, strideC, int(in), int(out), tf32,
                           alignA, alignB, alignC, int(epilogue), auxLd,
                           alignBias, alignAux);
  }
};

/// Whether the epilogue reads or writes the aux matrix (the GELU's input).
bool usesAux(cublasLtEpilogue_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}

/// The epilogue's operands: bias [m] (cuBLASLt's rows) and the aux matrix.
struct EpilogueData {
  const void *bias = nullptr;
  void *aux = nullptr;
};

/// The largest power of two <= 256 dividing the address and every batch
/// step's byte offset.
uint32_t alignmentOf(const void *p, int64_t strideBytes) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | uint64_t(strideBytes) | 256;
  return uint32_t(bits & (~bits + 1)); // the lowest set bit
}

/// Says once per shape that an epilogue runs unfused: a first run on a new
/// GPU or cuBLASLt should show it, since it costs a pass over the output.
void noteUnfused(const Gemm &g) {
  const char *name = g.epilogue == CUBLASLT_EPILOGUE_BIAS ? "BIAS"
                     : g.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                         ? "GELU_AUX_BIAS"
                         : "an";
  std::fprintf(stderr,
               "dsrun: note: cuBLASLt has no %s epilogue for the %s product "
               "m=%lld n=%lld k=%lld (its order); it runs unfused\n",
               name, dtypeName(g.in), (long long)g.m, (long long)g.n,
               (long long)g.k);
}

/// The descriptors and the chosen algorithm of one Gemm.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false; // false: an epilogue cuBLASLt has no algorithm for
};

class PlanCache {
public:
  /// The plan for `g` on `lt` (made on first use; its epilogue pointers
  /// set to `e`'s), or null with err. The plan is the caller's until
  /// `release`: its descriptor carries this call's pointers.
  Plan *acquire(cublasLtHandle_t lt, const Gemm &g, const EpilogueData &e,
                size_t workspace, std::string &err) {
    mutex_.lock();
    auto key = std::make_tuple(static_cast<void *>(lt), g.key());
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      Plan p;
      if (!make(lt, g, e, workspace, p, err)) {
        mutex_.unlock();
        return nullptr;
      }
      it = plans_.emplace(key, p).first;
      if (!p.found && g.epilogue != CUBLASLT_EPILOGUE_DEFAULT)
        noteUnfused(g);
    }
    if (it->second.found && g.epilogue != CUBLASLT_EPILOGUE_DEFAULT &&
        !setPointers(it->second.desc, g, e, err)) {
      mutex_.unlock();
      return nullptr;
    }
    return &it->second;
  }
  void release() { mutex_.unlock(); }

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

  static bool setPointers(cublasLtMatmulDesc_t desc, const Gemm &g,
                          const EpilogueData &e, std::string &err) {
    if (!ltOk(api().descSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                     &e.bias, sizeof e.bias),
              err, "cublasLtMatmulDescSetAttribute"))
      return false;
    if (!usesAux(g.epilogue))
      return true;
    return ltOk(
        api().descSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                               &e.aux, sizeof e.aux),
        err, "cublasLtMatmulDescSetAttribute");
  }

  static bool setEpilogue(cublasLtMatmulDesc_t desc, const Gemm &g,
                          const EpilogueData &e, std::string &err) {
    const cudaDataType_t biasType = cudaTypeOf(g.out);
    if (!ltOk(api().descSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                     &g.epilogue, sizeof g.epilogue),
              err, "cublasLtMatmulDescSetAttribute") ||
        !ltOk(api().descSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                     &biasType, sizeof biasType),
              err, "cublasLtMatmulDescSetAttribute"))
      return false;
    if (usesAux(g.epilogue) &&
        !ltOk(api().descSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                     &g.auxLd, sizeof g.auxLd),
              err, "cublasLtMatmulDescSetAttribute"))
      return false;
    // The heuristic reads the pointers' alignment.
    return setPointers(desc, g, e, err);
  }

  static bool make(cublasLtHandle_t lt, const Gemm &g, const EpilogueData &e,
                   size_t workspace, Plan &p, std::string &err) {
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
    // A cuBLASLt that refuses the epilogue's attributes: the plain path.
    if (g.epilogue != CUBLASLT_EPILOGUE_DEFAULT &&
        !setEpilogue(p.desc, g, e, err)) {
      err.clear();
      return true;
    }
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
    // An epilogue cuBLASLt cannot do here is not an error: the caller
    // computes the product plain and finishes it with kernels of its own.
    // (Which status a refused epilogue gets varies by version.)
    const bool optional = g.epilogue != CUBLASLT_EPILOGUE_DEFAULT;
    if (optional && (status != CUBLAS_STATUS_SUCCESS || found == 0))
      return true;
    if (!ltOk(status, err, "cublasLtMatmulAlgoGetHeuristic"))
      return false;
    if (found == 0)
      return fail(err, "cuBLASLt has no algorithm for this shape");
    p.algo = result.algo;
    p.found = true;
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

/// Enqueues `g` on the args' stream; `ran` false (and no error) when `g`
/// asks for an epilogue cuBLASLt has no algorithm for.
bool runGemm(const KernelArgs &args, Gemm g, const void *a, const void *b,
             void *c, std::string &err, const EpilogueData &e = {},
             bool *ran = nullptr, float beta = 0.0f) {
  const int64_t inSize = int64_t(dtypeSize(g.in)),
                outSize = int64_t(dtypeSize(g.out));
  g.alignA = alignmentOf(a, g.strideA * inSize);
  g.alignB = alignmentOf(b, g.strideB * inSize);
  g.alignC = alignmentOf(c, g.strideC * outSize);
  if (g.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    g.alignBias = alignmentOf(e.bias, 0);
    g.alignAux = e.aux ? alignmentOf(e.aux, 0) : 256;
  }
  auto *h = static_cast<const CudaHandles *>(args.ctx->handles);
  auto handle = static_cast<cublasLtHandle_t>(h->lt);
  Plan *p = planCache().acquire(handle, g, e, h->workspaceBytes, err);
  if (!p)
    return false;
  if (ran)
    *ran = p->found;
  bool ok = true;
  if (p->found) {
    const float one = 1.0f;
    ok = ltOk(api().matmul(handle, p->desc, &one, a, p->a, b, p->b, &beta, c,
                           p->c, c, p->c, &p->algo, h->workspace,
                           h->workspaceBytes,
                           static_cast<cudaStream_t>(args.ctx->stream)),
              err, "cublasLtMatmul");
  }
  planCache().release();
  return ok;
}

/// Whether one call computes the whole product: no batch, or an
/// untransposed a against one b (a linear layer).
bool singleCall(const KernelArgs &args, const MatmulShape &s) {
  const int64_t numBatchesB = args.inputs[1].numel() / (s.K * s.N);
  return s.batchRank == 0 || (!s.transA && numBatchesB == 1);
}

/// The column-major view of row-major C [M x N] = op(a) op(b), one call:
/// C^T = op(b)^T op(a)^T, so cuBLASLt's A is our b and its B our a.
Gemm columnMajorView(const KernelArgs &args, bool transA, bool transB,
                     int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
                     int64_t ldc) {
  Gemm g{};
  g.transA = transB;
  g.transB = transA;
  g.m = N;
  g.n = M;
  g.k = K;
  g.lda = ldb;
  g.ldb = lda;
  g.ldc = ldc;
  g.batch = 1;
  g.tf32 = static_cast<const CudaHandles *>(args.ctx->handles)->allowTf32;
  return g;
}

/// One product of the plan's matmul: n covers a's whole batch when
/// singleCall says so.
Gemm oneGemm(const KernelArgs &args, const MatmulShape &s) {
  Gemm g = columnMajorView(args, s.transA, s.transB, s.M, s.N, s.K,
                           s.transA ? s.M : s.K, s.transB ? s.K : s.N, s.N);
  g.in = args.inputs[0].dtype;
  g.out = args.outputs[0].dtype;
  if (s.batchRank > 0 && singleCall(args, s))
    g.n = s.M * s.numBatches; // every row of a against the one b
  return g;
}

/// The checks ds.matmul_bias(_gelu) share with ds.matmul, the bias's too;
/// every operand in the product's dtype.
bool checkFused(const KernelArgs &args, MatmulShape &s, std::string &err) {
  const TensorRef &product = args.outputs[0];
  if (!dtypesOk(args.inputs[0], args.inputs[1], product, err))
    return false;
  for (const TensorRef *t :
       {&args.inputs[2], &args.outputs[args.numOutputs - 1]})
    if (t->dtype != product.dtype)
      return fail(err, "bias and outputs must share the product's dtype ",
                  dtypeName(product.dtype));
  if (!checkMatmulBias(args, s, err))
    return false;
  if (!args.ctx || !args.ctx->handles)
    return fail(err, "needs the CUDA backend's cuBLASLt handle");
  return true;
}

} // namespace

bool gemmRowMajor(const KernelArgs &args, const RowMajorGemm &p,
                  std::string &err) {
  if (!args.ctx || !args.ctx->handles)
    return fail(err, "needs the CUDA backend's cuBLASLt handle");
  Gemm g = columnMajorView(args, p.transA, p.transB, p.M, p.N, p.K, p.lda,
                           p.ldb, p.ldc);
  g.in = p.in;
  g.out = p.out;
  return runGemm(args, g, p.B, p.A, p.C, err, {}, nullptr, p.beta);
}

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
  Gemm g = oneGemm(args, s);
  if (singleCall(args, s))
    return runGemm(args, g, b.data, a.data, out.data, err);
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

/// Runs the whole product with `epilogue` into `d` when one call computes
/// it and cuBLASLt has an algorithm for it; `done` says whether it ran
/// (false: the caller finishes with the unfused kernels).
bool tryEpilogue(const KernelArgs &args, const MatmulShape &s,
                 cublasLtEpilogue_t epilogue, const EpilogueData &e, void *d,
                 bool &done, std::string &err) {
  done = false;
  if (s.K == 0 || !singleCall(args, s))
    return true;
  Gemm g = oneGemm(args, s);
  g.epilogue = epilogue;
  if (usesAux(epilogue)) {
    if (s.N % 8 != 0) // the aux matrix's leading dimension
      return true;
    g.auxLd = s.N;
  }
  return runGemm(args, g, args.inputs[1].data, args.inputs[0].data, d, err, e,
                 &done);
}

bool matmulBiasBody(const KernelArgs &args, std::string &err) {
  const TensorRef &out = args.outputs[0];
  MatmulShape s;
  if (!checkFused(args, s, err))
    return false;
  if (out.numel() == 0)
    return true;
  EpilogueData e;
  e.bias = args.inputs[2].data;
  bool done = false;
  if (!tryEpilogue(args, s, CUBLASLT_EPILOGUE_BIAS, e, out.data, done, err))
    return false;
  if (done)
    return true;
  TensorRef ins[2];
  return matmulBody(matmulProductArgs(args, &out), err) &&
         addBody(matmulEpilogueArgs(args, ins), err);
}

bool matmulBiasGeluBody(const KernelArgs &args, std::string &err) {
  const TensorRef &sum = args.outputs[0], &out = args.outputs[1];
  MatmulShape s;
  if (!checkFused(args, s, err))
    return false;
  const bool tanhForm = args.intAttrs[2] == 1;
  if (out.numel() == 0)
    return true;
  // cuBLASLt's GELU is the tanh form.
  if (tanhForm) {
    EpilogueData e;
    e.bias = args.inputs[2].data;
    e.aux = sum.data;
    bool done = false;
    if (!tryEpilogue(args, s, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, e, out.data,
                     done, err))
      return false;
    if (done)
      return true;
  }
  TensorRef ins[2];
  return matmulBody(matmulProductArgs(args, &sum), err) &&
         biasGeluBody(matmulEpilogueArgs(args, ins), err);
}

bool matmulGeluGradBody(const KernelArgs &args, std::string &err) {
  const TensorRef &grad = args.outputs[0], &dbias = args.outputs[1];
  const TensorRef &x = args.inputs[2];
  MatmulShape s;
  if (!dtypesOk(args.inputs[0], args.inputs[1], grad, err))
    return false;
  for (const TensorRef *t : {&x, &dbias})
    if (t->dtype != grad.dtype)
      return fail(err, "x and dbias must share the product's dtype ",
                  dtypeName(grad.dtype));
  if (!checkMatmulGeluGrad(args, s, err))
    return false;
  TensorRef ins[2];
  int64_t axes[kMaxRank];
  return matmulBody(matmulProductArgs(args, &grad), err) &&
         geluGradBody(geluGradStepArgs(args, ins), err) &&
         reduceSumBody(biasGradStepArgs(args, axes), err);
}

} // namespace dsc::rt::cuda
