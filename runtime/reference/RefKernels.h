//===- RefKernels.h - float64 reference kernels -----------------*- C++ -*-===//
//
// The "obviously right" oracle: naive float64 implementations of every op dsc
// executes, used by gradient checks and to validate the real runtime kernels.
// Plain C++17 and the standard library only; no exceptions. Every kernel
// checks its inputs and returns a Result whose `error` names the kernel and
// the problem; a kernel never crashes on input it can detect as bad.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_REFERENCE_REFKERNELS_H
#define DSC_RUNTIME_REFERENCE_REFKERNELS_H

#include "runtime/core/DType.h"
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dsc::ref {

using Shape = std::vector<int64_t>;

/// A dense row-major float64 tensor. Rank 0 has shape {} and one element.
/// Integer tensors (token ids, targets) hold integral doubles.
struct Tensor {
  Shape shape;
  std::vector<double> data;

  /// A rank-0 zero.
  Tensor() : data(1, 0.0) {}
  /// Zeros of the given shape (no data if the shape is invalid).
  explicit Tensor(Shape s);
  Tensor(Shape s, std::vector<double> d)
      : shape(std::move(s)), data(std::move(d)) {}
  static Tensor scalar(double v) { return Tensor({}, {v}); }

  int64_t rank() const { return int64_t(shape.size()); }
  /// Product of the dims; -1 if a dim is negative or the product overflows.
  int64_t numel() const;
  /// Empty if the tensor is well formed, else what is wrong with it.
  std::string validate() const;
};

/// Error payload; converts into any Result.
struct Error {
  std::string message;
};

/// A kernel's value or its error. `error` is empty exactly on success.
template <typename T> struct Result {
  Result(T v) : value(std::move(v)) {}
  Result(Error e) : error(std::move(e.message)) {
    if (error.empty())
      error = "unknown error";
  }
  bool ok() const { return error.empty(); }
  explicit operator bool() const { return ok(); }

  T value{};
  std::string error;
};

enum class BinaryKind { Add, Sub, Mul, Div, Minimum, Maximum, Equal };
enum class UnaryKind {
  Neg,
  Exp,
  Log,
  Tanh,
  Rsqrt,
  Sqrt,
  Relu,
  Silu,
  GeluTanh,
  GeluErf
};
enum class ReduceKind { Sum, Mean, Max };
using dsc::DType; // rounding targets: f64 (none), f32, f16, bf16
enum class InitKind { Zeros, Ones, Normal };

struct LayerNormGrads {
  Tensor dx, dw, db;
};
struct RmsNormGrads {
  Tensor dx, dw;
};
struct AttentionGrads {
  Tensor dq, dk, dv;
};
struct AdamWState {
  Tensor p, m, v;
};
/// An optimizer with one state tensor (SGD's momentum, Lion's moment).
struct UpdateState {
  Tensor p, state;
};

//===--- Utilities --------------------------------------------------------===//

/// "[2, 3]"-style rendering for messages.
std::string shapeToString(const Shape &shape);
/// Empty if `t` is well formed, else "<kernel>: <arg>: <problem>".
std::string checkTensor(const char *kernel, const char *arg, const Tensor &t);
/// numpy broadcast of two shapes.
Result<Shape> broadcastShapes(const Shape &a, const Shape &b);
/// Rounds `x` to the nearest value representable in `dtype` (ties to even;
/// overflow gives infinity).
double roundToDType(double x, DType dtype);

//===--- Elementwise ------------------------------------------------------===//

Result<Tensor> binary(BinaryKind kind, const Tensor &a, const Tensor &b);
Result<Tensor> unary(UnaryKind kind, const Tensor &x);
/// g * d/dx gelu(x); tanhForm selects the tanh approximation over erf.
Result<Tensor> gelu_grad(const Tensor &x, const Tensor &g, bool tanhForm);
Result<Tensor> silu_grad(const Tensor &x, const Tensor &g);
/// g where x > 0, else 0.
Result<Tensor> relu_grad(const Tensor &x, const Tensor &g);
Result<Tensor> cast(const Tensor &x, DType dtype);

//===--- Shape and data movement ------------------------------------------===//

/// One dim of `shape` may be -1 and is inferred.
Result<Tensor> reshape(const Tensor &x, const Shape &shape);
/// out.shape[i] = x.shape[perm[i]].
Result<Tensor> transpose(const Tensor &x, const std::vector<int64_t> &perm);
Result<Tensor> slice(const Tensor &x, const std::vector<int64_t> &offsets,
                     const std::vector<int64_t> &sizes);
/// Zero padding; low and high must be non-negative.
Result<Tensor> pad(const Tensor &x, const std::vector<int64_t> &low,
                   const std::vector<int64_t> &high);
Result<Tensor> concat(const std::vector<Tensor> &xs, int64_t axis);
Result<std::vector<Tensor>> split(const Tensor &x, int64_t axis,
                                  const std::vector<int64_t> &sizes);
Result<Tensor> broadcast_to(const Tensor &x, const Shape &shape);
/// `axes` strictly increasing, each in [0, rank).
Result<Tensor> reduce(ReduceKind kind, const Tensor &x,
                      const std::vector<int64_t> &axes, bool keepdim);
/// value = index along `dim`.
Result<Tensor> iota(const Shape &shape, int64_t dim);

//===--- Linear algebra and NN --------------------------------------------===//

/// a [..., M, K] (or [..., K, M] if transposeA), b [..., K, N] (or
/// [..., N, K] if transposeB); batch dims broadcast.
Result<Tensor> matmul(const Tensor &a, const Tensor &b, bool transposeA,
                      bool transposeB);
/// Over the last dim with biased variance; w/b may be nullptr (1 and 0).
Result<Tensor> layer_norm(const Tensor &x, const Tensor *w, const Tensor *b,
                          double eps);
/// dw and db are summed over all leading dims (returned even if w is null).
Result<LayerNormGrads> layer_norm_grad(const Tensor &x, const Tensor *w,
                                       const Tensor &g, double eps);
/// x / sqrt(mean(x^2) + eps) * w over the last dim; w may be nullptr.
Result<Tensor> rms_norm(const Tensor &x, const Tensor *w, double eps);
Result<RmsNormGrads> rms_norm_grad(const Tensor &x, const Tensor *w,
                                   const Tensor &g, double eps);
Result<Tensor> softmax(const Tensor &x);
/// y is softmax's output: y * (g - sum_last(g * y)).
Result<Tensor> softmax_grad(const Tensor &y, const Tensor &g);
/// q [B,H,Tq,D], k [B,H,Tk,D], v [B,H,Tk,Dv] -> [B,H,Tq,Dv]. When causal,
/// key j is masked for query i when j > i + (Tk - Tq); a fully masked row
/// gives zeros.
Result<Tensor> attention(const Tensor &q, const Tensor &k, const Tensor &v,
                         bool causal, double scale);
Result<AttentionGrads> attention_grad(const Tensor &q, const Tensor &k,
                                      const Tensor &v, const Tensor &g,
                                      bool causal, double scale);
/// table [V, C], idx any shape -> idx.shape + [C].
Result<Tensor> embedding(const Tensor &table, const Tensor &idx);
/// Scatter-add of g (idx.shape + [C]) into [V, C].
Result<Tensor> embedding_grad(const Tensor &idx, const Tensor &g, int64_t V);
/// x [..., T, D], D even; rotate_half convention; inverse negates the angle.
Result<Tensor> rotary(const Tensor &x, double theta, bool inverse);
/// Mean over non-ignored positions of logsumexp(logits) - logits[target];
/// a rank-0 result, 0 when every position is ignored.
Result<Tensor> cross_entropy(const Tensor &logits, const Tensor &targets,
                             int64_t ignoreIndex = -1);
/// (softmax - onehot) * g / count; rows with ignored targets are zero.
Result<Tensor> cross_entropy_grad(const Tensor &logits, const Tensor &targets,
                                  double g, int64_t ignoreIndex = -1);
/// Keeps flat element e when rng::uniformAt(seed, opId, step, g) >= rate,
/// scaled by 1/(1-rate); rate in [0, 1]. g = sampleOffset * (elements per
/// row of the leading dimension) + e: the global index when the leading
/// dimension is a micro-batch starting at sample sampleOffset.
Result<Tensor> dropout(const Tensor &x, double rate, uint64_t seed,
                       uint32_t opId, uint32_t step, uint64_t sampleOffset = 0);
/// `scale`, or NaN when `norm` is not finite (an overflowed step; adamw
/// given a non-finite scale returns its state unchanged).
Result<Tensor> overflow_guard(const Tensor &scale, const Tensor &norm);
/// PyTorch AdamW; step counts from 1; g is multiplied by gradScale first;
/// a non-finite gradScale returns p, m and v unchanged.
Result<AdamWState> adamw(const Tensor &p, const Tensor &g, const Tensor &m,
                         const Tensor &v, double lr, int64_t step, double beta1,
                         double beta2, double eps, double weightDecay,
                         double gradScale);
/// torch.optim.SGD (maximize off): d = g gradScale + weightDecay p; with
/// momentum, buf' = d at step 1, else momentum buf + (1 - dampening) d,
/// and d = d + momentum buf' (nesterov) or buf'; p' = p - lr d. Without
/// momentum buf is returned as it is; so is everything for a non-finite
/// gradScale.
Result<UpdateState> sgd(const Tensor &p, const Tensor &g, const Tensor &buf,
                        double lr, int64_t step, double momentum,
                        double dampening, double weightDecay, bool nesterov,
                        double gradScale);
/// Lion (Chen et al. 2023, Algorithm 2): g' = g gradScale; c = beta1 m +
/// (1 - beta1) g'; p' = p - lr weightDecay p - lr sign(c); m' = beta2 m +
/// (1 - beta2) g'. A non-finite gradScale returns p and m unchanged.
Result<UpdateState> lion(const Tensor &p, const Tensor &g, const Tensor &m,
                         double lr, double beta1, double beta2,
                         double weightDecay, double gradScale);
/// torch.optim.Adagrad (initial accumulator 0): d = g gradScale +
/// weightDecay p; sum' = sum + d^2; p' = p - lr / (1 + (step - 1) lrDecay)
/// d / (sqrt(sum') + eps). A non-finite gradScale returns p and sum.
Result<UpdateState> adagrad(const Tensor &p, const Tensor &g, const Tensor &sum,
                            double lr, int64_t step, double lrDecay, double eps,
                            double weightDecay, double gradScale);
/// Hyper-parameters of lamb (DeepSpeed's FusedLamb).
struct LambParams {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0;
  double minCoeff = 0.01, maxCoeff = 10;
  bool biasCorrection = true, epsInsideSqrt = false;
};
/// DeepSpeed's FusedLamb: g' = g gradScale; m' = beta1 m + (1 - beta1) g';
/// v' = beta2 v + (1 - beta2) g'^2; u = m' / (sqrt(v') + eps) + weightDecay
/// p (sqrt(v' + eps) with epsInsideSqrt); r = |p| / |u| clamped to
/// [minCoeff, maxCoeff] (1 when a norm is 0); p' = p - lr c r u, c =
/// sqrt(1 - beta2^step) / (1 - beta1^step) under biasCorrection, else 1.
/// A non-finite gradScale returns p, m and v unchanged.
Result<AdamWState> lamb(const Tensor &p, const Tensor &g, const Tensor &m,
                        const Tensor &v, double lr, int64_t step,
                        const LambParams &k, double gradScale);
/// Muon's momentum (DeepSpeed's muon_update): g' = g gradScale; buf' = buf
/// + (1 - momentum) (g' - buf); the direction is g' + momentum (buf' - g')
/// with nesterov, else buf'. A non-finite gradScale keeps buf and gives a
/// zero direction. Returns {buf', direction}.
Result<UpdateState> muonMomentum(const Tensor &g, const Tensor &buf,
                                 double momentum, bool nesterov,
                                 double gradScale);
/// The standard Newton-Schulz iteration on u as a rows x cols matrix (rows
/// = u's first dimension): X = u (transposed when rows > cols) / (|u|_F +
/// 1e-7), then `steps` times A = X X^T, X = a X + (b A + c A A) X with (a,
/// b, c) = (3.4445, -4.7750, 2.0315); transposed back, in u's shape. With
/// `heads`, each of the `heads` consecutive row blocks is its own matrix
/// (DeepSpeed's per_head_muon).
Result<Tensor> newtonSchulz(const Tensor &u, int64_t steps, int64_t heads = 1);
/// Muon's step: p (1 - lr weightDecay) - lr factor ortho, or p when
/// gradScale is not finite.
Result<Tensor> muonApply(const Tensor &p, const Tensor &ortho, double lr,
                         double weightDecay, double factor, double gradScale);
/// One Muon update of a matrix: the three above, factor = sqrt(max(1, rows
/// / cols)) of one head's block. Returns {p', buf'}.
Result<UpdateState> muon(const Tensor &p, const Tensor &g, const Tensor &buf,
                         double lr, double momentum, double weightDecay,
                         bool nesterov, int64_t nsSteps, double gradScale,
                         int64_t heads = 1);
/// sqrt(max(1, rows / cols)) for a tensor seen as rows = its first
/// dimension / heads by cols = the rest.
double muonFactor(const Shape &shape, int64_t heads = 1);
/// Normal draws use rng::normalAt(seed, tensorId, 0xFFFFFFFF, flatIndex).
Result<Tensor> init(InitKind kind, const Shape &shape, uint64_t seed,
                    uint32_t tensorId, double mean, double stddev);

} // namespace dsc::ref

#endif // DSC_RUNTIME_REFERENCE_REFKERNELS_H
