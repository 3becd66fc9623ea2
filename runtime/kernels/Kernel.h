//===- Kernel.h - the kernel ABI shared by every backend --------*- C++ -*-===//
//
// A plan instruction names a kernel ("ds.matmul"), its input and output
// buffers and positional attributes. Each kernel's arity, attributes,
// aliasing and dtype variants are its contract, declared once in ODS and
// generated into KernelContract.h; backends map (name, operand dtypes) to
// KernelFns built from the contracts, and the plan verifier checks arity
// and picks the variant for the buffers' dtypes before anything runs.
//
// What each kernel computes, with its attributes' meaning (ints | floats;
// the contract has their names and order; shapes come from buffers):
//   elementwise binary  ds.add ds.sub ds.mul ds.div ds.minimum ds.maximum
//                       ds.equal: (a, b) -> out, numpy broadcasting     |
//   elementwise unary   ds.neg ds.exp ds.log ds.tanh ds.sqrt ds.rsqrt
//                       ds.relu ds.silu: (x) -> out                     |
//   ds.gelu             (x) -> out                  [approx 0=erf 1=tanh] |
//   ds.relu_grad ds.silu_grad (x, g) -> out                               |
//   ds.gelu_grad        (x, g) -> out               [approx]              |
//   ds.cast             (x) -> out (dtype from buffers)                   |
//   ds.fused_elementwise (x...) -> out...           [program...] a group of
//                       elementwise ops (runtime/kernels/FusedProgram.h)
//   ds.dropout          (x) -> out                  [id] | [rate]
//   ds.matmul           (a, b) -> out               [transpose_a, transpose_b]
//   ds.matmul_bias      (a, b, bias) -> out         [transpose_a, transpose_b]
//                       out = matmul(a, b) + bias along out's last dim
//   ds.matmul_bias_gelu (a, b, bias) -> sum, out    [transpose_a,
//                       transpose_b, approx] sum = matmul + bias, out =
//                       gelu(sum)
//   ds.matmul_gelu_grad (a, b, x) -> grad, dbias    [transpose_a,
//                       transpose_b, approx] grad = gelu_grad(x,
//                       matmul(a, b)), dbias [N] = grad summed over all
//                       dims but the last
//   ds.layer_norm       (x, w[, b]) -> out          | [eps]
//   ds.layer_norm_grad  (x, w, g) -> dx, dw, db     | [eps]
//   ds.rms_norm         (x, w) -> out               | [eps]
//   ds.rms_norm_grad    (x, w, g) -> dx, dw         | [eps]
//   ds.softmax          (x) -> out ; ds.softmax_grad (y, g) -> out
//   ds.attention        (q, k, v) -> out            [causal] | [scale]
//   ds.attention_grad   (q, k, v, g) -> dq, dk, dv  [causal] | [scale]
//   ds.rotary           (x) -> out                  [inverse] | [theta]
//   ds.embedding        (table, idx) -> out
//   ds.embedding_grad   (idx, g) -> out [V, C] (fully overwritten)
//   ds.cross_entropy    (logits, targets) -> loss   [ignore_index]
//   ds.cross_entropy_grad (logits, targets, g) -> out [ignore_index]
//   ds.transpose        (x) -> out                  [perm...]
//   ds.slice            (x) -> out                  [offsets...]
//   ds.pad              (x) -> out                  [low...]
//   ds.concat           (x...) -> out               [axis]
//   ds.split            (x) -> out...               [axis]
//   ds.broadcast        (x) -> out
//   ds.reduce_sum ds.reduce_mean ds.reduce_max (x) -> out [axes...]
//   ds.iota             () -> out                   [dim]
//   ds.adamw            (p, g, m, v, lr, step, scale) -> p', m', v'
//                       | [beta1, beta2, eps, weight_decay] (in place ok;
//                       a non-finite scale leaves p, m, v as they are)
//   ds.adamw_round      (p, g, m, v, lr, step, scale) -> p', m', v', p16
//                       | as ds.adamw, g f32, f16 or bf16, and p' rounded
//                       into the f16/bf16 p16 in the same pass
//   ds.sgd              (p, g, buf, lr, step, scale) -> p', buf'
//                       [nesterov] | [momentum, dampening, weight_decay]
//   ds.lion             (p, g, m, lr, step, scale) -> p', m'
//                       | [beta1, beta2, weight_decay]
//   ds.adagrad          (p, g, sum, lr, step, scale) -> p', sum'
//                       | [lr_decay, eps, weight_decay] (all in place ok;
//                       a non-finite scale leaves the state as it is)
//   ds.lamb             (p, g, m, v, lr, step, scale) -> p', m', v'
//                       [bias_correction, eps_inside_sqrt] | [beta1, beta2,
//                       eps, weight_decay, min_coeff, max_coeff] (norms over
//                       the whole tensor: never merged with another)
//   ds.overflow_guard   (scale, norm) -> scale, or NaN if norm is not finite
//   ds.copy             (x) -> out (same bytes)
//   ds.fill             () -> out                   | [value]
//   ds.bias_gelu        (x, bias) -> sum, out       [approx]
//   ds.add_layer_norm   (x, residual, w[, b]) -> sum, out | [eps]
//
// Collectives (on the comm stream, through KernelContext::comm with the
// operands' dtype and KernelContext::stream; sums take f32, f64, f16 and
// bf16, the others any dtype, x and out alike; N is the communicator's size,
// which must equal the run's world size; every rank runs the same
// instruction with the same shapes):
//   comm.all_reduce     (x) -> out                  | [scale]
//                       out = scale * sum over ranks of x; scale 1/N gives
//                       the mean. out may be x.
//   comm.reduce_scatter (x [N*S]) -> out [S]        | [scale]
//                       out = scale * sum over ranks of x's block `rank`
//                       (shapes need only these element counts).
//   comm.all_gather     (x [S]) -> out [N*S]        block r of out = rank
//                       r's x.
//   comm.all_to_all     (x [N*S]) -> out [N*S]      block j of x goes to
//                       rank j's block `rank`.
//   comm.broadcast      (x) -> out                  [root]
//                       out = root's x on every rank. out may be x.
//   dist.shard          (x [N*S]) -> out [S]        [N]
//                       block `rank` of x (compute stream; no communication).
//
// Elementwise kernels must tolerate an output that aliases an input of the
// same shape (the compiler updates variables in place).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_KERNELS_KERNEL_H
#define DSC_RUNTIME_KERNELS_KERNEL_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/core/DType.h"

namespace dsc::rt {

class Communicator; // runtime/comm/Communicator.h

using dsc::DType; // runtime/core/DType.h: one enum for compiler and runtime
using dsc::dtypeName;
using dsc::dtypeSize;

struct TensorRef {
  void *data = nullptr;
  DType dtype = DType::f32;
  const int64_t *shape = nullptr;
  int rank = 0;

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i)
      n *= shape[i];
    return n;
  }
  int64_t dim(int i) const { return shape[i < 0 ? rank + i : i]; }
  float *f32() const { return static_cast<float *>(data); }
  int32_t *i32() const { return static_cast<int32_t *>(data); }
};

/// What a kernel may know about the run besides its operands.
struct KernelContext {
  uint64_t seed = 0;
  uint32_t step = 0; ///< the optimizer step, for dropout masks
  /// Global index of the first sample of this micro-batch ((micro-step x
  /// world size + rank) x micro-batch): dropout keys element e of a tensor
  /// whose leading dimension is the batch by its global element index, so
  /// masks do not depend on how the global batch is split.
  uint64_t sampleOffset = 0;
  int rank = 0;
  int worldSize = 1;
  /// The rank's place in its tensor-parallel group (0 without one): which
  /// part of a token-cut activation dropout draws for.
  int tensorRank = 0;
  /// The ranks' collectives (comm.* kernels); null outside a Session. With
  /// tensor parallelism `comm` is the rank's data-parallel group (rank and
  /// worldSize are its coordinates there) and the executor hands a
  /// tensor-group instruction `tensorComm` as its `comm` (and its place and
  /// size there as rank and worldSize).
  Communicator *comm = nullptr;
  Communicator *tensorComm = nullptr;
  /// The backend's queue for the stream the instruction runs on and that
  /// stream's library handles (a cudaStream_t, and the cuBLASLt handle and
  /// workspace that go with it): whatever Backend::streamResources gave
  /// the executor for this stream. Null on the CPU backend.
  void *stream = nullptr;
  void *handles = nullptr;
};

struct KernelArgs {
  const TensorRef *inputs = nullptr;
  size_t numInputs = 0;
  const TensorRef *outputs = nullptr;
  size_t numOutputs = 0;
  const int64_t *intAttrs = nullptr;
  size_t numIntAttrs = 0;
  const double *floatAttrs = nullptr;
  size_t numFloatAttrs = 0;
  const KernelContext *ctx = nullptr;
};

/// Arguments over containers (anything with data() and size(): vectors,
/// arrays) that the caller keeps alive for the call.
template <class Tensors, class Ints, class Floats>
KernelArgs makeKernelArgs(const Tensors &inputs, const Tensors &outputs,
                          const Ints &ints, const Floats &floats,
                          const KernelContext *ctx) {
  KernelArgs a;
  a.inputs = inputs.data();
  a.numInputs = inputs.size();
  a.outputs = outputs.data();
  a.numOutputs = outputs.size();
  a.intAttrs = ints.data();
  a.numIntAttrs = ints.size();
  a.floatAttrs = floats.data();
  a.numFloatAttrs = floats.size();
  a.ctx = ctx;
  return a;
}

/// Returns false and sets `error` (one line, naming the kernel) on failure.
using KernelFn = bool (*)(const KernelArgs &args, std::string &error);

/// One variant of a kernel: its name, the operand dtypes it takes (a
/// signature, KernelSignature.h) and its arity; -1 means "any" (variadic,
/// or rank-dependent). Variants of one name share the arity.
struct KernelInfo {
  std::string_view name;
  std::string_view dtypes;
  int numInputs;
  int numOutputs;
  int numIntAttrs;
  int numFloatAttrs;
  KernelFn fn;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_KERNELS_KERNEL_H
