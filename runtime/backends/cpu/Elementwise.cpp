//===- Elementwise.cpp - binary and unary ops, activation gradients -------===//
//
// Binary ops broadcast through BroadcastLayout: the same-shape case is one
// contiguous run, a bias over the last dim is rows with the bias stride 0
// outside, anything else walks runs of the innermost merged dim. The inner
// loops have no calls or branches GCC cannot if-convert, so they vectorize
// (FastMath.h provides exp, tanh and the normal CDF). An output may be an
// input buffer: every loop reads element i before it writes element i, and
// GCC's alias check lets exact aliasing take the vector path.
//
//===----------------------------------------------------------------------===//

#include "runtime/backends/cpu/CpuCommon.h"
#include "runtime/backends/cpu/ElementwiseFunctors.h"

#include <cmath>
#include <limits>
#include <vector>

namespace dsc::rt::cpu {
namespace {

using namespace ew;

/// Elements per parallel chunk: below this a helper thread costs more than
/// it saves.
constexpr int64_t kGrain = 1 << 15;

//===--- Binary -----------------------------------------------------------===//

template <class Op>
void binaryRun(const float *a, int64_t sa, const float *b, int64_t sb,
               float *out, int64_t n) {
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i)
      out[i] = Op::f(a[i], b[i]);
  } else if (sa == 1 && sb == 0) {
    const float bv = *b;
    for (int64_t i = 0; i < n; ++i)
      out[i] = Op::f(a[i], bv);
  } else if (sa == 0 && sb == 1) {
    const float av = *a;
    for (int64_t i = 0; i < n; ++i)
      out[i] = Op::f(av, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i)
      out[i] = Op::f(a[i * sa], b[i * sb]);
  }
}

template <class Op> bool binaryBody(const KernelArgs &args, std::string &err) {
  if (!expectAllF32(args, err))
    return false;
  const TensorRef &a = args.inputs[0], &b = args.inputs[1];
  const TensorRef &out = args.outputs[0];
  if (!checkBroadcastBinary(err, a, b, out))
    return false;
  const BroadcastLayout l = broadcastLayout(out, &a, &b);
  const float *pa = a.f32(), *pb = b.f32();
  float *po = out.f32();
  const int64_t sa = l.strides[0][l.rank - 1], sb = l.strides[1][l.rank - 1];
  parallelFor(out.numel(), kGrain, [&](int64_t begin, int64_t end) {
    forEachRun(l, begin, end, [&](int64_t pos, const int64_t *off, int64_t n) {
      binaryRun<Op>(pa + off[0], sa, pb + off[1], sb, po + pos, n);
    });
  });
  return true;
}

//===--- Unary ------------------------------------------------------------===//

bool sameShapeF32(const KernelArgs &args, std::string &err) {
  if (!expectAllF32(args, err))
    return false;
  return checkSameShapes(args, err);
}

template <class Op> bool unaryBody(const KernelArgs &args, std::string &err) {
  if (!sameShapeF32(args, err))
    return false;
  const float *x = args.inputs[0].f32();
  float *y = args.outputs[0].f32();
  parallelFor(args.outputs[0].numel(), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      y[i] = Op::f(x[i]);
  });
  return true;
}

bool geluApprox(const KernelArgs &args, std::string &err, bool &tanhForm) {
  return checkGeluApprox(err, args.intAttrs[0], tanhForm);
}

//===--- Activation gradients: (x, g) -> g * act'(x) ----------------------===//

template <class Op>
bool activationGradBody(const KernelArgs &args, std::string &err) {
  if (!sameShapeF32(args, err))
    return false;
  const float *x = args.inputs[0].f32(), *g = args.inputs[1].f32();
  float *out = args.outputs[0].f32();
  parallelFor(args.outputs[0].numel(), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      out[i] = g[i] * Op::d(x[i]);
  });
  return true;
}

/// grad = g * act'(x) in place over [R, C] rows and dbias[c] = the sum of
/// column c of the result, in one pass: each thread owns a range of
/// columns and walks every row, so a value is summed while it is in the
/// cache. The values are activationGradBody's and each sum is reduce_sum's
/// (double, in row order), bit for bit.
template <class Op>
void activationGradColumnSums(const float *x, float *g, float *dbias, int64_t R,
                              int64_t C) {
  parallelFor(C, columnReductionGrain(R), [&](int64_t c0, int64_t c1) {
    std::vector<double> acc(size_t(c1 - c0), 0.0);
    for (int64_t i = 0; i < R; ++i) {
      const float *xr = x + i * C + c0;
      float *gr = g + i * C + c0;
      for (int64_t c = 0; c < c1 - c0; ++c) {
        const float v = gr[c] * Op::d(xr[c]);
        gr[c] = v;
        acc[size_t(c)] += v;
      }
    }
    for (int64_t c = c0; c < c1; ++c)
      dbias[c] = float(acc[size_t(c - c0)]);
  });
}

template <class Op>
bool biasActivation(const KernelArgs &args, std::string &err) {
  if (!expectAllF32(args, err))
    return false;
  const TensorRef &x = args.inputs[0], &bias = args.inputs[1];
  const TensorRef &sum = args.outputs[0], &out = args.outputs[1];
  int64_t rows = 0, cols = 0;
  if (!checkBiasRows(err, x, bias, sum, out, rows, cols))
    return false;
  const float *xp = x.f32(), *b = bias.f32();
  float *sp = sum.f32(), *op = out.f32();
  parallelFor(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(cols, 1)),
              [&](int64_t r0, int64_t r1) {
                for (int64_t r = r0; r < r1; ++r) {
                  const float *xr = xp + r * cols;
                  float *sr = sp + r * cols, *yr = op + r * cols;
                  for (int64_t j = 0; j < cols; ++j) {
                    float v = xr[j] + b[j];
                    sr[j] = v;
                    yr[j] = Op::f(v);
                  }
                }
              });
  return true;
}

} // namespace

bool addBody(const KernelArgs &a, std::string &e) {
  return binaryBody<AddOp>(a, e);
}
bool subBody(const KernelArgs &a, std::string &e) {
  return binaryBody<SubOp>(a, e);
}
bool mulBody(const KernelArgs &a, std::string &e) {
  return binaryBody<MulOp>(a, e);
}
bool divBody(const KernelArgs &a, std::string &e) {
  return binaryBody<DivOp>(a, e);
}
bool minimumBody(const KernelArgs &a, std::string &e) {
  return binaryBody<MinimumOp>(a, e);
}
bool maximumBody(const KernelArgs &a, std::string &e) {
  return binaryBody<MaximumOp>(a, e);
}
bool equalBody(const KernelArgs &a, std::string &e) {
  return binaryBody<EqualOp>(a, e);
}

bool negBody(const KernelArgs &a, std::string &e) {
  return unaryBody<NegOp>(a, e);
}
bool expBody(const KernelArgs &a, std::string &e) {
  return unaryBody<ExpOp>(a, e);
}
bool logBody(const KernelArgs &a, std::string &e) {
  return unaryBody<LogOp>(a, e);
}
bool tanhBody(const KernelArgs &a, std::string &e) {
  return unaryBody<TanhOp>(a, e);
}
bool sqrtBody(const KernelArgs &a, std::string &e) {
  return unaryBody<SqrtOp>(a, e);
}
bool rsqrtBody(const KernelArgs &a, std::string &e) {
  return unaryBody<RsqrtOp>(a, e);
}
bool reluBody(const KernelArgs &a, std::string &e) {
  return unaryBody<ReluOp>(a, e);
}
bool siluBody(const KernelArgs &a, std::string &e) {
  return unaryBody<SiluOp>(a, e);
}

// silu(gate) * up over equal shapes (Llama's SwiGLU): the activation
// gradients' loop, g * f(x), with gate as x, up as g and silu as f.
bool swigluBody(const KernelArgs &a, std::string &e) {
  return activationGradBody<SwigluGate>(a, e);
}

bool geluBody(const KernelArgs &a, std::string &e) {
  bool tanhForm = false;
  if (!geluApprox(a, e, tanhForm))
    return false;
  return tanhForm ? unaryBody<GeluTanhOp>(a, e) : unaryBody<GeluErfOp>(a, e);
}

bool reluGradBody(const KernelArgs &a, std::string &e) {
  return activationGradBody<ReluGradOp>(a, e);
}
bool siluGradBody(const KernelArgs &a, std::string &e) {
  return activationGradBody<SiluGradOp>(a, e);
}
bool geluGradBody(const KernelArgs &a, std::string &e) {
  bool tanhForm = false;
  if (!geluApprox(a, e, tanhForm))
    return false;
  return tanhForm ? activationGradBody<GeluTanhGradOp>(a, e)
                  : activationGradBody<GeluErfGradOp>(a, e);
}

bool geluGradColumnSums(const KernelArgs &step, const TensorRef &dbias,
                        std::string &e) {
  bool tanhForm = false;
  if (!geluApprox(step, e, tanhForm) || !sameShapeF32(step, e))
    return false;
  const TensorRef &g = step.outputs[0];
  const int64_t C = dbias.numel(), R = C > 0 ? g.numel() / C : 0;
  const float *x = step.inputs[0].f32();
  float *gp = g.f32(), *db = dbias.f32();
  if (tanhForm)
    activationGradColumnSums<GeluTanhGradOp>(x, gp, db, R, C);
  else
    activationGradColumnSums<GeluErfGradOp>(x, gp, db, R, C);
  return true;
}

bool biasGeluBody(const KernelArgs &a, std::string &e) {
  bool tanhForm = false;
  if (!geluApprox(a, e, tanhForm))
    return false;
  return tanhForm ? biasActivation<GeluTanhOp>(a, e)
                  : biasActivation<GeluErfOp>(a, e);
}

} // namespace dsc::rt::cpu

namespace dsc::rt::cpu {

bool overflowGuardBody(const KernelArgs &a, std::string &e) {
  if (!expectAllF32(a, e))
    return false;
  float scale, norm;
  if (!scalarOperand(e, a.inputs[0], "scale", scale) ||
      !scalarOperand(e, a.inputs[1], "norm", norm))
    return false;
  *a.outputs[0].f32() =
      std::isfinite(norm) ? scale : std::numeric_limits<float>::quiet_NaN();
  return true;
}

} // namespace dsc::rt::cpu
