//===- CpuCommon.h - shared helpers of the CPU kernels ----------*- C++ -*-===//
//
// Internal to runtime/backends/cpu: error formatting, shape and dtype
// checks, the kernel bodies' signature and declarations, the BLAS entry
// point and the parallel loop helper.
//
// A kernel body sees arguments the registry (CpuKernels.cpp) has already
// checked: the declared arity, well-formed tensors (known dtype, non-negative
// dims, data present when non-empty) and no overlap between outputs and
// inputs other than the exact aliasing the kernel allows. Bodies check
// everything kernel-specific (dtypes, ranks, shapes, attribute values) and
// report errors without the "ds.kernel: " prefix, which the registry adds.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDS_CPU_CPUCOMMON_H
#define DSC_RUNTIME_BACKENDS_CPU_CPUCOMMON_H

#include "runtime/kernels/Kernel.h"
#include "runtime/kernels/KernelChecks.h"
#include "runtime/kernels/KernelContract.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace dsc::rt::cpu {

// The checks every backend shares (runtime/kernels/KernelChecks.h), under
// the names the CPU kernels have always used.
using rt::AttentionDims;
using rt::AxisBlocks;
using rt::broadcastLayout;
using rt::BroadcastLayout;
using rt::broadcastsTo;
using rt::checkAdagrad;
using rt::checkAdamw;
using rt::checkAddLayerNorm;
using rt::checkAttention;
using rt::checkAttentionGrad;
using rt::checkAttentionOutput;
using rt::checkBiasRows;
using rt::checkBroadcastBinary;
using rt::checkCollectiveCounts;
using rt::checkCollectiveDTypes;
using rt::checkCollectiveScale;
using rt::checkCommunicator;
using rt::checkConcat;
using rt::checkCopyBytes;
using rt::checkDropout;
using rt::checkEmbeddingGradShapes;
using rt::checkEmbeddingShapes;
using rt::checkGeluApprox;
using rt::checkIota;
using rt::checkLamb;
using rt::checkLambNorms;
using rt::checkLayerNorm;
using rt::checkLayerNormGrad;
using rt::checkLion;
using rt::checkMatmul;
using rt::checkMuonApply;
using rt::checkMuonMomentum;
using rt::checkOneValue;
using rt::checkPipelineMessage;
using rt::checkReduce;
using rt::checkRmsNorm;
using rt::checkRmsNormGrad;
using rt::checkRotary;
using rt::checkRoundedUpdate;
using rt::checkSameShapes;
using rt::checkSgd;
using rt::checkShard;
using rt::checkSoftmax;
using rt::checkSoftmaxGrad;
using rt::checkSplit;
using rt::checkTargetShapes;
using rt::checkVocabularyParts;
using rt::Counts;
using rt::dimProduct;
using rt::expectAllF32;
using rt::expectDType;
using rt::expectIndexDType;
using rt::fail;
using rt::isIndexDType;
using rt::isTrailingShapeOf;
using rt::kMaxRank;
using rt::lastDimRows;
using rt::listStr;
using rt::MatmulShape;
using rt::planBroadcast;
using rt::planPad;
using rt::planSlice;
using rt::planTranspose;
using rt::RotaryDims;
using rt::sameBuffer;
using rt::sameShape;
using rt::shapeOf;
using rt::shapeStr;
using rt::StridedCopy;

/// A kernel body; `err` is set without the kernel-name prefix.
using Body = bool (*)(const KernelArgs &args, std::string &err);

//===--- Broadcasting -----------------------------------------------------===//

/// Calls f(outOffset, inOffsets, length) for the contiguous output runs of
/// flat range [begin, end); input k's run starts at inOffsets[k] with stride
/// layout.strides[k][rank - 1].
template <typename F>
void forEachRun(const BroadcastLayout &l, int64_t begin, int64_t end, F &&f) {
  const int r = l.rank;
  int64_t idx[kMaxRank], off[2] = {0, 0};
  int64_t rem = begin;
  for (int d = r - 1; d >= 0; --d) {
    idx[d] = rem % l.shape[d];
    rem /= l.shape[d];
    off[0] += idx[d] * l.strides[0][d];
    off[1] += idx[d] * l.strides[1][d];
  }
  const int64_t inner = l.shape[r - 1];
  for (int64_t pos = begin; pos < end;) {
    int64_t len = std::min(inner - idx[r - 1], end - pos);
    f(pos, off, len);
    pos += len;
    idx[r - 1] += len;
    off[0] += len * l.strides[0][r - 1];
    off[1] += len * l.strides[1][r - 1];
    // Carry into the outer dims.
    for (int d = r - 1; d > 0 && idx[d] == l.shape[d]; --d) {
      idx[d] = 0;
      off[0] -= l.shape[d] * l.strides[0][d];
      off[1] -= l.shape[d] * l.strides[1][d];
      ++idx[d - 1];
      off[0] += l.strides[0][d - 1];
      off[1] += l.strides[1][d - 1];
    }
  }
}

//===--- Row reductions ---------------------------------------------------===//

/// Sum of term(j) for j in [0, n), accumulated in double over 8 interleaved
/// partial sums (GCC vectorizes the lanes); the order depends on n only.
template <typename F> double sumOf(int64_t n, F term) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k)
      acc[k] += term(j + k);
  for (int k = 0; j < n; ++j, ++k)
    acc[k] += term(j);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
         ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/// Largest x[j], -inf for n == 0; NaN elements are skipped (like std::max).
inline float maxOf(const float *x, int64_t n) {
  float acc[16];
  for (int k = 0; k < 16; ++k)
    acc[k] = -HUGE_VALF;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int k = 0; k < 16; ++k)
      acc[k] = x[j + k] > acc[k] ? x[j + k] : acc[k];
  float m = -HUGE_VALF;
  for (int k = 0; k < 16; ++k)
    m = acc[k] > m ? acc[k] : m;
  for (; j < n; ++j)
    m = x[j] > m ? x[j] : m;
  return m;
}

//===--- Dtypes -----------------------------------------------------------===//

inline int64_t indexAt(const TensorRef &t, int64_t i) {
  return t.dtype == DType::i32
             ? int64_t(static_cast<const int32_t *>(t.data)[i])
             : static_cast<const int64_t *>(t.data)[i];
}

/// sum_r term(r) for r in [0, rows), as the cross-entropy losses sum their
/// rows: in fixed blocks of rows (run in parallel), then the blocks in
/// order, so the sum is the same for any thread count and the fused head's
/// loss (LinearCrossEntropy.cpp) is ds.cross_entropy's.
double sumInRowBlocks(int64_t rows, const std::function<double(int64_t)> &term);

/// One row of the cross-entropy's gradient: dr = coef (softmax(x) -
/// onehot(t)) over V logits (dr may be x); returns the row's log-sum-exp,
/// max + log(sum of e^(x - max)). ds.cross_entropy_grad's row and, with the
/// loss, the fused LM head's (Lookup.cpp).
double crossEntropyGradRow(const float *x, float *dr, int64_t V, int64_t t,
                           double coef);

/// Every target in [0, V) or `ignore` (the cross-entropy kernels' check,
/// before anything is written); `count` = the targets that are not.
bool countTargets(std::string &err, const TensorRef &targets, int64_t V,
                  int64_t ignore, int64_t &count);

/// The value of a one-element f32 tensor (a scalar operand).
bool scalarOperand(std::string &err, const TensorRef &t, const char *role,
                   float &value);

//===--- BLAS and threads -------------------------------------------------===//

/// Loads the CBLAS library on first use (Blas.cpp explains why it is not
/// linked and how DSC_BLAS chooses it).
bool blasReady(std::string &err);
/// DSC_BLAS's library: "auto" (unset), "openblas", "mkl" or a path; false +
/// one line for anything else (the CPU backend refuses it when created).
bool blasChoiceFromEnv(std::string &choice, std::string &error);
/// What runs the f32 GEMMs and why ("oneMKL (auto: an Intel CPU)"), or why
/// nothing can; loads the library.
std::string blasLibrary();
/// Row-major C = alpha * op(A) op(B) + beta * C through cblas_sgemm. The
/// caller has checked that every size fits the BLAS integer type.
void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
           float alpha, const float *A, int64_t lda, const float *B,
           int64_t ldb, float beta, float *C, int64_t ldc);
/// Sets GOMP_SPINCOUNT (unless the user set it or OMP_WAIT_POLICY) before
/// a library running on GNU OpenMP is loaded (OneDnn.cpp says why).
void shortenOpenMpSpin();
/// DSC_CPU_POOL: "auto" (unset), "openmp" or "threads"; false + one line
/// for anything else (the CPU backend refuses it when created).
bool cpuPoolChoiceFromEnv(std::string &choice, std::string &error);
/// What runs parallelFor's chunks: "GNU OpenMP's team" or "dsc's own
/// threads" (OpenMpTeam.cpp says why).
std::string cpuPoolLabel();
/// Whether libgomp loads for the team (false with DSC_CPU_POOL=threads).
bool openMpTeamLoads();
/// From now on (DSC_CPU_POOL=auto) parallelFor runs on GNU OpenMP's team:
/// called where a GEMM library on it (oneDNN, oneMKL) is first used.
void shareOpenMpTeam();
enum class TeamRun { Ran, Busy, Unavailable };
/// Runs chunk(c) for c in [0, chunks) on GNU OpenMP's team (OpenMpTeam.cpp);
/// Busy while another loop holds the team, Unavailable without libgomp,
/// with DSC_CPU_POOL=threads, or (auto) before shareOpenMpTeam.
TeamRun runOnOpenMpTeam(int64_t chunks,
                        const std::function<void(int64_t)> &chunk);
/// DSC_BF16_GEMM: "auto" (unset), "onednn" or "widen"; false + one line for
/// anything else (the CPU backend refuses it when created).
bool bf16GemmChoiceFromEnv(std::string &choice, std::string &error);
/// Whether bf16 x bf16 products run natively through oneDNN's matmul
/// (OneDnn.cpp): by default only where oneDNN runs them on AMX.
bool nativeBf16Gemm();
/// What would run bf16 GEMMs natively ("oneDNN (AMX)"), or why nothing can
/// ("cannot load oneDNN: ...").
std::string bf16GemmLibrary();
/// Row-major C = op(A) op(B) (C += op(A) op(B) with `accumulate`) with
/// bf16 A and B, f32 accumulation and C in `cType` (bf16, rounded to
/// nearest even, or f32); false + one line when oneDNN cannot run it.
bool gemmBf16(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
              const uint16_t *A, int64_t lda, const uint16_t *B, int64_t ldb,
              void *C, DType cType, int64_t ldc, std::string &err,
              bool accumulate = false);
/// Whether oneDNN is loaded and makes an f32 matmul here; else false with
/// why not.
bool oneDnnF32Usable(std::string &why);
/// Row-major C = op(A) op(B) (C += with `accumulate`) in f32 through
/// oneDNN's matmul; false + one line when oneDNN cannot run it.
bool gemmF32OneDnn(bool transA, bool transB, int64_t M, int64_t N, int64_t K,
                   const float *A, int64_t lda, const float *B, int64_t ldb,
                   float *C, int64_t ldc, bool accumulate, std::string &err);
/// Largest value a BLAS dimension may take.
int64_t blasIntMax();
/// Sets OPENBLAS_CORETYPE for this CPU unless the user did (Blas.cpp); the
/// kernel table calls it early, while the process is still single-threaded.
void prepareBlas();
/// While one exists, OpenBLAS runs each call on the calling thread: for
/// kernels that split independent GEMMs over their own threads.
class SingleThreadedBlas {
public:
  SingleThreadedBlas();
  ~SingleThreadedBlas();
  SingleThreadedBlas(const SingleThreadedBlas &) = delete;
  SingleThreadedBlas &operator=(const SingleThreadedBlas &) = delete;
};

/// Threads the CPU kernels split loops over: DSC_CPU_THREADS if set (1 to
/// kMaxKernelThreads), else the hardware concurrency, at most 8.
int kernelThreads();
constexpr uint64_t kMaxKernelThreads = 64;
/// What kernelThreads() will be; false + "DSC_CPU_THREADS=abc: expected
/// ..." when the variable is set to anything but a count in range (checked
/// when the backend is created, so a typo is not silently ignored).
bool kernelThreadsFromEnv(int &threads, std::string &error);
/// Runs fn(begin, end) over [0, n) in contiguous chunks of at least `grain`
/// items, the first chunk on the calling thread. Chunk boundaries depend on
/// n, grain and kernelThreads() only.
void parallelFor(int64_t n, int64_t grain,
                 const std::function<void(int64_t, int64_t)> &fn);

/// Terms a block of blockedSumOf holds.
constexpr int64_t kSumBlock = 32768;

/// sumOf over blocks of kSumBlock terms, the blocks' sums added in order
/// (from 0.0): the order of a whole-tensor sum, which reduce_sum and a
/// fused group's sum (FusedElementwise.cpp) share, with the blocks summed
/// on the kernel threads. Up to kSumBlock terms it is sumOf's.
template <typename F> double blockedSumOf(int64_t n, F term) {
  if (n <= kSumBlock)
    return sumOf(n, term);
  const int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<double> part(size_t(blocks), 0.0);
  parallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t first = b * kSumBlock;
      part[size_t(b)] = sumOf(std::min(kSumBlock, n - first),
                              [&](int64_t j) { return term(first + j); });
    }
  });
  double sum = 0;
  for (double p : part)
    sum += p;
  return sum;
}

/// Outputs per parallel chunk of a column reduction over `rows` rows (each
/// output sums its column alone, so the split never changes a bit): about
/// 16K elements read a chunk, at least 64 columns. reduce_sum's and the
/// fused bias-gradient epilogue's loops share it.
inline int64_t columnReductionGrain(int64_t rows) {
  return std::max<int64_t>(64, 16384 / std::max<int64_t>(rows, 1));
}

/// A skipped (overflowed) update with two states (AdamW's, Lamb's): p, m
/// and v copied to p', m', v' unless they are the same buffers.
void keepTwoStateUpdate(const KernelArgs &args);

/// ds.matmul_gelu_grad's epilogue over its product (`step`: x and the
/// product in place, as geluGradStepArgs makes them): ds.gelu_grad and the
/// bias gradient's column sums into `dbias` in one pass, the same bits as
/// geluGradBody then reduceSumBody (Elementwise.cpp).
bool geluGradColumnSums(const KernelArgs &step, const TensorRef &dbias,
                        std::string &err);

/// Runs a checked ds.fused_elementwise program over `args` (its inputs read
/// and its outputs written in their own dtypes, a tile at a time;
/// FusedElementwise.cpp).
void runFusedProgram(const fused::Program &program, const KernelArgs &args);

//===--- Kernel bodies ----------------------------------------------------===//

// One body per kernel of the contracts (runtime/kernels/KernelContract.h),
// defined in the file of its family: Elementwise, Cast (cast, copy, fill),
// Random, Matmul, Norms, Attention, Lookup, Shape, Reduce, Optimizer, Comm.
#define DSC_DECLARE_CPU_BODY(id, body)                                         \
  bool body##Body(const KernelArgs &, std::string &);
DSC_FOR_EACH_KERNEL(DSC_DECLARE_CPU_BODY)
#undef DSC_DECLARE_CPU_BODY

} // namespace dsc::rt::cpu

#endif // DSC_RUNTIME_BACKENDS_CPU_CPUCOMMON_H
