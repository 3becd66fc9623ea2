//===- KernelChecks.h - argument checks every backend shares ----*- C++ -*-===//
//
// What a kernel checks on the host before it computes or enqueues anything,
// the same on every backend so that a bad instruction gets the same line
// whichever backend runs it: the table-level checks (declared arity,
// well-formed tensors, which aliasing the kernel tolerates; checkKernelArgs)
// and the helpers kernel wrappers build their own checks from (shapes,
// broadcasting, dtypes). Only shapes and pointers are looked at, never
// tensor data, so the checks hold for device memory too.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_KERNELS_KERNELCHECKS_H
#define DSC_RUNTIME_KERNELS_KERNELCHECKS_H

#include "runtime/kernels/FusedProgram.h"
#include "runtime/kernels/Kernel.h"
#include "runtime/kernels/KernelContract.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace dsc::rt {

/// Largest rank a kernel accepts.
constexpr int kMaxRank = 16;

/// Sets `err` to the concatenation of `parts` and returns false.
template <typename... Parts>
bool fail(std::string &err, const Parts &...parts) {
  std::ostringstream os;
  (os << ... << parts);
  err = os.str();
  return false;
}

//===--- The table's checks -----------------------------------------------===//

/// Arity, well-formed tensors (known dtype, rank <= kMaxRank, non-negative
/// dims, a size that fits, data when non-empty) and no overlap between
/// outputs and inputs beyond what `contract.alias` allows. `err` is set
/// without the kernel-name prefix.
bool checkKernelArgs(const KernelContract &contract, const KernelArgs &args,
                     std::string &err);

/// A backend's table entry: `body` on `args` once checkKernelArgs passes;
/// `error` gets the failure, prefixed with the kernel's name.
bool callChecked(const KernelContract &contract, KernelFn body,
                 const KernelArgs &args, std::string &error);

//===--- Shapes -----------------------------------------------------------===//

/// "[2, 3]"-style rendering.
std::string listStr(const int64_t *values, size_t count);
inline std::string shapeStr(const TensorRef &t) {
  return listStr(t.shape, size_t(t.rank));
}
inline std::vector<int64_t> shapeOf(const TensorRef &t) {
  return std::vector<int64_t>(t.shape, t.shape + t.rank);
}
bool sameShape(const TensorRef &a, const TensorRef &b);
/// Whether `in`'s shape is `out`'s trailing dims (its own shape included):
/// what a ds.fused_elementwise input broadcasts from.
bool isTrailingShapeOf(const TensorRef &in, const TensorRef &out);
/// Product of dims [begin, end).
int64_t dimProduct(const TensorRef &t, int begin, int end);
/// True when the output buffer is the input buffer (in-place update).
inline bool sameBuffer(const TensorRef &a, const TensorRef &b) {
  return a.data == b.data;
}
/// x viewed as rows of its last dim; false (with err) for a scalar.
bool lastDimRows(std::string &err, const TensorRef &x, const char *role,
                 int64_t &rows, int64_t &cols);

//===--- Broadcasting -----------------------------------------------------===//

/// `out` has exactly the numpy broadcast shape of `a` and `b`.
bool checkBroadcastBinary(std::string &err, const TensorRef &a,
                          const TensorRef &b, const TensorRef &out);

/// Whether `in` expands to `out`'s shape under numpy's rules.
bool broadcastsTo(const TensorRef &in, const TensorRef &out);

/// Up to two inputs laid over an output they broadcast to, with size-1 dims
/// dropped and dims merged wherever every operand stays contiguous across
/// them: [B, T, C] + [C] becomes rows of C with the bias stride 0 outside.
struct BroadcastLayout {
  int rank = 1; ///< >= 1
  int64_t shape[kMaxRank] = {1};
  int64_t strides[2][kMaxRank] = {}; ///< element strides; 0 = broadcast
};
/// Every input must broadcast to `out` (checked by the caller).
BroadcastLayout broadcastLayout(const TensorRef &out, const TensorRef *in0,
                                const TensorRef *in1 = nullptr);

/// Every input has the output's shape (elementwise unary ops and
/// activation gradients).
bool checkSameShapes(const KernelArgs &args, std::string &err);
/// ds.gelu's `approximate` attribute: 0 (erf) or 1 (tanh).
bool checkGeluApprox(std::string &err, int64_t approx, bool &tanhForm);
/// ds.bias_gelu's operands: bias is [C] for x's last dim C, and sum and out
/// have x's shape; rows x cols of x.
bool checkBiasRows(std::string &err, const TensorRef &x, const TensorRef &bias,
                   const TensorRef &sum, const TensorRef &out, int64_t &rows,
                   int64_t &cols);

//===--- Row-wise kernels (RowKernelChecks.cpp) ---------------------------===//

// x [..., C] as rows x cols, per-channel operands [C], every other operand
// of x's shape, eps finite and >= 0; dtypes are the backend's to check.
bool checkLayerNorm(const KernelArgs &a, int64_t &rows, int64_t &cols,
                    std::string &err);
bool checkAddLayerNorm(const KernelArgs &a, int64_t &rows, int64_t &cols,
                       std::string &err);
bool checkLayerNormGrad(const KernelArgs &a, int64_t &rows, int64_t &cols,
                        std::string &err);
bool checkRmsNorm(const KernelArgs &a, int64_t &rows, int64_t &cols,
                  std::string &err);
bool checkRmsNormGrad(const KernelArgs &a, int64_t &rows, int64_t &cols,
                      std::string &err);
bool checkSoftmax(const KernelArgs &a, int64_t &rows, int64_t &cols,
                  std::string &err);
bool checkSoftmaxGrad(const KernelArgs &a, int64_t &rows, int64_t &cols,
                      std::string &err);

//===--- Lookups and rotary (LookupKernelChecks.cpp) ----------------------===//

/// ds.embedding: table [V, C], out = indices' shape + [C].
bool checkEmbeddingShapes(std::string &err, const TensorRef &table,
                          const TensorRef &idx, const TensorRef &out,
                          int64_t &V, int64_t &C);
/// ds.embedding_grad: g = indices' shape + [C], out [V, C].
bool checkEmbeddingGradShapes(std::string &err, const TensorRef &idx,
                              const TensorRef &g, const TensorRef &out,
                              int64_t &V, int64_t &C);
/// Cross-entropy: logits [..., V] and targets [...].
bool checkTargetShapes(std::string &err, const TensorRef &logits,
                       const TensorRef &targets);
/// ds.linear_cross_entropy: h and weight f32, f16 or bf16 (one dtype, which
/// dh and the chunk share; grad, the loss and dweight f32), h [..., D],
/// weight [V, D], targets h's shape without D, grad one value; the loss one
/// value, dh h's shape, dweight weight's, the chunk [chunk_rows, V] with
/// chunk_rows dividing the rows.
/// Sets rows (N), V and D. The targets' values are each backend's check.
bool checkLinearCrossEntropy(std::string &err, const KernelArgs &a,
                             int64_t &rows, int64_t &V, int64_t &D);
/// A vocabulary-parallel kernel's place (ds.embedding, ds.embedding_grad
/// and the ds.cross_entropy_part family with `parts` P): the rank's rows or
/// columns [offset, offset + local) of local * P, by the context's tensor
/// rank. Fails without a context when P > 1, or for a rank outside P.
bool vocabularyPart(std::string &err, const KernelArgs &a, int64_t parts,
                    int64_t local, int64_t &offset);
/// parts >= 1 and parts x local (the whole vocabulary) within int64_t.
bool checkVocabularyParts(std::string &err, int64_t local, int64_t parts);
/// The statistics of a vocabulary-parallel loss: row_max of the targets'
/// shape (null: none), stats [2] + the targets' shape.
bool checkRowStats(std::string &err, const TensorRef &targets,
                   const TensorRef *rowMax, const TensorRef &stats);
/// "<role> must hold one value, got shape ..." unless t has one element.
bool checkOneValue(std::string &err, const TensorRef &t, const char *role);
/// ds.rotary's rows: x's elements are rows of D (pairs (i, i + D/2)); row r
/// is at position (r / heads) % T (heads 1 unless seq_major).
struct RotaryDims {
  int64_t T = 0, D = 0, heads = 1;
  int64_t positionOf(int64_t row) const { return (row / heads) % T; }
};
/// ds.rotary: x [..., T, D] (seq_major: [B, T, H, D]) with D even, out of
/// x's shape, inverse and seq_major 0 or 1, theta positive and finite.
bool checkRotary(const KernelArgs &a, RotaryDims &d, bool &inverse,
                 double &theta, std::string &err);

//===--- Data movement (ShapeKernelPlans.cpp) -----------------------------===//

/// A shape kernel as one strided copy of `total` elements of `elemSize`
/// bytes: the walking side is contiguous from its base, the other side is
/// at layout.strides[0] from its base. Gather walks the destination (it
/// reads src at the strides); scatter walks the source.
struct StridedCopy {
  BroadcastLayout layout;
  int64_t total = 0;
  int64_t srcBase = 0, dstBase = 0; ///< in elements
  bool scatter = false;
  size_t elemSize = 0;
};
/// ds.transpose, ds.slice, ds.broadcast (gathers) and ds.pad (a scatter of
/// x into an output the backend first zeroes).
bool planTranspose(const KernelArgs &a, StridedCopy &plan, std::string &err);
bool planSlice(const KernelArgs &a, StridedCopy &plan, std::string &err);
bool planPad(const KernelArgs &a, StridedCopy &plan, std::string &err);
bool planBroadcast(const KernelArgs &a, StridedCopy &plan, std::string &err);

/// ds.concat and ds.split along an axis: `outer` blocks, each operand
/// contributing its dim along the axis times `innerBytes` per block.
struct AxisBlocks {
  int64_t outer = 0, innerBytes = 0;
};
bool checkConcat(const KernelArgs &a, AxisBlocks &blocks, std::string &err);
bool checkSplit(const KernelArgs &a, AxisBlocks &blocks, std::string &err);
/// ds.iota: element i is (i / inner) % size; the dtype is f32, f64, i32 or
/// i64.
bool checkIota(const KernelArgs &a, int64_t &size, int64_t &inner,
               std::string &err);
/// The reductions: `reduced` marks x's reduced dims (axes strictly
/// increasing), `count` is how many elements each output sums, the output
/// is x without those dims or with them as 1.
bool checkReduce(const KernelArgs &a, bool reduced[kMaxRank], int64_t &count,
                 std::string &err);

//===--- Optimizers (OptimizerKernelChecks.cpp) ---------------------------===//

/// ds.fused_elementwise: decodes its program (runtime/kernels/FusedProgram.h)
/// into `program` and checks its operands: f32, f16 or bf16; the outputs of
/// the group's shape (a ReduceSum's: its trailing dims), each input that
/// shape or its trailing dims.
bool checkFusedElementwise(const KernelArgs &a, fused::Program &program,
                           std::string &err);
/// The operand with the group's shape: an output that is not the
/// program's sum, else the largest input.
const TensorRef &fusedGroupOf(const KernelArgs &a,
                              const fused::Program &program);

/// ds.adamw and ds.adamw_round: p, m, v and the outputs p', m', v' f32 of
/// p's shape, g of p's shape; lr, step and scale one f32 value each, and
/// an optional beta1_value; betas in [0, 1), eps and weight decay finite
/// and >= 0. beta1_value is data, checked where the backend reads it.
bool checkAdamw(const KernelArgs &args, std::string &err);
/// A rounded update's own operands (ds.adamw_round, ds.sgd_round, ...),
/// checked before its update's: g f32, f16 or bf16, and the last output,
/// p16, f16 or bf16 of p's shape.
bool checkRoundedUpdate(const KernelArgs &args, std::string &err);
/// ds.sgd: p, buf and p', buf' f32 of g's shape; lr, step, scale f32
/// scalars; nesterov 0 or 1 (needing momentum > 0 and dampening 0),
/// momentum and weight_decay finite and >= 0.
bool checkSgd(const KernelArgs &args, std::string &err);
/// ds.lion: p, m and p', m' f32 of g's shape; lr, step, scale f32 scalars
/// and an optional beta1_value; betas in [0, 1), weight_decay finite and
/// >= 0.
bool checkLion(const KernelArgs &args, std::string &err);
/// ds.adagrad: p, sum and p', sum' f32 of g's shape; lr, step, scale f32
/// scalars; lr_decay and weight_decay finite and >= 0, eps finite and > 0.
bool checkAdagrad(const KernelArgs &args, std::string &err);
/// ds.lamb: p, m, v and p', m', v' f32 of g's shape; lr, step, scale f32
/// scalars; bias_correction and eps_inside_sqrt 0 or 1; betas in [0, 1),
/// eps finite and > 0, weight_decay finite and >= 0, 0 < min_coeff <=
/// max_coeff finite. Sharded (ZeRO): an eighth input, norms f32 [2 x
/// members], with one or more positive member counts after the two flags.
bool checkLamb(const KernelArgs &args, std::string &err);
/// ds.muon_momentum: g (f32, f16 or bf16), buf and buf', direction f32 of
/// one shape; scale an f32 scalar; nesterov 0 or 1, momentum in [0, 1).
bool checkMuonMomentum(const KernelArgs &args, std::string &err);
/// ds.muon_apply: p and p' f32, ortho f32, f16 or bf16, of one shape; lr and
/// scale f32 scalars; weight_decay finite and >= 0, factor finite and >= 1.
bool checkMuonApply(const KernelArgs &args, std::string &err);
/// ds.lamb_norms: p, m, v f32 of g's shape, scale an f32 scalar; out f32 [2
/// x members]; eps_inside_sqrt 0 or 1, one or more positive member counts;
/// betas, eps and weight_decay as ds.lamb's.
bool checkLambNorms(const KernelArgs &args, std::string &err);

//===--- Attention (AttentionKernelChecks.cpp) ----------------------------===//

struct AttentionDims {
  int64_t B, H, Tq, Tk, D, Dv;
  bool seqMajor = false; // operands [B, T, H, D] rather than [B, H, T, D]

  /// The element offset of row i (of T) of (batch, head) pair p in an
  /// operand whose rows hold `width` elements.
  int64_t rowOffset(int64_t p, int64_t i, int64_t T, int64_t width) const {
    return seqMajor ? (((p / H) * T + i) * H + p % H) * width
                    : (p * T + i) * width;
  }
  /// Elements from one row of a pair to its next.
  int64_t rowStride(int64_t width) const {
    return seqMajor ? H * width : width;
  }
  /// Keys query row i sees: all, or (causal) j <= i + (Tk - Tq).
  int64_t visibleKeys(bool causal, int64_t i) const {
    if (!causal)
      return Tk;
    return std::min(Tk, std::max<int64_t>(0, i + (Tk - Tq) + 1));
  }
};
/// q [B, H, Tq, D], k [B, H, Tk, D], v [B, H, Tk, Dv] (seq_major: [B, T,
/// H, D] each); causal and seq_major 0 or 1; a finite scale.
bool checkAttention(const KernelArgs &a, AttentionDims &d, bool &causal,
                    double &scale, std::string &err);
/// ds.attention's output [B, H, Tq, Dv] or [B, Tq, H, Dv] (after
/// checkAttention).
bool checkAttentionOutput(const KernelArgs &a, std::string &err);
/// ds.attention_grad's g [B, H, Tq, Dv] and dq, dk, dv of q's, k's and
/// v's shapes (after checkAttention).
bool checkAttentionGrad(const KernelArgs &a, std::string &err);

//===--- Collectives (CommKernelChecks.cpp) -------------------------------===//

/// The run's communicator (KernelContext::comm), of the run's world size.
bool checkCommunicator(const KernelArgs &args, std::string &err,
                       Communicator *&comm);
/// comm.all_reduce's and comm.reduce_scatter's scale: finite.
bool checkCollectiveScale(const KernelArgs &args, std::string &err,
                          float &scale);
/// x and out of one dtype; a float one for sums.
bool checkCollectiveDTypes(std::string &err, const TensorRef &x,
                           const TensorRef &out, bool sum);
/// How x's and out's element counts relate.
/// Blocks: x and out the same count, a multiple of the ranks (all_to_all).
enum class Counts { Same, XHoldsAll, OutHoldsAll, Blocks };
bool checkCollectiveCounts(std::string &err, const TensorRef &x,
                           const TensorRef &out, Counts relation, int ranks);
/// comm.send's and comm.recv's [peer, transfer, micro_batch]: the pipeline
/// group's communicator (the Session hands it as KernelContext::comm, its
/// ranks the stages), a peer stage other than this one, and the message's
/// tag (transfer < 2^14, micro_batch < 2^16: MPI tags are 31-bit).
bool checkPipelineMessage(const KernelArgs &args, std::string &err,
                          Communicator *&comm, int &peer, int &tag);
/// dist.shard: compiled for the run's world size, x = ranks x out.
bool checkShard(const KernelArgs &args, std::string &err);

//===--- ds.matmul --------------------------------------------------------===//

/// ds.matmul's operands resolved: a [..., M, K] ([..., K, M] transposed), b
/// [..., K, N] ([..., N, K] transposed), batch dims broadcast; per batch dim
/// the element stride of a's and b's matrices (0 where broadcast).
struct MatmulShape {
  bool transA = false, transB = false;
  int64_t M = 0, N = 0, K = 0;
  int batchRank = 0;
  int64_t numBatches = 1;
  int64_t batch[kMaxRank] = {}, strideA[kMaxRank] = {}, strideB[kMaxRank] = {};
};
/// Checks the flags and shapes (output = batch + [M, N]) and fills `m`.
bool checkMatmul(const KernelArgs &args, MatmulShape &m, std::string &err);
/// ds.matmul_bias(_gelu)'s arguments as ds.matmul's: inputs a and b, the
/// transpose flags, and `out` as the one output.
KernelArgs matmulProductArgs(const KernelArgs &args, const TensorRef *out);
/// ds.matmul_bias(_gelu)'s operands: the product's as checkMatmul checks
/// them (into the first output), bias [N], ds.matmul_bias_gelu's second
/// output of the first's shape and its GELU form (approx 0 or 1).
bool checkMatmulBias(const KernelArgs &args, MatmulShape &m, std::string &err);
/// ds.matmul_gelu_grad's operands: the product's as checkMatmul checks them
/// (into the first output), x of the product's shape, dbias [N], approx 0
/// or 1.
bool checkMatmulGeluGrad(const KernelArgs &args, MatmulShape &m,
                         std::string &err);
/// ds.matmul_gelu_grad's second step, ds.gelu_grad (x, product) -> grad
/// in place, and its third, ds.reduce_sum (grad) -> dbias over `axes`
/// (every dim but the last, filled in).
KernelArgs geluGradStepArgs(const KernelArgs &args, TensorRef (&ins)[2]);
KernelArgs biasGradStepArgs(const KernelArgs &args, int64_t (&axes)[kMaxRank]);
/// What finishes ds.matmul_bias(_gelu) once the product is in its first
/// output: ds.add's arguments (product, bias) -> out, or ds.bias_gelu's
/// (sum, bias) -> sum, out with [approx]. `ins` holds the new inputs.
KernelArgs matmulEpilogueArgs(const KernelArgs &args, TensorRef (&ins)[2]);

//===--- Data movement and dropout ----------------------------------------===//

/// ds.copy: x and the output hold the same number of bytes.
bool checkCopyBytes(std::string &err, const TensorRef &x, const TensorRef &y);
/// ds.dropout: out of x's shape, id in [0, 2^32), rate in [0, 1].
bool checkDropout(const KernelArgs &a, std::string &err);

//===--- Dtypes -----------------------------------------------------------===//

/// "unsupported dtype f16 for <role> (expected f32)" unless t has `want`.
bool expectDType(std::string &err, const TensorRef &t, const char *role,
                 DType want);
/// Every input and output must be f32.
bool expectAllF32(const KernelArgs &args, std::string &err);
inline bool isIndexDType(DType t) { return t == DType::i32 || t == DType::i64; }
/// Index tensors (token ids, targets) must be i32 or i64.
bool expectIndexDType(std::string &err, const TensorRef &t, const char *role);

} // namespace dsc::rt

#endif // DSC_RUNTIME_KERNELS_KERNELCHECKS_H
